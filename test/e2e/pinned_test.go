//go:build e2e

package e2e

import (
	"slices"
	"strings"
	"testing"

	"github.com/rebalancer-dev/rebalancer/pkg/plan"
	"github.com/rebalancer-dev/rebalancer/pkg/wellknown"
)

// TestPackingAroundPinnedPods: three nodes each hold a pod that opted out
// of being moved, and are the least utilized; four others hold three
// 1-CPU pods each. One `run --once` under the shipped bin-packing pair
// packs every movable pod onto the three pinned nodes, which cannot be
// emptied anyway: 7 nodes in use become 3, the lower bound plus the one
// node the pinned pods force, every replacement on its planned target, and
// the plan names the pinned nodes. Its lower bound counts the nodes whose
// taint the pods tolerate (KWOK's): at most the nodes in use after it.
func TestPackingAroundPinnedPods(t *testing.T) {
	needScheduler(t)
	e := newTestEnv(t)
	pinned := e.nodeNames("pin", 3)
	free := e.nodeNames("pinfree", 4)
	e.addNodes("8", append(append([]string{}, pinned...), free...)...)
	e.fragmentedReplicaSetWith(schedulerName, "db", resources("1", "1Gi"), map[string]string{wellknown.DoNotDisruptAnnotation: "true"}, pinned)
	e.fragmentedReplicaSet("web", resources("1", "1Gi"), slices.Concat(free, free, free))
	before := e.podUIDs()
	beforeUIDs := map[string]bool{}
	for _, uid := range before {
		beforeUIDs[string(uid)] = true
	}

	res := runOnce(t, "--policy", e.narrowedPolicy(), "--history-configmap=")
	var mine []plan.Move
	for _, m := range res.Plan.Moves {
		if m.Namespace == e.ns {
			mine = append(mine, m)
		}
	}
	if len(mine) != 12 {
		t.Errorf("%d moves here, want the 12 web pods", len(mine))
	}
	after := append(e.boundPods("web", 12), e.boundPods("db", 3)...)
	onTarget, backOnSource := landed(mine, beforeUIDs, after)
	if onTarget != len(mine) || backOnSource > 0 {
		t.Errorf("%d of %d replacements on their planned target, %d back on a source", onTarget, len(mine), backOnSource)
	}
	used, summary := perNode(after)
	for n := range used {
		if !slices.Contains(pinned, n) {
			t.Errorf("node %s still in use; want only the pinned nodes: %s", n, summary)
		}
	}
	var names []string
	for _, p := range res.Plan.Summary.Pinned {
		if strings.HasPrefix(p.Pod, e.ns+"/") {
			names = append(names, p.Node)
			if p.Reason != plan.ReasonOptOut {
				t.Errorf("pinned %s for %q, want %q", p.Node, p.Reason, plan.ReasonOptOut)
			}
		}
	}
	slices.Sort(names)
	if !slices.Equal(names, pinned) {
		t.Errorf("the plan names pinned nodes %v, want %v", names, pinned)
	}
	// Every KWOK node carries a NoSchedule taint every pod here tolerates:
	// the bound counts them usable. The plan's after-state is a placement,
	// so no true lower bound exceeds its nodes in use.
	if s := res.Plan.Summary; s.NodesLowerBound < 1 || s.NodesLowerBound > s.NodesInUseAfter {
		t.Errorf("lower bound %d with %d nodes in use after the plan (of %d): not a lower bound", s.NodesLowerBound, s.NodesInUseAfter, s.Nodes)
	}
	t.Logf("%d moves, %d on target; nodes in use after: %s", len(mine), onTarget, summary)
}
