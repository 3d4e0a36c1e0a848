package webhook

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"

	"github.com/rebalancer-dev/rebalancer/pkg/wellknown"
)

// DefaultConfiguration is the MutatingWebhookConfiguration manifests/webhook
// installs.
const DefaultConfiguration = "rebalancer-webhook"

// OptIn says which pods the webhook gives another scheduler: those that
// name default-scheduler (or none), in a namespace its namespaceSelector
// matches, with labels its objectSelector matches. The planner plans such
// a pod as that scheduler's, since its replacement will be.
type OptIn struct {
	Namespaces, Pods labels.Selector
	Scheduler        string
	// From says where the rule was read, for the plan's note.
	From string
}

// DefaultOptIn is the rule of the shipped webhook for the namespaces
// selector, e.g. from a flag when planning offline.
func DefaultOptIn(namespaces labels.Selector, from string) *OptIn {
	pods, _ := labels.Parse(wellknown.SchedulerLabel + "!=" + Disabled)
	return &OptIn{Namespaces: namespaces, Pods: pods, Scheduler: "rebalancer-scheduler", From: from}
}

// SchedulerFor returns the scheduler the webhook gives pod, in namespace ns
// (nil: unknown, not opted in), or "" when it leaves the pod alone.
func (o *OptIn) SchedulerFor(pod *v1.Pod, ns *v1.Namespace) string {
	if o == nil || ns == nil || !takes(pod) {
		return ""
	}
	if !o.Namespaces.Matches(labels.Set(ns.Labels)) || !o.Pods.Matches(labels.Set(pod.Labels)) {
		return ""
	}
	return o.Scheduler
}

// Live reads the webhook configuration name and asks the webhook it names
// whether it answers, as the API server would call it. It returns nil
// without an error when the configuration does not exist (the webhook is
// not installed), and nil with an error saying why when the webhook cannot
// be counted on: pods of opted-in namespaces are then planned as their own
// scheduler's.
func Live(ctx context.Context, client kubernetes.Interface, name string) (*OptIn, error) {
	cfg, err := client.AdmissionregistrationV1().MutatingWebhookConfigurations().Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading MutatingWebhookConfiguration %s: %w", name, err)
	}
	if len(cfg.Webhooks) != 1 {
		return nil, fmt.Errorf("MutatingWebhookConfiguration %s has %d webhooks, want rebalancer's one", name, len(cfg.Webhooks))
	}
	wh := cfg.Webhooks[0]
	from := fmt.Sprintf("MutatingWebhookConfiguration %s", name)
	namespaces, err := selector(wh.NamespaceSelector)
	if err != nil {
		return nil, fmt.Errorf("%s: webhooks[0].namespaceSelector: %w", from, err)
	}
	pods, err := selector(wh.ObjectSelector)
	if err != nil {
		return nil, fmt.Errorf("%s: webhooks[0].objectSelector: %w", from, err)
	}
	scheduler, err := Probe(ctx, wh.ClientConfig, wh.TimeoutSeconds)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", from, err)
	}
	return &OptIn{Namespaces: namespaces, Pods: pods, Scheduler: scheduler, From: from}, nil
}

func selector(s *metav1.LabelSelector) (labels.Selector, error) {
	if s == nil {
		return labels.Everything(), nil
	}
	return metav1.LabelSelectorAsSelector(s)
}

// Probe sends the webhook an AdmissionReview for a pod that names no
// scheduler, the way the API server calls it (the client configuration's
// URL or Service, its caBundle, the timeout), and returns the scheduler the
// webhook gives the pod. It fails unless the webhook answers, allows the
// pod and sets a scheduler.
func Probe(ctx context.Context, cc admissionregistrationv1.WebhookClientConfig, timeoutSeconds *int32) (string, error) {
	url, err := endpoint(cc)
	if err != nil {
		return "", err
	}
	roots, err := x509.SystemCertPool()
	if err != nil || len(cc.CABundle) > 0 {
		roots = x509.NewCertPool()
	}
	if len(cc.CABundle) > 0 && !roots.AppendCertsFromPEM(cc.CABundle) {
		return "", errors.New("clientConfig.caBundle holds no PEM certificate")
	}
	timeout := 10 * time.Second // the API server's default
	if timeoutSeconds != nil {
		timeout = time.Duration(*timeoutSeconds) * time.Second
	}
	client := &http.Client{Timeout: timeout, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}}}
	defer client.CloseIdleConnections()

	raw, _ := json.Marshal(&v1.Pod{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{Name: "rebalancer-probe", Namespace: metav1.NamespaceDefault},
		Spec:       v1.PodSpec{Containers: []v1.Container{{Name: "probe", Image: "probe"}}},
	})
	body, _ := json.Marshal(admissionv1.AdmissionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: admissionv1.SchemeGroupVersion.String(), Kind: "AdmissionReview"},
		Request: &admissionv1.AdmissionRequest{
			UID: "rebalancer-probe", Kind: metav1.GroupVersionKind{Version: "v1", Kind: "Pod"}, Resource: podsResource,
			Namespace: metav1.NamespaceDefault, Operation: admissionv1.Create, Object: runtime.RawExtension{Raw: raw},
			DryRun: func(b bool) *bool { return &b }(true),
		},
	})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return "", err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		return "", fmt.Errorf("the webhook does not answer: %w", err)
	}
	defer func() { _ = resp.Body.Close() }()
	out, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("POST %s: %s: %s", url, resp.Status, strings.TrimSpace(string(out)))
	}
	var review admissionv1.AdmissionReview
	if err := json.Unmarshal(out, &review); err != nil || review.Response == nil {
		return "", fmt.Errorf("POST %s: the answer is not an AdmissionReview response", url)
	}
	if !review.Response.Allowed {
		return "", fmt.Errorf("POST %s: the webhook refused a pod", url)
	}
	var patch []struct {
		Op, Path string
		Value    string
	}
	if err := json.Unmarshal(review.Response.Patch, &patch); err != nil || len(patch) != 1 || patch[0].Path != "/spec/schedulerName" || patch[0].Value == "" {
		return "", fmt.Errorf("POST %s: the webhook does not set spec.schedulerName: it is not rebalancer's", url)
	}
	return patch[0].Value, nil
}

// endpoint is where the API server sends a webhook's requests.
func endpoint(cc admissionregistrationv1.WebhookClientConfig) (string, error) {
	switch {
	case cc.URL != nil:
		return *cc.URL, nil
	case cc.Service != nil:
		port := int32(443)
		if cc.Service.Port != nil {
			port = *cc.Service.Port
		}
		path := ""
		if cc.Service.Path != nil {
			path = *cc.Service.Path
		}
		return fmt.Sprintf("https://%s.%s.svc:%d%s", cc.Service.Name, cc.Service.Namespace, port, path), nil
	default:
		return "", errors.New("clientConfig: neither url nor service")
	}
}
