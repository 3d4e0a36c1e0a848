package planner

import (
	"strings"
	"testing"

	"k8s.io/klog/v2/ktesting"
	"sigs.k8s.io/descheduler/pkg/descheduler/evictions"

	"github.com/rebalancer-dev/rebalancer/pkg/plan"
)

// TestEvictionsInBackground: pods whose owners evict them in the
// background (eviction-in-progress) are never moved again, count against
// the policy's limits while they run, and are counted in the summary; a
// pod whose eviction in the background has ended (Succeeded) counts no
// more.
func TestEvictionsInBackground(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	pol, prof := loadPair(t, "binpacking")
	pol.MaxNoOfPodsToEvictTotal = ptrTo(uint(6))
	free, err := planOn(ctx, pol, prof, thinCluster(12).snap, Options{MinScoreGain: 1})
	if err != nil {
		t.Fatal(err)
	}
	if len(free.Moves) != 6 {
		t.Fatalf("%d moves without evictions in flight, want the limit's 6", len(free.Moves))
	}

	c := thinCluster(12)
	var inFlight []string
	for _, pod := range c.snap.Pods {
		switch {
		case pod.Spec.NodeName == "node-03" && pod.Namespace != "kube-system":
			pod.Annotations = map[string]string{evictions.EvictionInProgressAnnotationKey: ""}
			inFlight = append(inFlight, pod.Namespace+"/"+pod.Name)
		case pod.Spec.NodeName == "node-04" && pod.Namespace == "team-a":
			pod.Annotations = map[string]string{evictions.EvictionInProgressAnnotationKey: ""}
			pod.Status.Phase = "Succeeded" // done: no longer in flight
		}
	}
	p, err := planOn(ctx, pol, prof, c.snap, Options{MinScoreGain: 1})
	if err != nil {
		t.Fatal(err)
	}
	if got := p.Summary.EvictionsInFlight; got != len(inFlight) {
		t.Errorf("evictions in flight %d, want %d", got, len(inFlight))
	}
	if len(p.Moves) == 0 || len(p.Moves) > 6-len(inFlight) {
		t.Errorf("%d moves, want 1 to %d: the limit of 6 counts the %d evictions in flight", len(p.Moves), 6-len(inFlight), len(inFlight))
	}
	for _, m := range p.Moves {
		for _, pod := range inFlight {
			if m.Pod == pod {
				t.Errorf("%s moved while its owner evicts it in the background", pod)
			}
		}
	}
	for _, s := range p.Skipped {
		if s.Reason == plan.ReasonEvicting && !strings.Contains(s.Detail, evictions.EvictionInProgressAnnotationKey) {
			t.Errorf("%s skipped as %s with detail %q; want the annotation named", s.Pod, s.Reason, s.Detail)
		}
	}
}

// TestRecheckRefusesAPodEvictedInTheBackground: a pod whose owner began to
// evict it in the background after the plan is not evicted again.
func TestRecheckRefusesAPodEvictedInTheBackground(t *testing.T) {
	c, pol, profs, p := thinPlan(t)
	if len(p.Moves) == 0 {
		t.Fatal("no moves to recheck")
	}
	moved := podsByUID(c.snap)[p.Moves[0].UID]
	moved.Annotations = map[string]string{evictions.EvictionInProgressAnnotationKey: ""}
	refused := recheckAll(t, profs, pol, c.snap, p)
	if len(refused) != 1 || !strings.HasPrefix(refused[0], p.Moves[0].Pod+": "+plan.ReasonEvicting+": ") {
		t.Errorf("refused %q; want %s alone, as %s", refused, p.Moves[0].Pod, plan.ReasonEvicting)
	}
}

// TestEvictionsInBackgroundAreNeverMoved: with one workload's pods all in
// flight on a thin cluster, no plugin of the bin-packing policy moves one.
func TestEvictionsInBackgroundAreNeverMoved(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	pol, prof := loadPair(t, "binpacking")
	c := thinCluster(12)
	for _, pod := range c.snap.Pods {
		if pod.Namespace == "team-a" {
			pod.Annotations = map[string]string{evictions.EvictionInProgressAnnotationKey: "true"}
		}
	}
	p, err := planOn(ctx, pol, prof, c.snap, Options{MinScoreGain: 1})
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range p.Moves {
		if m.Namespace == "team-a" {
			t.Errorf("%s moved by %s while its owner evicts it in the background", m.Pod, m.Strategy)
		}
	}
	if p.Summary.SkippedByReason[plan.ReasonEvicting] == 0 {
		t.Errorf("skips %v: want %s", p.Summary.SkippedByReason, plan.ReasonEvicting)
	}
}
