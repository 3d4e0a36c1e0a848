package planner

import (
	"strings"
	"testing"

	"github.com/rebalancer-dev/rebalancer/pkg/optout"
	"github.com/rebalancer-dev/rebalancer/pkg/plan"
	"github.com/rebalancer-dev/rebalancer/pkg/wellknown"
)

// TestOptOutsAreNeverMoved: a pod annotated with any of the opt-outs users
// already set for cluster-autoscaler and Karpenter, or rebalancer's own,
// is not moved even off a tainted node; a node so annotated is neither
// drained nor has pods moved off it. The skip names the annotation.
func TestOptOutsAreNeverMoved(t *testing.T) {
	pods := map[string]string{
		optout.SafeToEvict:               "false",
		optout.KarpenterDoNotDisrupt:     "true",
		wellknown.DoNotDisruptAnnotation: "true",
	}
	for key, value := range pods {
		t.Run("pod "+key, func(t *testing.T) {
			c := newCluster()
			c.node("node-00", "8", "32Gi", noSchedule)
			c.node("node-01", "8", "32Gi")
			kept := c.pod("team-a", "api", "ReplicaSet", "node-00", "1", "1Gi")
			kept.Annotations = map[string]string{key: value}
			moves := c.pod("team-a", "web", "ReplicaSet", "node-00", "1", "1Gi")
			p := runPlan(t, c, "binpacking", Options{MinScoreGain: 1})
			if moved(p, kept) || !skippedFor(p, kept, plan.ReasonOptOut) {
				t.Errorf("the annotated pod is moved or not skipped as %s: %+v", plan.ReasonOptOut, p.Skipped)
			}
			if !moved(p, moves) {
				t.Errorf("its neighbour without the annotation is not moved off the tainted node")
			}
			for _, s := range p.Skipped {
				if s.UID == string(kept.UID) && !strings.Contains(s.Detail, key+"="+value) {
					t.Errorf("skip %q does not name %s=%s", s.Detail, key, value)
				}
			}
		})
	}
	nodes := map[string]string{
		optout.ScaleDownDisabled:         "true",
		optout.KarpenterDoNotDisrupt:     "true",
		wellknown.DoNotDisruptAnnotation: "true",
	}
	for key, value := range nodes {
		t.Run("node "+key, func(t *testing.T) {
			c := thinCluster(6)
			for _, n := range c.snap.Nodes {
				n.Annotations = map[string]string{key: value}
			}
			p := runPlan(t, c, "binpacking", Options{MinScoreGain: 1})
			if len(p.Moves) != 0 {
				t.Fatalf("moved %d pods off nodes annotated %s=%s", len(p.Moves), key, value)
			}
			if p.Summary.SkippedByReason[plan.ReasonOptOut] == 0 {
				t.Errorf("no %s skip: %v", plan.ReasonOptOut, p.Summary.SkippedByReason)
			}
			// Without the annotation the same cluster is consolidated.
			for _, n := range c.snap.Nodes {
				n.Annotations = nil
			}
			if p := runPlan(t, c, "binpacking", Options{MinScoreGain: 1}); len(p.Moves) == 0 {
				t.Error("nothing planned without the annotation either: the test shows nothing")
			}
		})
	}
}

// TestOptOutWrongValueDoesNotCount: only the documented values opt out.
func TestOptOutWrongValueDoesNotCount(t *testing.T) {
	c := newCluster()
	c.node("node-00", "8", "32Gi", noSchedule)
	c.node("node-01", "8", "32Gi")
	pod := c.pod("team-a", "api", "ReplicaSet", "node-00", "1", "1Gi")
	pod.Annotations = map[string]string{optout.SafeToEvict: "true", optout.KarpenterDoNotDisrupt: "false"}
	if p := runPlan(t, c, "binpacking", Options{MinScoreGain: 1}); !moved(p, pod) {
		t.Errorf("a pod annotated safe-to-evict=true is not moved off a tainted node: %+v", p.Skipped)
	}
}

// TestRecheckHonoursALateOptOut: a node annotated after the plan keeps its
// pods: every move off it is refused just before its eviction.
func TestRecheckHonoursALateOptOut(t *testing.T) {
	c, pol, profs, p := thinPlan(t)
	source := p.Moves[0].Source
	off := countMoves(p, func(m plan.Move) bool { return m.Source == source })
	for _, n := range c.snap.Nodes {
		if n.Name == source {
			n.Annotations = map[string]string{optout.KarpenterDoNotDisrupt: "true"}
		}
	}
	refused := recheckAll(t, profs, pol, c.snap, p)
	if len(refused) != off {
		t.Fatalf("refused %v, want the %d moves off %s", refused, off, source)
	}
	for _, r := range refused {
		if !strings.Contains(r, plan.ReasonOptOut) || !strings.Contains(r, optout.KarpenterDoNotDisrupt) {
			t.Errorf("refused %s, want %s naming the annotation", r, plan.ReasonOptOut)
		}
	}
}
