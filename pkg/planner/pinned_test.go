package planner

import (
	"fmt"
	"strings"
	"testing"

	"k8s.io/klog/v2/ktesting"

	"github.com/rebalancer-dev/rebalancer/pkg/plan"
	"github.com/rebalancer-dev/rebalancer/pkg/wellknown"
)

// TestConsolidationPacksAroundPinnedPods: nodes that hold a pod that may
// not move (opted out, sticky, held by a PDB) stay in use whatever the
// plan does, so Consolidation fills them first and empties the others:
// the plan reaches the fewest nodes the pinned ones allow, lists those
// nodes as pinned with the pod and reason, and adds none.
func TestConsolidationPacksAroundPinnedPods(t *testing.T) {
	for _, pin := range []string{"opt-out", "sticky", "pdb"} {
		t.Run(pin, func(t *testing.T) {
			c := newCluster()
			// Three nodes, each pinned by one 1-CPU pod, are the least
			// utilized; four nodes at 3 CPUs each could be emptied. 15 CPUs
			// of pods: the three pinned nodes (24 CPUs) hold them all.
			var pinnedNodes []string
			for i := range 3 {
				n := c.node(fmt.Sprintf("pinned-%d", i), "8", "32Gi")
				pinnedNodes = append(pinnedNodes, n.Name)
				p := c.pod("team-a", fmt.Sprintf("db%d", i), "StatefulSet", n.Name, "1", "1Gi")
				switch pin {
				case "opt-out":
					p.Annotations = map[string]string{wellknown.DoNotDisruptAnnotation: "true"}
				case "sticky":
					p.Annotations = map[string]string{wellknown.StickyAnnotation: "true"}
				case "pdb":
					c.pdb("team-a", fmt.Sprintf("db%d", i), 0)
				}
			}
			for i := range 4 {
				n := c.node(fmt.Sprintf("free-%d", i), "8", "32Gi")
				for j := range 3 {
					c.pod("team-b", fmt.Sprintf("web%d%d", i, j), "ReplicaSet", n.Name, "1", "1Gi")
				}
			}
			pol, prof := loadPair(t, "binpacking")
			_, ctx := ktesting.NewTestContext(t)
			p, err := planOn(ctx, pol, prof, c.snap, Options{MinScoreGain: 1})
			if err != nil {
				t.Fatal(err)
			}
			checkInvariants(t, c, pol, p)
			if p.Summary.NodesInUseBefore != 7 || p.Summary.NodesInUseAfter != 3 {
				t.Errorf("nodes in use %d -> %d, want 7 -> 3 (the pinned nodes hold every pod)", p.Summary.NodesInUseBefore, p.Summary.NodesInUseAfter)
			}
			for _, m := range p.Moves {
				if !strings.HasPrefix(m.Target, "pinned-") {
					t.Errorf("%s moved onto %s, a node the plan could empty", m.Pod, m.Target)
				}
			}
			if len(p.Summary.Pinned) != 3 {
				t.Fatalf("pinned nodes %+v, want the 3", p.Summary.Pinned)
			}
			for i, n := range p.Summary.Pinned {
				if n.Node != pinnedNodes[i] || !strings.HasPrefix(n.Pod, fmt.Sprintf("team-a/db%d", i)) || n.Reason != map[string]string{"opt-out": plan.ReasonOptOut, "sticky": plan.ReasonSticky, "pdb": plan.ReasonPDB}[pin] {
					t.Errorf("pinned[%d] = %+v, want node %s for reason %s", i, n, pinnedNodes[i], pin)
				}
			}
		})
	}
}
