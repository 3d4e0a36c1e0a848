//go:build e2e

package e2e

import (
	"encoding/json"
	"testing"
	"time"

	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/rebalancer-dev/rebalancer/pkg/hint"
)

// TestBinPackingProfilePacks: under the shipped bin-packing profile a
// workload fills the fullest node first and ends on the fewest nodes.
// kube-scheduler's default weights with only MostAllocated switched on spread
// these 24 pods 3 per node over 8 nodes; the lower bound is 3.
func TestBinPackingProfilePacks(t *testing.T) {
	needScheduler(t)
	e := newTestEnv(t)
	nodes := e.nodeNames("pack", 8)
	e.addNodes("8", nodes...)

	// pack-5 already runs 2 CPUs, so it is the fullest node: MostAllocated
	// fills it first (6 more pods of 1 CPU), then the others 8 by 8.
	e.addPinnedPod("already-there", nodes[5], resources("2", "1Gi"))
	e.addDeployment("web", 24, resources("1", "1Gi"))
	pods := e.boundPods("web", 24)

	counts, summary := perNode(pods)
	t.Logf("web pods per node: %s", summary)
	if counts[nodes[5]] != 6 {
		t.Errorf("the fullest node %s got %d pods, want 6 (filled to capacity first): %s", nodes[5], counts[nodes[5]], summary)
	}
	// 24 CPUs of pods plus 2 pinned need ceil(26/8) = 4 nodes of 8 CPUs.
	if len(counts) != 4 {
		t.Errorf("pods on %d nodes, want 4 (the lower bound): %s", len(counts), summary)
	}
}

// TestHintSteersReplacement: a pod carrying a rebalance hint is evicted, and
// its ReplicaSet's replacement lands on the hinted target although plain
// scoring prefers the node it left. A pod evicted without a hint, as a
// control, returns to that node.
func TestHintSteersReplacement(t *testing.T) {
	needScheduler(t)
	e := newTestEnv(t)
	e.addNodes("8", "hint-full", "hint-empty")
	e.addPinnedPod("ballast", "hint-full", resources("4", "4Gi"))

	e.addDeployment("control", 1, resources("1", "1Gi"))
	e.addDeployment("steered", 1, resources("1", "1Gi"))
	for _, app := range []string{"control", "steered"} {
		if p := e.boundPods(app, 1)[0]; p.Spec.NodeName != "hint-full" {
			t.Fatalf("%s: MostAllocated placed the pod on %s, want the fuller node hint-full", app, p.Spec.NodeName)
		}
	}

	// Control: evicted without a hint, the replacement goes back to hint-full.
	control := e.boundPods("control", 1)[0]
	e.evict(control.Name)
	e.waitGone(control.Name)
	if p := e.boundPods("control", 1)[0]; p.UID == control.UID || p.Spec.NodeName != "hint-full" {
		t.Fatalf("control replacement %s on %s, want a new pod on hint-full", p.Name, p.Spec.NodeName)
	}

	// Hinted: annotate as the executor does, then evict.
	steered := e.boundPods("steered", 1)[0]
	h := hint.Hint{Source: "hint-full", Target: "hint-empty", PlanID: "e2e-plan", Time: time.Now()}
	e.annotate(steered.Name, h.Annotations())
	e.evict(steered.Name)
	e.waitGone(steered.Name)
	p := e.boundPods("steered", 1)[0]
	if p.UID == steered.UID {
		t.Fatal("the evicted pod is still there")
	}
	if p.Spec.NodeName != "hint-empty" {
		t.Fatalf("replacement %s placed on %s, want the hinted target hint-empty", p.Name, p.Spec.NodeName)
	}
}

// evict goes through the Eviction API, as the executor does.
func (e *testEnv) evict(pod string) {
	e.t.Helper()
	err := client.PolicyV1().Evictions(e.ns).Evict(e.ctx, &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Name: pod, Namespace: e.ns}})
	if err != nil {
		e.t.Fatalf("evicting %s: %v", pod, err)
	}
}

func (e *testEnv) annotate(pod string, annotations map[string]string) {
	e.t.Helper()
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": annotations}})
	if err != nil {
		e.t.Fatal(err)
	}
	if _, err := client.CoreV1().Pods(e.ns).Patch(e.ctx, pod, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		e.t.Fatal(err)
	}
}
