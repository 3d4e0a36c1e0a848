package planner

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"

	"k8s.io/klog/v2/ktesting"

	"github.com/rebalancer-dev/rebalancer/pkg/synthetic"
)

// BenchmarkPlan measures one plan of the shipped bin-packing pair on
// generated clusters of 30 pods per node (the snapshot is generated before
// the timer starts; building the simulation is part of the plan):
//
//	go test ./pkg/planner/ -run '^$' -bench Plan -benchtime 1x
func BenchmarkPlan(b *testing.B) {
	for _, nodes := range []int{1000, 5000} {
		b.Run(fmt.Sprintf("nodes=%d", nodes), func(b *testing.B) {
			snap, err := synthetic.Generate(synthetic.Options{Nodes: nodes, Pods: 30 * nodes, Seed: 1})
			if err != nil {
				b.Fatal(err)
			}
			pol, prof := loadPair(b, "binpacking")
			_, ctx := ktesting.NewTestContext(b)
			b.ResetTimer()
			moves := 0
			for i := 0; i < b.N; i++ {
				p, err := planOn(ctx, pol, prof, snap, Options{MinScoreGain: 1})
				if err != nil {
					b.Fatal(err)
				}
				moves = len(p.Moves)
			}
			b.ReportMetric(float64(moves), "moves")
			b.ReportMetric(peakRSSMiB(), "peak-RSS-MiB")
		})
	}
}

// peakRSSMiB is the process's peak resident set (VmHWM), in MiB: it covers
// generating the snapshot too, so it bounds the plan's footprint from above.
func peakRSSMiB() float64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "VmHWM:" {
			kb, _ := strconv.ParseFloat(f[1], 64)
			return kb / 1024
		}
	}
	return 0
}
