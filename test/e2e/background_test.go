//go:build e2e

package e2e

import (
	"crypto/tls"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/descheduler/pkg/descheduler/evictions"

	"github.com/rebalancer-dev/rebalancer/internal/testcert"
	"github.com/rebalancer-dev/rebalancer/pkg/plan"
)

// TestEvictionsInBackground: pods that ask to be evicted in the background
// (request-evict-only), as KubeVirt's VM pods do, next to pods that do
// not. A validating webhook on pods/eviction plays the owner: it answers
// such a pod's eviction 429 "Eviction triggered evacuation" and marks the
// pod eviction-in-progress, as KubeVirt does when it starts a live
// migration. One `run --once` reports those moves in the background,
// asked once each, and evicts the others; a plan made while they are in
// flight does not move them again and counts them. When the "migration"
// ends (the pod is deleted), its owner's replacement is placed as planned.
func TestEvictionsInBackground(t *testing.T) {
	needScheduler(t)
	e := newTestEnv(t)

	var mu sync.Mutex
	asked := map[string]int{} // evictions asked per pod
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var review admissionv1.AdmissionReview
		if err := json.NewDecoder(r.Body).Decode(&review); err != nil || review.Request == nil {
			http.Error(w, "not an AdmissionReview", http.StatusBadRequest)
			return
		}
		req := review.Request
		resp := &admissionv1.AdmissionResponse{UID: req.UID, Allowed: true}
		pod, err := client.CoreV1().Pods(req.Namespace).Get(r.Context(), req.Name, metav1.GetOptions{})
		if _, asks := pod.Annotations[evictions.EvictionRequestAnnotationKey]; err == nil && asks {
			mu.Lock()
			asked[req.Name]++
			mu.Unlock()
			resp.Allowed = false
			resp.Result = &metav1.Status{Code: http.StatusTooManyRequests, Reason: metav1.StatusReasonTooManyRequests, Message: evictions.EvictionInBackgroundErrorText}
			if req.DryRun == nil || !*req.DryRun {
				patch := fmt.Appendf(nil, `{"metadata":{"annotations":{%q:"true"}}}`, evictions.EvictionInProgressAnnotationKey)
				if _, err := client.CoreV1().Pods(req.Namespace).Patch(r.Context(), req.Name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
					t.Errorf("marking %s in progress: %v", req.Name, err)
				}
			}
		}
		review.Response = resp
		_ = json.NewEncoder(w).Encode(review)
	})
	certFile, keyFile, ca := testcert.Write(t, t.TempDir())
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		t.Fatal(err)
	}
	server := httptest.NewUnstartedServer(handler)
	server.TLS = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	server.StartTLS()
	t.Cleanup(server.Close)

	webhook := &admissionregistrationv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: "evacuate-" + e.name},
		Webhooks: []admissionregistrationv1.ValidatingWebhook{{
			Name:         "evacuate.rebalancer.dev",
			ClientConfig: admissionregistrationv1.WebhookClientConfig{URL: ptr.To(server.URL + "/"), CABundle: ca},
			Rules: []admissionregistrationv1.RuleWithOperations{{
				Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
				Rule:       admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"pods/eviction"}},
			}},
			NamespaceSelector:       &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": e.ns}},
			FailurePolicy:           ptr.To(admissionregistrationv1.Fail),
			SideEffects:             ptr.To(admissionregistrationv1.SideEffectClassNoneOnDryRun),
			AdmissionReviewVersions: []string{"v1"},
			TimeoutSeconds:          ptr.To(int32(5)),
		}},
	}
	if _, err := client.AdmissionregistrationV1().ValidatingWebhookConfigurations().Create(e.ctx, webhook, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = client.AdmissionregistrationV1().ValidatingWebhookConfigurations().Delete(e.ctx, webhook.Name, metav1.DeleteOptions{})
	})

	nodes := e.nodeNames("bg", 6)
	e.addNodes("8", nodes...)
	e.fragmentedReplicaSetWith(schedulerName, "vm", resources("1", "1Gi"), map[string]string{evictions.EvictionRequestAnnotationKey: ""}, nodes)
	e.fragmentedReplicaSet("web", resources("1", "1Gi"), nodes)
	before := append(e.boundPods("vm", len(nodes)), e.boundPods("web", len(nodes))...)

	res := runOnce(t, "--policy", e.narrowedPolicy(), "--drain-timeout", "5s")
	background := map[string]plan.Move{}
	for _, m := range res.Result.InBackground {
		if m.Namespace == e.ns {
			background[m.Name] = m
		}
	}
	evicted := 0
	for _, m := range res.Result.Evicted {
		if m.Namespace != e.ns {
			continue
		}
		evicted++
		if m.Owner == nil || m.Owner.Name != "web" {
			t.Errorf("%s evicted outright; only the web pods should be", m.Pod)
		}
	}
	for _, s := range res.Result.Skipped {
		if s.Move.Namespace == e.ns {
			t.Errorf("%s not carried out: %s %s", s.Move.Pod, s.Reason, s.Detail)
		}
	}
	if len(background) == 0 || evicted == 0 {
		t.Fatalf("%d moves in the background, %d evicted; want both kinds: plan %d moves, skipped %v",
			len(background), evicted, len(res.Plan.Moves), res.Plan.Summary.SkippedByReason)
	}
	mu.Lock()
	for name := range background {
		if asked[name] != 1 {
			t.Errorf("%s: eviction asked %d times, want once: an evacuation is not retried", name, asked[name])
		}
	}
	mu.Unlock()

	// While their owners evacuate them, a plan leaves them alone and
	// counts them.
	var again plan.Plan
	rebalancerJSON(t, kubeconfig, &again, "plan", "--policy", e.narrowedPolicy(), "--scheduler-config", filepath.Join(repoRoot, "policies", "binpacking-scheduler.yaml"))
	if again.Summary.EvictionsInFlight < len(background) {
		t.Errorf("a plan while %d pods are evacuated counts %d evictions in flight", len(background), again.Summary.EvictionsInFlight)
	}
	for _, m := range again.Moves {
		if _, ok := background[m.Name]; ok && m.Namespace == e.ns {
			t.Errorf("%s moved again while its owner evacuates it", m.Pod)
		}
	}

	// The migrations end: the pods go, their owner's replacements are placed.
	for name := range background {
		if err := client.CoreV1().Pods(e.ns).Delete(e.ctx, name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	moves := append([]plan.Move{}, res.Result.Evicted...)
	for _, m := range background {
		moves = append(moves, m)
	}
	var mine []plan.Move
	for _, m := range moves {
		if m.Namespace == e.ns {
			mine = append(mine, m)
		}
	}
	deadline := time.Now().Add(time.Minute)
	var after []v1.Pod
	for {
		after = append(e.boundPods("vm", len(nodes)), e.boundPods("web", len(nodes))...)
		if onTarget, _ := landed(mine, uidsOf(before), after); onTarget == len(mine) || time.Now().After(deadline) {
			break
		}
		time.Sleep(time.Second)
	}
	onTarget, backOnSource := landed(mine, uidsOf(before), after)
	_, summary := perNode(after)
	t.Logf("%d moves in the background, %d evicted; %d of %d replacements on their target, %d back on a source: %s", len(background), evicted, onTarget, len(mine), backOnSource, summary)
	if onTarget != len(mine) || backOnSource != 0 {
		t.Errorf("%d of %d replacements on their planned target, %d back on a source", onTarget, len(mine), backOnSource)
	}
}
