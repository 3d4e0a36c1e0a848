package planner

import (
	"slices"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"

	"github.com/rebalancer-dev/rebalancer/pkg/plan"
	"github.com/rebalancer-dev/rebalancer/pkg/wellknown"
)

func makeSticky(pods ...*v1.Pod) {
	for _, p := range pods {
		if p.Annotations == nil {
			p.Annotations = map[string]string{}
		}
		p.Annotations[wellknown.StickyAnnotation] = "true"
	}
}

// TestStickyPodsStay: on a thin cluster Consolidation would drain nodes;
// with its pods sticky it moves none of them, and says why.
func TestStickyPodsStay(t *testing.T) {
	if p := runPlan(t, thinCluster(12), "binpacking", Options{MinScoreGain: 1}); len(p.Moves) == 0 {
		t.Fatal("control: the thin cluster plans no move; the sticky case would prove nothing")
	}
	c := thinCluster(12)
	makeSticky(c.snap.Pods...)
	p := runPlan(t, c, "binpacking", Options{MinScoreGain: 1})
	if len(p.Moves) != 0 || p.Summary.SkippedByReason[plan.ReasonSticky] == 0 {
		t.Errorf("sticky pods: moves %+v, skips %v; want none moved, skipped as sticky", p.Moves, p.Summary.SkippedByReason)
	}
}

// TestStickyPodOnATaintedNodeMoves: a deschedule plugin still moves a
// sticky pod its node no longer tolerates, to the planned node; a balance
// plugin does not move the sticky pods of a crowded node.
func TestStickyPodOnATaintedNodeMoves(t *testing.T) {
	c := newCluster()
	c.node("tainted", "8", "32Gi", noSchedule)
	c.node("crowded", "8", "32Gi")
	c.node("idle", "8", "32Gi")
	var pods []*v1.Pod
	pods = append(pods, c.pod("team-a", "cache", "ReplicaSet", "tainted", "1", "1Gi"))
	for range 6 {
		pods = append(pods, c.pod("team-b", "web", "ReplicaSet", "crowded", "1", "1Gi"))
	}
	makeSticky(pods...)
	p := runPlan(t, c, "balancing", Options{MinScoreGain: 1})
	if len(p.Moves) != 1 || p.Moves[0].Source != "tainted" || p.Moves[0].Strategy != "RemovePodsViolatingNodeTaints" || p.Moves[0].Target == "tainted" {
		t.Fatalf("moves %+v, want the sticky pod off the tainted node only", p.Moves)
	}
	if p.Summary.SkippedByReason[plan.ReasonSticky] == 0 {
		t.Errorf("skips %v: want the crowded node's sticky pods skipped as sticky", p.Summary.SkippedByReason)
	}
}

// TestRecheckHonoursALateSticky: a pod made sticky after the plan is not
// moved by a balance plugin's move when it is rechecked; the others are.
// The recheck says why in the words a plan made then does.
func TestRecheckHonoursALateSticky(t *testing.T) {
	c, pol, profs, p := thinPlan(t)
	if len(p.Moves) < 2 {
		t.Fatalf("the plan has %d moves; the test needs two", len(p.Moves))
	}
	late := p.Moves[0]
	makeSticky(podsByUID(c.snap)[late.UID])
	refused := recheckAll(t, profs, pol, c.snap, p)
	if len(refused) != 1 || !strings.HasPrefix(refused[0], late.Pod+": "+plan.ReasonSticky+": ") {
		t.Fatalf("refused %v, want %s alone, as %s", refused, late.Pod, plan.ReasonSticky)
	}
	replanned := planWith(t, profs, pol, c.snap)
	i := slices.IndexFunc(replanned.Skipped, func(s plan.Skip) bool { return s.Pod == late.Pod && s.Reason == plan.ReasonSticky })
	if i < 0 {
		t.Fatalf("a plan made now does not skip %s as %s: %v", late.Pod, plan.ReasonSticky, replanned.Summary.SkippedByReason)
	}
	// Consolidation adds which node the pod keeps in use.
	if planned := late.Pod + ": " + plan.ReasonSticky + ": " + replanned.Skipped[i].Detail; !strings.HasPrefix(planned, refused[0]) {
		t.Errorf("rechecked %q, want the plan's words %q", refused[0], planned)
	}
}
