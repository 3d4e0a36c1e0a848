package planner

import (
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	"github.com/rebalancer-dev/rebalancer/pkg/plan"
	"github.com/rebalancer-dev/rebalancer/pkg/snapshot"
)

// draCluster is test/testdata/dra-snapshot.yaml with gpu-a tainted, so
// that trainer-0, whose claim made from a template holds gpu-a's GPU,
// violates the taint; gpu-b publishes a free GPU. waiting (pending, its
// own claim for a GPU) is in it only when asked for.
func draCluster(t *testing.T, waiting bool) *snapshot.Snapshot {
	t.Helper()
	snap, err := snapshot.Load("../../test/testdata/dra-snapshot.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range snap.Nodes {
		if n.Name == "gpu-a" {
			n.Spec.Taints = append(n.Spec.Taints, v1.Taint{Key: "maintenance", Effect: v1.TaintEffectNoSchedule})
		}
	}
	if !waiting {
		kept := snap.Pods[:0]
		for _, p := range snap.Pods {
			if p.Name != "waiting" {
				kept = append(kept, p)
			}
		}
		snap.Pods = kept
	}
	return snap
}

func skipsOf(p *plan.Plan, pod string) []plan.Skip {
	var out []plan.Skip
	for _, s := range p.Skipped {
		if s.Pod == pod {
			out = append(out, s)
		}
	}
	return out
}

// TestPodsWithDeviceClaimsMove: trainer-0 leaves the tainted gpu-a for
// gpu-b, the only node with a free GPU, its replacement getting a claim of
// its own there. With a pending pod that asks for a GPU too (kube-scheduler
// places pods already pending first), gpu-b's GPU is that pod's, and the
// plan's replay drops the move rather than evict trainer-0 into Pending.
func TestPodsWithDeviceClaimsMove(t *testing.T) {
	pol, _ := loadPair(t, "binpacking")
	p := planWith(t, schedulers(t), pol, draCluster(t, false))
	if len(p.Moves) != 1 || p.Moves[0].Name != "trainer-0" || p.Moves[0].Target != "gpu-b" {
		t.Fatalf("moves %+v, skips %+v; want trainer-0 to gpu-b", p.Moves, p.Skipped)
	}

	p = planWith(t, schedulers(t), pol, draCluster(t, true))
	if len(p.Moves) != 0 {
		t.Fatalf("with a pod pending for gpu-b's GPU: moves %+v, want none", p.Moves)
	}
	skips := skipsOf(p, "ml/trainer-0")
	if len(skips) == 0 || skips[0].Reason != plan.ReasonTargetChanged || !strings.Contains(skips[0].Detail, "gpu-b no longer fits it") {
		t.Errorf("trainer-0 skipped %+v; want target-changed, gpu-b taken by the pending pod", skips)
	}
}

// TestPodsWithSharedClaimsStay: a pod that names its claim (others may
// share it; its devices stay allocated on gpu-a) is not moved off the
// tainted node, and the skip names the claim.
func TestPodsWithSharedClaimsStay(t *testing.T) {
	snap := draCluster(t, false)
	for _, pod := range snap.Pods {
		if pod.Name == "trainer-0" {
			pod.Spec.ResourceClaims = []v1.PodResourceClaim{{Name: "gpu", ResourceClaimName: ptr.To("trainer-0-gpu-x7k2p")}}
			pod.Status.ResourceClaimStatuses = nil
		}
	}
	pol, _ := loadPair(t, "binpacking")
	p := planWith(t, schedulers(t), pol, snap)
	if len(p.Moves) != 0 {
		t.Fatalf("moves %+v, want none", p.Moves)
	}
	skips := skipsOf(p, "ml/trainer-0")
	if len(skips) == 0 {
		t.Fatalf("trainer-0 is not skipped: %+v", p.Skipped)
	}
	for _, s := range skips {
		if s.Reason != plan.ReasonClaim || !strings.Contains(s.Detail, "ResourceClaim ml/trainer-0-gpu-x7k2p") {
			t.Errorf("skipped as %s: %s; want %s naming its claim", s.Reason, s.Detail, plan.ReasonClaim)
		}
	}
}
