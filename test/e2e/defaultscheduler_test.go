//go:build e2e

package e2e

import (
	"fmt"
	"testing"

	"github.com/rebalancer-dev/rebalancer/pkg/plan"
)

// The local control plane runs kube-scheduler as default-scheduler with its
// default profile (hack/local-cluster.sh), as most clusters do. rebalancer
// is given only the shipped bin-packing profile, so it models
// default-scheduler with kube-scheduler's defaults.

// TestDefaultSchedulerTaintMove: pods of default-scheduler on a node that
// gains a NoSchedule taint are moved off it, unsteered: each move either
// names the node kube-scheduler surely picks or holds anywhere but the
// tainted node, and kube-scheduler puts the replacements where the plan
// said.
func TestDefaultSchedulerTaintMove(t *testing.T) {
	e := newTestEnv(t)
	n := func(i int) string { return fmt.Sprintf("dtaint-%s-%d", e.name[len(e.name)-5:], i) }
	tainted := n(0)
	e.addNodes("8", n(0), n(1), n(2))
	e.fragmentedReplicaSetOf("default-scheduler", "web", resources("1", "1Gi"), []string{n(0), n(0), n(1)})
	before := e.boundPods("web", 3)
	e.taintForMaintenance(tainted)

	res := runOnce(t)
	var mine []plan.Move
	for _, m := range res.Plan.Moves {
		if m.Namespace == e.ns {
			mine = append(mine, m)
		}
	}
	if len(mine) != 2 {
		t.Fatalf("planned %d moves here, want the 2 pods on the tainted node: %+v", len(mine), mine)
	}
	sure := map[string]int{} // node -> replacements planned onto it for sure
	for _, m := range mine {
		if m.Scheduler != "default-scheduler" || m.Steered || m.Source != tainted || m.Target == tainted {
			t.Errorf("move %s: scheduler %q steered %v %s -> %s; want an unsteered default-scheduler move off %s",
				m.Pod, m.Scheduler, m.Steered, m.Source, m.Target, tainted)
		}
		if !m.Anywhere {
			sure[m.Target]++
		}
	}
	evicted := 0
	for _, m := range res.Result.Evicted {
		if m.Namespace == e.ns {
			evicted++
		}
	}
	if evicted != 2 {
		t.Fatalf("evicted %d pods here, want 2; result %+v", evicted, res.Result)
	}
	old := uidsOf(before)
	landed := map[string]int{}
	for _, p := range e.boundPods("web", 3) {
		if p.Spec.NodeName == tainted {
			t.Errorf("pod %s is on the tainted node", p.Name)
		}
		if !old[string(p.UID)] {
			landed[p.Spec.NodeName]++
		}
	}
	for node, n := range sure {
		if landed[node] < n {
			t.Errorf("%d replacement(s) planned onto %s for sure, %d landed there (replacements: %v)", n, node, landed[node], landed)
		}
	}
}

// TestDefaultSchedulerThinClusterIsNotDrained: a thinly spread cluster of
// default-scheduler workloads. kube-scheduler's default profile spreads
// pods, so no drain would hold: rebalancer plans none of their moves and
// evicts nothing, and says why.
func TestDefaultSchedulerThinClusterIsNotDrained(t *testing.T) {
	e := newTestEnv(t)
	// Names of this run only: pods of an earlier run's namespace may still
	// be terminating on nodes of the same name.
	nodes := e.nodeNames("dthin", 6)
	e.addNodes("8", nodes...)
	e.fragmentedReplicaSetOf("default-scheduler", "web", resources("1", "1Gi"), append(append([]string{}, nodes...), nodes...))
	e.fragmentedReplicaSetOf("default-scheduler", "api", resources("1", "1Gi"), nodes)
	e.boundPods("web", 12)

	res := runOnce(t, "--policy", e.narrowedPolicy())
	for _, m := range res.Plan.Moves {
		if m.Namespace == e.ns {
			t.Errorf("planned %s %s -> %s (%s) for a default-scheduler pod", m.Pod, m.Source, m.Target, m.Strategy)
		}
	}
	for _, m := range res.Result.Evicted {
		if m.Namespace == e.ns {
			t.Errorf("evicted %s", m.Pod)
		}
	}
	why := map[string]int{}
	for _, s := range res.Plan.Skipped {
		if len(s.Pod) > len(e.ns) && s.Pod[:len(e.ns)+1] == e.ns+"/" {
			why[s.Reason]++
		}
	}
	if why[plan.ReasonConflict]+why[plan.ReasonUnsteered] == 0 {
		t.Errorf("no conflict or unsteered skip for this cluster's pods: %v; plan summary %+v, warnings %v", why, res.Plan.Summary.SkippedByReason, res.Plan.Warnings)
	}
}
