package webhook

import (
	"context"
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/klog/v2/ktesting"
	"k8s.io/utils/ptr"

	"github.com/rebalancer-dev/rebalancer/pkg/wellknown"
)

func configFor(url string, ca []byte) *admissionregistrationv1.MutatingWebhookConfiguration {
	return &admissionregistrationv1.MutatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: DefaultConfiguration},
		Webhooks: []admissionregistrationv1.MutatingWebhook{{
			Name:              "pods.rebalancer.dev",
			ClientConfig:      admissionregistrationv1.WebhookClientConfig{URL: ptr.To(url), CABundle: ca},
			NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{wellknown.SchedulerLabel: Enabled}},
			ObjectSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
				{Key: wellknown.SchedulerLabel, Operator: metav1.LabelSelectorOpNotIn, Values: []string{Disabled}}}},
			TimeoutSeconds: ptr.To[int32](2),
		}},
	}
}

// TestLive reads the configuration, asks the webhook, and applies the
// configuration's selectors and the scheduler the webhook answered with.
func TestLive(t *testing.T) {
	logger, ctx := ktesting.NewTestContext(t)
	srv := httptest.NewTLSServer(newMutator(logger, "packing-scheduler", newMetrics(prometheus.NewRegistry())))
	defer srv.Close()
	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})

	client := fake.NewClientset()
	if o, err := Live(ctx, client, DefaultConfiguration); o != nil || err != nil {
		t.Fatalf("no configuration: %v %v, want nothing", o, err)
	}
	if _, err := client.AdmissionregistrationV1().MutatingWebhookConfigurations().Create(ctx, configFor(srv.URL+MutatePath, ca), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	o, err := Live(ctx, client, DefaultConfiguration)
	if err != nil {
		t.Fatal(err)
	}
	labelled := &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "a", Labels: map[string]string{wellknown.SchedulerLabel: Enabled}}}
	plain := &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "b"}}
	for _, c := range []struct {
		pod  *v1.Pod
		ns   *v1.Namespace
		want string
	}{
		{pod("", nil), labelled, "packing-scheduler"},
		{pod("default-scheduler", nil), labelled, "packing-scheduler"},
		{pod("gpu-scheduler", nil), labelled, ""},
		{pod("", map[string]string{wellknown.SchedulerLabel: Disabled}), labelled, ""},
		{pod("", nil), plain, ""},
		{pod("", nil), nil, ""},
	} {
		if got := o.SchedulerFor(c.pod, c.ns); got != c.want {
			t.Errorf("pod %q %v in %v: %q, want %q", c.pod.Spec.SchedulerName, c.pod.Labels, c.ns, got, c.want)
		}
	}
}

// A configuration without an objectSelector sends opted-out pods too; the
// webhook leaves them alone, and so does the planner's rule.
func TestSchedulerForFollowsTheWebhooksOwnRule(t *testing.T) {
	o := &OptIn{Namespaces: labels.Everything(), Pods: labels.Everything(), Scheduler: "rebalancer-scheduler"}
	ns := &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "a"}}
	if got := o.SchedulerFor(pod("", map[string]string{wellknown.SchedulerLabel: Disabled}), ns); got != "" {
		t.Errorf("an opted-out pod is planned as %q's", got)
	}
	if got := o.SchedulerFor(pod("", nil), ns); got != "rebalancer-scheduler" {
		t.Errorf("a pod without a scheduler is planned as %q's", got)
	}
}

func TestProbeFailures(t *testing.T) {
	logger, _ := ktesting.NewTestContext(t)
	mux := http.NewServeMux()
	mux.Handle(MutatePath, newMutator(logger, "rebalancer-scheduler", newMetrics(prometheus.NewRegistry())))
	srv := httptest.NewTLSServer(mux)
	defer srv.Close()
	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	notOurs := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","response":{"uid":"x","allowed":true}}`))
	}))
	defer notOurs.Close()
	notOursCA := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: notOurs.Certificate().Raw})
	for _, c := range []struct {
		name string
		cc   admissionregistrationv1.WebhookClientConfig
		want string
	}{
		{"untrusted", admissionregistrationv1.WebhookClientConfig{URL: ptr.To(srv.URL + MutatePath)}, "does not answer"},
		{"bad bundle", admissionregistrationv1.WebhookClientConfig{URL: ptr.To(srv.URL + MutatePath), CABundle: []byte("x")}, "caBundle"},
		{"wrong path", admissionregistrationv1.WebhookClientConfig{URL: ptr.To(srv.URL + "/nope"), CABundle: ca}, "404"},
		{"not ours", admissionregistrationv1.WebhookClientConfig{URL: ptr.To(notOurs.URL), CABundle: notOursCA}, "does not set spec.schedulerName"},
		{"no address", admissionregistrationv1.WebhookClientConfig{}, "neither url nor service"},
	} {
		if _, err := Probe(context.Background(), c.cc, ptr.To[int32](2)); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", c.name, err, c.want)
		}
	}
}
