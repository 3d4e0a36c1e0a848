package planner

import (
	"slices"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2/ktesting"

	"github.com/rebalancer-dev/rebalancer/pkg/plan"
)

// TestDuplicatesTakeNoEmptyNodeWhenPacking: RemoveDuplicates spreads a
// workload's replicas; in a policy that packs, a duplicate whose only
// better node is an empty one stays (no-node-freed): the plan would add a
// node in use that the next plan empties again. Without a packing plugin
// the same duplicate moves there.
func TestDuplicatesTakeNoEmptyNodeWhenPacking(t *testing.T) {
	build := func() *cluster {
		c := newCluster()
		// node-a is large and thin: MostAllocated scores a 2-CPU pod
		// higher on the small empty node-c.
		for _, n := range []*v1.Node{c.node("node-a", "32", "128Gi"), c.node("node-b", "8", "32Gi"), c.node("node-c", "8", "32Gi")} {
			c.pod("kube-system", "log-agent", "DaemonSet", n.Name, "100m", "128Mi")
		}
		for range 3 {
			c.pod("team-a", "web", "ReplicaSet", "node-a", "2", "2Gi")
		}
		c.pod("team-b", "db", "StatefulSet", "node-b", "7500m", "8Gi")
		c.pdb("team-b", "db", 0) // node-b stays as it is
		return c
	}
	pol, prof := loadPair(t, "binpacking")
	_, ctx := ktesting.NewTestContext(t)
	moved := func(p *plan.Plan) bool {
		return slices.ContainsFunc(p.Moves, func(m plan.Move) bool { return m.Strategy == "RemoveDuplicates" && m.Target == "node-c" })
	}

	// The control: RemoveDuplicates alone moves a duplicate to node-c.
	alone := pol.DeepCopy()
	alone.Profiles[0].Plugins.Balance.Enabled = []string{"RemoveDuplicates"}
	alone.Profiles[0].Plugins.Deschedule.Enabled = nil
	p, err := planOn(ctx, alone, prof, build().snap, Options{MinScoreGain: 1})
	if err != nil {
		t.Fatal(err)
	}
	if !moved(p) {
		t.Fatalf("without a packing plugin no duplicate moved to node-c: %+v, skipped %+v", p.Moves, p.Skipped)
	}

	c := build()
	p, err = planOn(ctx, pol, prof, c.snap, Options{MinScoreGain: 1})
	if err != nil {
		t.Fatal(err)
	}
	if moved(p) || p.Summary.NodesInUseAfter > p.Summary.NodesInUseBefore {
		t.Errorf("the packing policy moved a duplicate onto the empty node: %+v; nodes in use %d -> %d", p.Moves, p.Summary.NodesInUseBefore, p.Summary.NodesInUseAfter)
	}
	said := false
	for _, pod := range c.snap.Pods {
		said = said || pod.Labels["app"] == "web" && skippedFor(p, pod, plan.ReasonNoNodeFreed)
	}
	if !said {
		t.Errorf("no duplicate skipped for %s: %+v", plan.ReasonNoNodeFreed, p.Skipped)
	}
}
