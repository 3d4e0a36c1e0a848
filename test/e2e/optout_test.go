//go:build e2e

package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/rebalancer-dev/rebalancer/pkg/optout"
	"github.com/rebalancer-dev/rebalancer/pkg/plan"
)

// TestOptOutPodsStay: on a node that gains a NoSchedule taint, the pods
// annotated with cluster-autoscaler's safe-to-evict "false" and Karpenter's
// do-not-disrupt stay, in the plan and in the run, with an opt-out skip;
// their unannotated neighbour is moved off.
func TestOptOutPodsStay(t *testing.T) {
	needScheduler(t)
	e := newTestEnv(t)
	n := func(i int) string { return fmt.Sprintf("optout-%s-%d", e.name[len(e.name)-5:], i) }
	e.addNodes("8", n(0), n(1), n(2))
	e.fragmentedReplicaSet("web", resources("1", "1Gi"), []string{n(0), n(0), n(0)})
	pods := e.boundPods("web", 3)
	e.annotate(pods[0].Name, map[string]string{optout.SafeToEvict: "false"})
	e.annotate(pods[1].Name, map[string]string{optout.KarpenterDoNotDisrupt: "true"})
	free := pods[2]
	e.taintForMaintenance(n(0))

	res := runOnce(t)
	evicted := e.evicted(res)
	if !evicted[free.Name] || evicted[pods[0].Name] || evicted[pods[1].Name] {
		t.Fatalf("evicted %v; want %s only", evicted, free.Name)
	}
	optOuts := map[string]bool{}
	for _, s := range res.Plan.Skipped {
		if s.Reason == plan.ReasonOptOut {
			optOuts[s.Pod] = true
		}
	}
	for _, p := range pods[:2] {
		if !optOuts[e.ns+"/"+p.Name] {
			t.Errorf("no %s skip for %s: %+v", plan.ReasonOptOut, p.Name, res.Plan.Skipped)
		}
	}
}

// TestOptOutNodesAreNotDrained: a thinly spread cluster whose nodes carry
// cluster-autoscaler's scale-down-disabled or Karpenter's do-not-disrupt is
// not consolidated: nothing is evicted off them.
func TestOptOutNodesAreNotDrained(t *testing.T) {
	needScheduler(t)
	e := newTestEnv(t)
	nodes := e.nodeNames("optnode", 4)
	e.addNodes("8", nodes...)
	e.fragmentedReplicaSet("web", resources("1", "1Gi"), nodes)
	e.boundPods("web", 4)
	for i, name := range nodes {
		key := optout.ScaleDownDisabled
		if i%2 == 1 {
			key = optout.KarpenterDoNotDisrupt
		}
		patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{key: "true"}}})
		if _, err := client.CoreV1().Nodes().Patch(e.ctx, name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	// The shipped policy narrowed to this test's nodes.
	shipped, err := os.ReadFile(filepath.Join(repoRoot, "policies", "binpacking-policy.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	policy := filepath.Join(t.TempDir(), "policy.yaml")
	if err := os.WriteFile(policy, []byte(fmt.Sprintf("%s\nnodeSelector: %s=%s\n", shipped, testLabel, e.name)), 0o600); err != nil {
		t.Fatal(err)
	}
	res := runOnce(t, "--policy", policy)
	for _, m := range res.Result.Evicted {
		if m.Namespace == e.ns {
			t.Errorf("evicted %s off an opted-out node", m.Pod)
		}
	}
	if res.Plan.Summary.SkippedByReason[plan.ReasonOptOut] == 0 {
		t.Errorf("no %s skip: %v", plan.ReasonOptOut, res.Plan.Summary.SkippedByReason)
	}
}
