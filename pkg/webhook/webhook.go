// Package webhook is rebalancer's namespace opt-in for clusters whose
// kube-scheduler cannot be configured (EKS, GKE, AKS): a mutating admission
// webhook that sets spec.schedulerName to rebalancer-scheduler on new pods
// of the namespaces labelled rebalancer.dev/scheduler=enabled, so their
// replacements follow rebalancer's hints. Pods that name a scheduler other
// than default-scheduler are left alone. The API server sends it only the
// pods of opted-in namespaces (the configuration's namespaceSelector), and
// with failurePolicy Ignore a webhook that is down never blocks a pod.
package webhook

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/klog/v2"
	sigsjson "sigs.k8s.io/json"

	"github.com/rebalancer-dev/rebalancer/internal/serving"
	"github.com/rebalancer-dev/rebalancer/pkg/wellknown"
)

const (
	// MutatePath is where the webhook is served.
	MutatePath = "/mutate"
	// Enabled, as wellknown.SchedulerLabel's value, opts a namespace in;
	// Disabled on a pod opts that pod out again.
	Enabled  = "enabled"
	Disabled = "disabled"
)

// maxBody bounds an AdmissionReview: the webhook is registered for pod
// creation only, and the API server sends a created object of at most
// 3 MiB (its request limit) with a little of the review around it. budget
// bounds the reviews read at once (serving.Limit): a decoded review takes
// several times its size and the chart gives the webhook 128Mi, so the
// largest are read one at a time (16 callers at once: 83 MiB peak, against
// 214 MiB unbounded), while reviews of common pods (a few KiB) still run
// hundreds at a time.
const (
	maxBody = 4 << 20
	budget  = maxBody
)

var podsResource = metav1.GroupVersionResource{Version: "v1", Resource: "pods"}

// mutator answers AdmissionReviews for pod creation.
type mutator struct {
	logger klog.Logger
	// scheduler is the schedulerName given to opted-in pods.
	scheduler string
	metrics   *metrics
}

// newMutator returns a webhook that gives opted-in pods the scheduler named.
func newMutator(logger klog.Logger, scheduler string, m *metrics) *mutator {
	return &mutator{logger: logger, scheduler: scheduler, metrics: m}
}

// ServeHTTP serves AdmissionReview v1.
func (wh *mutator) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	code, result := wh.serve(w, r)
	wh.metrics.observe(code, result, time.Since(start))
}

func (wh *mutator) serve(w http.ResponseWriter, r *http.Request) (int, string) {
	fail := func(code int, err error) (int, string) {
		wh.logger.V(2).Info("Refused an admission request", "code", code, "err", err.Error())
		http.Error(w, err.Error(), code)
		return code, resultError
	}
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		return fail(http.StatusMethodNotAllowed, fmt.Errorf("%s %s: only POST", r.Method, r.URL.Path))
	}
	req, err := decodeReview(http.MaxBytesReader(w, r.Body, maxBody))
	if err != nil {
		return fail(serving.Status(err), err)
	}
	resp, result := wh.Admit(req)
	out, err := json.Marshal(admissionv1.AdmissionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: admissionv1.SchemeGroupVersion.String(), Kind: "AdmissionReview"},
		Response: resp,
	})
	if err != nil {
		return fail(http.StatusInternalServerError, err)
	}
	w.Header().Set("Content-Type", "application/json")
	if _, err := w.Write(out); err != nil {
		wh.logger.V(2).Info("Writing an admission response failed", "err", err)
	}
	return http.StatusOK, result
}

// Results of a review in rebalancer_webhook_requests_total.
const (
	resultMutated   = "mutated"
	resultUnchanged = "unchanged"
	resultError     = "error"
)

// Admit allows every pod; a pod of an opted-in namespace that names no
// scheduler or default-scheduler, and is not labelled to opt out, is given
// the webhook's scheduler with a JSON patch.
func (wh *mutator) Admit(req *admissionv1.AdmissionRequest) (*admissionv1.AdmissionResponse, string) {
	resp := &admissionv1.AdmissionResponse{UID: req.UID, Allowed: true}
	var pod v1.Pod
	if err := json.Unmarshal(req.Object.Raw, &pod); err != nil {
		// Never refuse a pod for the webhook's own sake.
		wh.logger.Error(err, "Admitting a pod that does not decode, unchanged", "uid", req.UID, "namespace", req.Namespace)
		return resp, resultError
	}
	if !takes(&pod) {
		return resp, resultUnchanged
	}
	patch, _ := json.Marshal([]map[string]string{{"op": "add", "path": "/spec/schedulerName", "value": wh.scheduler}})
	pt := admissionv1.PatchTypeJSONPatch
	resp.Patch, resp.PatchType = patch, &pt
	wh.logger.V(3).Info("Pod given the scheduler", "namespace", req.Namespace, "pod", podName(req, &pod), "scheduler", wh.scheduler)
	return resp, resultMutated
}

// takes says whether the webhook gives pod its scheduler: the pod names
// none or default-scheduler (one that chose another keeps it) and is not
// labelled to opt out. The API server's selectors decide which pods are
// sent; this is the webhook's own rule, which the planner applies too.
func takes(pod *v1.Pod) bool {
	if pod.Labels[wellknown.SchedulerLabel] == Disabled {
		return false
	}
	return pod.Spec.SchedulerName == "" || pod.Spec.SchedulerName == v1.DefaultSchedulerName
}

func podName(req *admissionv1.AdmissionRequest, pod *v1.Pod) string {
	switch {
	case req.Name != "":
		return req.Name
	case pod.Name != "":
		return pod.Name
	default:
		return pod.GenerateName + "*"
	}
}

// decodeReview reads an AdmissionReview v1 for the creation of a pod, as the
// API server sends it. Every problem is an error naming the field.
func decodeReview(r io.Reader) (*admissionv1.AdmissionRequest, error) {
	body, err := serving.ReadBody(r, "an AdmissionReview")
	if err != nil {
		return nil, err
	}
	// Case-sensitive, as the API server decodes; fields a newer API server
	// adds are ignored, not refused.
	var review admissionv1.AdmissionReview
	if err := sigsjson.UnmarshalCaseSensitivePreserveInts(body, &review); err != nil {
		return nil, fmt.Errorf("request body is not an AdmissionReview: %w", err)
	}
	if gvk := review.GroupVersionKind(); gvk != admissionv1.SchemeGroupVersion.WithKind("AdmissionReview") {
		return nil, fmt.Errorf("apiVersion %q, kind %q: want %s AdmissionReview (list only v1 in admissionReviewVersions)",
			review.APIVersion, review.Kind, admissionv1.SchemeGroupVersion)
	}
	req := review.Request
	switch {
	case req == nil:
		return nil, errors.New("request: required")
	case req.UID == "":
		return nil, errors.New("request.uid: required")
	case req.Resource != podsResource:
		return nil, fmt.Errorf("request.resource %s: want pods (the webhook configuration's rules name pods only)", schema.GroupVersionResource(req.Resource))
	case req.SubResource != "":
		return nil, fmt.Errorf("request.subResource %q: want none", req.SubResource)
	case req.Operation != admissionv1.Create:
		return nil, fmt.Errorf("request.operation %q: want CREATE", req.Operation)
	case len(req.Object.Raw) == 0:
		return nil, errors.New("request.object: required")
	}
	return req, nil
}
