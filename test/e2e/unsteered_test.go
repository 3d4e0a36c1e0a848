//go:build e2e

package e2e

import (
	"fmt"
	"path/filepath"
	"slices"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/rebalancer-dev/rebalancer/pkg/plan"
)

// TestPackingWithAnUnsteeredScheduler: kube-scheduler itself (the control
// plane's binary, no extender, no RebalanceHint) runs a packing profile as
// a managed cluster's scheduler would: NodeResourcesFit MostAllocated at
// weight 5, no balanced allocation, no default spread. Its pods sit two to
// a node on identical nodes, so it breaks every tie at random and
// rebalancer cannot know which node it picks. Three `run --once` with the
// shipped bin-packing policy drain nodes anyway, as sets: each replacement
// may land on any of several nodes, all in use and kept. Nodes in use fall,
// no replacement lands on a node it left or on a node that was empty, and
// every drained node ends empty.
func TestPackingWithAnUnsteeredScheduler(t *testing.T) {
	e := newTestEnv(t)
	inUse := packUnsteered(t, e, "8", false)
	// 16 pods of 1 CPU on nodes of 8: 2 nodes at the least.
	if inUse > 3 {
		t.Errorf("%d nodes in use after three runs, want at most 3", inUse)
	}
}

// TestHoldingEmptyNodesLetsAnUnsteeredSchedulerPack: the same scheduler,
// but the empty nodes are small (2 CPUs): a pod fills more of one than of
// a node in use, so MostAllocated may put any replacement there, and no
// drain is certain. With --hold-empty-nodes, rebalancer keeps them off
// limits with the drain taint until the plan's replacements are bound:
// three `run --once` drain nodes, no replacement lands on a small node or
// back on a source, and no node keeps the taint after a run.
func TestHoldingEmptyNodesLetsAnUnsteeredSchedulerPack(t *testing.T) {
	e := newTestEnv(t)
	inUse := packUnsteered(t, e, "2", true)
	if inUse > 3 {
		t.Errorf("%d nodes in use after three runs, want at most 3", inUse)
	}
}

// packUnsteered runs kube-scheduler with the hint-less packing profile
// under a name of its own, puts its pods two to a node on 8 nodes of 8
// CPUs beside 2 empty nodes of spareCPU, and runs `run --once` three times
// (with --hold-empty-nodes when hold), checking each run. It returns the
// nodes in use at the end.
func packUnsteered(t *testing.T, e *testEnv, spareCPU string, hold bool) int {
	t.Helper()
	schedName := "packing-" + e.name
	// As the control plane's own kube-scheduler, under a name of its own.
	config := schedulerConfigFrom(t, filepath.Join(repoRoot, "test", "testdata", "unsteered-packing-scheduler.yaml"), func(cfg map[string]any) {
		cfg["clientConnection"] = map[string]any{"kubeconfig": filepath.Join(filepath.Dir(kubeconfig), "kube-scheduler.kubeconfig")}
		cfg["leaderElection"] = map[string]any{"leaderElect": false}
		cfg["profiles"].([]any)[0].(map[string]any)["schedulerName"] = schedName
	})
	startProcess(t, "kube-scheduler", "--config="+config, "--bind-address=127.0.0.1", fmt.Sprintf("--secure-port=%d", freePort(t)), "-v=2")

	nodes := e.nodeNames("pk", 8)
	e.addNodes("8", nodes...)
	spares := e.nodeNames("pk-spare", 2)
	e.addNodes(spareCPU, spares...) // empty: no replacement may go there
	e.fragmentedReplicaSetOf(schedName, "web", resources("1", "1Gi"), nodes)
	e.fragmentedReplicaSetOf(schedName, "api", resources("1", "1Gi"), nodes)
	count := func() (pods []v1.Pod, inUse map[string]int) {
		pods = append(e.boundPods("web", len(nodes)), e.boundPods("api", len(nodes))...)
		inUse, _ = perNode(pods)
		return pods, inUse
	}
	pods, inUse := count()
	start := len(inUse)
	args := []string{"--policy", e.narrowedPolicy(), "--scheduler-config", config}
	if hold {
		// Without holding, the small empty nodes leave no drain certain.
		var p plan.Plan
		rebalancerJSON(t, kubeconfig, &p, append([]string{"plan"}, args...)...)
		for _, m := range p.Moves {
			if m.Namespace == e.ns && m.Drain {
				t.Fatalf("without --hold-empty-nodes, %s is drained: the test proves nothing", m.Source)
			}
		}
		args = append(args, "--hold-empty-nodes")
	}
	for run := 1; run <= 3; run++ {
		res := runOnce(t, args...)
		drained := map[string]bool{}
		left := 0
		for _, m := range res.Plan.Moves {
			if m.Namespace != e.ns {
				continue
			}
			if m.Steered || m.Scheduler != schedName {
				t.Errorf("run %d: %s planned steered %v by %q; want unsteered moves by %q", run, m.Pod, m.Steered, m.Scheduler, schedName)
			}
			if m.Drain {
				drained[m.Source] = true
			}
			if m.Candidates > 0 {
				left++
			}
		}
		if hold && len(drained) > 0 {
			held := map[string]bool{}
			for _, n := range res.Plan.HeldEmpty {
				held[n] = true
			}
			for _, n := range spares {
				if !held[n] {
					t.Errorf("run %d: the plan does not hold %s empty; it holds %v", run, n, res.Plan.HeldEmpty)
				}
			}
		}
		for _, s := range res.Result.Skipped {
			if s.Move.Namespace == e.ns {
				t.Errorf("run %d: %s not carried out: %s %s", run, s.Move.Pod, s.Reason, s.Detail)
			}
		}
		before := uidsOf(pods)
		was := inUse
		pods, inUse = count()
		_, summary := perNode(pods)
		t.Logf("run %d: %d nodes drained (%d moves left to the scheduler's choice), %d held; nodes in use %d -> %d: %s", run, len(drained), left, len(res.Plan.HeldEmpty), len(was), len(inUse), summary)
		for _, p := range pods {
			switch {
			case before[string(p.UID)]:
			case drained[p.Spec.NodeName]:
				t.Errorf("run %d: replacement %s landed on %s, a node the plan drained", run, p.Name, p.Spec.NodeName)
			case was[p.Spec.NodeName] == 0:
				t.Errorf("run %d: replacement %s landed on %s, a node that was empty", run, p.Name, p.Spec.NodeName)
			}
		}
		if len(inUse) > len(was) {
			t.Errorf("run %d: nodes in use %d -> %d", run, len(was), len(inUse))
		}
		if run == 1 && (len(drained) == 0 || left == 0) {
			t.Fatalf("run 1 drained %d nodes with %d moves left to the scheduler; skipped %v; warnings %q",
				len(drained), left, res.Plan.Summary.SkippedByReason, res.Plan.Warnings)
		}
		for _, n := range append(slices.Clone(nodes), spares...) {
			node, err := client.CoreV1().Nodes().Get(e.ctx, n, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			for _, taint := range node.Spec.Taints {
				if taint.Key == plan.DrainTaintKey {
					t.Errorf("run %d: %s still carries the drain taint after the run", run, n)
				}
			}
		}
	}
	if len(inUse) >= start {
		t.Errorf("nodes in use %d -> %d after three runs", start, len(inUse))
	}
	return len(inUse)
}
