//go:build e2e

package e2e

import (
	"fmt"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/rebalancer-dev/rebalancer/pkg/plan"
	"github.com/rebalancer-dev/rebalancer/pkg/wellknown"
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
	inUse := packUnsteered(t, e, startPackingScheduler(t, e), "8", false)
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
	inUse := packUnsteered(t, e, startPackingScheduler(t, e), "2", true, "--hold-empty-nodes")
	if inUse > 3 {
		t.Errorf("%d nodes in use after three runs, want at most 3", inUse)
	}
}

// TestPackingWithAMostAllocatedDefaultScheduler: the cluster's own
// default-scheduler is kube-scheduler configured with that packing profile,
// as a managed cluster's configurable scheduler runs it (no extender, no
// RebalanceHint), and the empty nodes are small. The pods name no
// scheduler. Three `run --once` with no flag but the policy and the
// profile: rebalancer holds the empty nodes by itself (the policy packs,
// and so does every scheduler of the cluster's pods, none following
// hints), nodes in use fall, no replacement lands on a small node or back
// on a source.
func TestPackingWithAMostAllocatedDefaultScheduler(t *testing.T) {
	e := newTestEnv(t)
	config := schedulerConfigFrom(t, filepath.Join(repoRoot, "test", "testdata", "unsteered-packing-scheduler.yaml"), func(cfg map[string]any) {
		cfg["clientConnection"] = map[string]any{"kubeconfig": filepath.Join(filepath.Dir(kubeconfig), "kube-scheduler.kubeconfig")}
		cfg["leaderElection"] = map[string]any{"leaderElect": false}
	})
	restartScheduler(t, config)
	t.Cleanup(func() { restartScheduler(t, "") })
	// Pods of other schedulers, left by earlier tests while their
	// namespaces go, would keep rebalancer from holding by default.
	e.pollFor("only default-scheduler's pods in the cluster", 3*time.Minute, func() (bool, error) {
		pods, err := client.CoreV1().Pods("").List(e.ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		for _, p := range pods.Items {
			if p.Spec.SchedulerName != v1.DefaultSchedulerName {
				return false, nil
			}
		}
		return true, nil
	})
	inUse := packUnsteered(t, e, v1.DefaultSchedulerName, "2", true)
	if inUse > 3 {
		t.Errorf("%d nodes in use after three runs, want at most 3", inUse)
	}
}

// restartScheduler starts the control plane's kube-scheduler again with
// config, or with the configuration it was started with when config is "".
func restartScheduler(t *testing.T, config string) {
	t.Helper()
	args := []string{"restart-scheduler"}
	if config != "" {
		args = append(args, config)
	}
	if out, err := exec.Command(filepath.Join(repoRoot, "hack", "local-cluster.sh"), args...).CombinedOutput(); err != nil {
		t.Errorf("restarting kube-scheduler: %v\n%s", err, out)
	}
}

// startPackingScheduler runs the control plane's kube-scheduler binary with
// the hint-less packing profile under a name of its own, and returns it.
func startPackingScheduler(t *testing.T, e *testEnv) string {
	t.Helper()
	schedName := "packing-" + e.name
	config := schedulerConfigFrom(t, filepath.Join(repoRoot, "test", "testdata", "unsteered-packing-scheduler.yaml"), func(cfg map[string]any) {
		cfg["clientConnection"] = map[string]any{"kubeconfig": filepath.Join(filepath.Dir(kubeconfig), "kube-scheduler.kubeconfig")}
		cfg["leaderElection"] = map[string]any{"leaderElect": false}
		cfg["profiles"].([]any)[0].(map[string]any)["schedulerName"] = schedName
	})
	startProcess(t, "kube-scheduler", "--config="+config, "--bind-address=127.0.0.1", fmt.Sprintf("--secure-port=%d", freePort(t)), "-v=2")
	return schedName
}

// packUnsteered puts pods of schedName, the hint-less packing profile, two
// to a node on 8 nodes of 8 CPUs beside 2 empty nodes of spareCPU, and runs
// `run --once` three times with flags, checking each run. When held, the
// plan must hold the empty nodes, and does not drain without holding them
// (--hold-empty-nodes=false). It returns the nodes in use at the end.
func packUnsteered(t *testing.T, e *testEnv, schedName, spareCPU string, held bool, flags ...string) int {
	t.Helper()
	config := filepath.Join(repoRoot, "test", "testdata", "unsteered-packing-scheduler.yaml")
	if schedName != v1.DefaultSchedulerName {
		config = schedulerConfigFrom(t, config, func(cfg map[string]any) {
			cfg["profiles"].([]any)[0].(map[string]any)["schedulerName"] = schedName
		})
	}
	nodes := e.nodeNames("pk", 8)
	e.addNodes("8", nodes...)
	spares := e.nodeNames("pk-spare", 2)
	e.addNodes(spareCPU, spares...) // empty: no replacement may go there
	podScheduler := schedName
	if schedName == v1.DefaultSchedulerName {
		podScheduler = "" // the pods name none
	}
	e.fragmentedReplicaSetOf(podScheduler, "web", resources("1", "1Gi"), nodes)
	e.fragmentedReplicaSetOf(podScheduler, "api", resources("1", "1Gi"), nodes)
	count := func() (pods []v1.Pod, inUse map[string]int) {
		pods = append(e.boundPods("web", len(nodes)), e.boundPods("api", len(nodes))...)
		inUse, _ = perNode(pods)
		return pods, inUse
	}
	pods, inUse := count()
	start := len(inUse)
	args := []string{"--policy", e.narrowedPolicy(), "--scheduler-config", config}
	if held {
		// Without holding, the small empty nodes leave no drain certain.
		var p plan.Plan
		rebalancerJSON(t, kubeconfig, &p, append([]string{"plan", "--hold-empty-nodes=false"}, args...)...)
		for _, m := range p.Moves {
			if m.Namespace == e.ns && m.Drain {
				t.Fatalf("without holding the empty nodes, %s is drained: the test proves nothing", m.Source)
			}
		}
	}
	args = append(args, flags...)
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
		if held && len(drained) > 0 {
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
				if taint.Key == wellknown.DrainTaintKey {
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
