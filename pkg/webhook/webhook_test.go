package webhook

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	jsonpatch "gopkg.in/evanphx/json-patch.v4"
	admissionv1 "k8s.io/api/admission/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/klog/v2/ktesting"

	"github.com/rebalancer-dev/rebalancer/pkg/wellknown"
)

func review(pod *v1.Pod, mutate func(*admissionv1.AdmissionReview)) []byte {
	raw, _ := json.Marshal(pod)
	r := admissionv1.AdmissionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
		Request: &admissionv1.AdmissionRequest{
			UID: "req-1", Kind: metav1.GroupVersionKind{Version: "v1", Kind: "Pod"},
			Resource: metav1.GroupVersionResource{Version: "v1", Resource: "pods"}, Namespace: "shop",
			Operation: admissionv1.Create, Object: runtime.RawExtension{Raw: raw},
		},
	}
	if mutate != nil {
		mutate(&r)
	}
	b, _ := json.Marshal(r)
	return b
}

func pod(scheduler string, labels map[string]string) *v1.Pod {
	return &v1.Pod{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{GenerateName: "web-", Namespace: "shop", Labels: labels},
		Spec:       v1.PodSpec{SchedulerName: scheduler, Containers: []v1.Container{{Name: "c", Image: "x"}}},
	}
}

type env struct {
	wh  *mutator
	reg *prometheus.Registry
}

func newEnv(t *testing.T) env {
	logger, _ := ktesting.NewTestContext(t)
	reg := prometheus.NewRegistry()
	return env{wh: newMutator(logger, "rebalancer-scheduler", newMetrics(reg)), reg: reg}
}

func (e env) post(t *testing.T, body []byte) (int, string, *admissionv1.AdmissionReview) {
	t.Helper()
	rec := httptest.NewRecorder()
	e.wh.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, MutatePath, bytes.NewReader(body)))
	if rec.Code != http.StatusOK {
		return rec.Code, rec.Body.String(), nil
	}
	var out admissionv1.AdmissionReview
	if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil {
		t.Fatalf("response is not an AdmissionReview: %v", err)
	}
	return rec.Code, rec.Body.String(), &out
}

// schedulerAfter applies the response's patch to the pod, as the API server
// does, and returns the pod's schedulerName.
func schedulerAfter(t *testing.T, p *v1.Pod, r *admissionv1.AdmissionResponse) string {
	t.Helper()
	if !r.Allowed {
		t.Fatalf("pod refused: %+v", r.Result)
	}
	if r.Patch == nil {
		return p.Spec.SchedulerName
	}
	if r.PatchType == nil || *r.PatchType != admissionv1.PatchTypeJSONPatch {
		t.Fatalf("patch type %v", r.PatchType)
	}
	patch, err := jsonpatch.DecodePatch(r.Patch)
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := json.Marshal(p)
	out, err := patch.Apply(raw)
	if err != nil {
		t.Fatalf("the patch does not apply: %v", err)
	}
	var after v1.Pod
	if err := json.Unmarshal(out, &after); err != nil {
		t.Fatal(err)
	}
	return after.Spec.SchedulerName
}

func TestAdmit(t *testing.T) {
	e := newEnv(t)
	for _, c := range []struct {
		name string
		pod  *v1.Pod
		want string
	}{
		{"no scheduler", pod("", nil), "rebalancer-scheduler"},
		{"default-scheduler", pod("default-scheduler", nil), "rebalancer-scheduler"},
		{"its own scheduler", pod("gpu-scheduler", nil), "gpu-scheduler"},
		{"already rebalancer-scheduler", pod("rebalancer-scheduler", nil), "rebalancer-scheduler"},
		{"opted out", pod("", map[string]string{wellknown.SchedulerLabel: Disabled}), ""},
	} {
		code, body, out := e.post(t, review(c.pod, nil))
		if code != 200 || out.Response == nil || out.Response.UID != "req-1" || out.Kind != "AdmissionReview" {
			t.Fatalf("%s: %d %s", c.name, code, body)
		}
		if got := schedulerAfter(t, c.pod, out.Response); got != c.want {
			t.Errorf("%s: schedulerName %q after admission, want %q", c.name, got, c.want)
		}
	}
	if got := testutil.ToFloat64(e.wh.metrics.requests.WithLabelValues("200", resultMutated)); got != 2 {
		t.Errorf("mutated = %v, want 2", got)
	}
}

// A pod the webhook cannot read is admitted unchanged: the webhook never
// blocks a pod for its own sake.
func TestUndecodablePodAdmitted(t *testing.T) {
	e := newEnv(t)
	_, _, out := e.post(t, review(pod("", nil), func(r *admissionv1.AdmissionReview) {
		r.Request.Object.Raw = []byte(`{"spec": 3}`)
	}))
	if out == nil || !out.Response.Allowed || out.Response.Patch != nil {
		t.Fatalf("want allowed, unchanged: %+v", out)
	}
}

func TestBadReviews(t *testing.T) {
	e := newEnv(t)
	p := pod("", nil)
	for _, c := range []struct {
		name, body, want string
	}{
		{"empty", "", "empty request body"},
		{"not json", "{", "not an AdmissionReview"},
		{"v1beta1", string(review(p, func(r *admissionv1.AdmissionReview) { r.APIVersion = "admission.k8s.io/v1beta1" })), "want admission.k8s.io/v1 AdmissionReview"},
		{"no request", string(review(p, func(r *admissionv1.AdmissionReview) { r.Request = nil })), "request: required"},
		{"no uid", string(review(p, func(r *admissionv1.AdmissionReview) { r.Request.UID = "" })), "request.uid: required"},
		{"deployment", string(review(p, func(r *admissionv1.AdmissionReview) {
			r.Request.Resource = metav1.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}
		})), "want pods"},
		{"binding", string(review(p, func(r *admissionv1.AdmissionReview) { r.Request.SubResource = "binding" })), "request.subResource"},
		{"update", string(review(p, func(r *admissionv1.AdmissionReview) { r.Request.Operation = admissionv1.Update })), "want CREATE"},
		{"no object", string(review(p, func(r *admissionv1.AdmissionReview) { r.Request.Object.Raw = nil })), "request.object: required"},
		{"wrong case", strings.Replace(string(review(p, nil)), `"request"`, `"Request"`, 1), "request: required"},
	} {
		code, body, _ := e.post(t, []byte(c.body))
		if code != http.StatusBadRequest || !strings.Contains(body, c.want) {
			t.Errorf("%s: %d %q, want 400 with %q", c.name, code, body, c.want)
		}
	}
	rec := httptest.NewRecorder()
	e.wh.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, MutatePath, nil))
	if rec.Code != http.StatusMethodNotAllowed {
		t.Errorf("GET: %d", rec.Code)
	}
}
