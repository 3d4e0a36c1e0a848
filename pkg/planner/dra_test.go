package planner

import (
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"

	"github.com/rebalancer-dev/rebalancer/pkg/plan"
	"github.com/rebalancer-dev/rebalancer/pkg/snapshot"
)

// TestPodsWithDeviceClaimsStay: trainer-0 uses gpu-a's GPU through a claim
// made from a template. With gpu-a tainted it violates the taint, and gpu-b
// has a free GPU; the simulation does not yet give a replacement fresh
// claims, so the pod stays, skipped as resource-claim, naming its claim.
func TestPodsWithDeviceClaimsStay(t *testing.T) {
	snap, err := snapshot.Load("../../test/testdata/dra-snapshot.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range snap.Nodes {
		if n.Name == "gpu-a" {
			n.Spec.Taints = append(n.Spec.Taints, v1.Taint{Key: "maintenance", Effect: v1.TaintEffectNoSchedule})
		}
	}
	pol, _ := loadPair(t, "binpacking")
	p := planWith(t, schedulers(t), pol, snap)
	if len(p.Moves) != 0 {
		t.Fatalf("moves %+v, want none", p.Moves)
	}
	var skips []plan.Skip
	for _, s := range p.Skipped {
		if s.Pod == "ml/trainer-0" {
			skips = append(skips, s)
		}
	}
	if len(skips) == 0 {
		t.Fatalf("trainer-0 is not skipped: %+v", p.Skipped)
	}
	for _, s := range skips {
		if s.Reason != plan.ReasonClaim || !strings.Contains(s.Detail, "ResourceClaim ml/trainer-0-gpu-x7k2p") {
			t.Errorf("skipped as %s: %s; want %s naming its claim", s.Reason, s.Detail, plan.ReasonClaim)
		}
	}
}
