package planner

import (
	"testing"

	"github.com/rebalancer-dev/rebalancer/pkg/synthetic"
)

// maxRSSMiB is the memory docs/reliability.md quotes for a plan at Kubernetes' limits.
const maxRSSMiB = 3 * 1024

// TestPlanAtScaleWithinMemory plans on the largest cluster Kubernetes
// supports (5,000 nodes, 150,000 pods) and checks the process's peak memory
// against the figure docs/reliability.md quotes. Its time is measured by BenchmarkPlan
// and `make bench`, not here.
func TestPlanAtScaleWithinMemory(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: 5,000 nodes take a few seconds and a GiB")
	}
	snap, err := synthetic.Generate(synthetic.Options{Nodes: 5000, Pods: 150000, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	pol, prof := loadPair(t, "binpacking")
	p, err := planOn(t.Context(), pol, prof, snap, Options{MinScoreGain: 1})
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Moves) == 0 {
		t.Fatal("no move planned on a fragmented cluster")
	}
	rss := peakRSSMiB()
	t.Logf("%d moves; peak RSS %.0f MiB", len(p.Moves), rss)
	if rss == 0 || rss > maxRSSMiB {
		t.Errorf("peak RSS %.0f MiB, want (0, %d]", rss, maxRSSMiB)
	}
}
