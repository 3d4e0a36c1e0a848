package planner

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2/ktesting"

	"github.com/rebalancer-dev/rebalancer/pkg/history"
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

// BenchmarkPlanWithHistory measures the plan of BenchmarkPlan at 500 nodes
// with a move history of a given length (moves of the cluster's own
// owners, within the cooldown): plan time must not grow with it.
//
//	go test ./pkg/planner/ -run '^$' -bench PlanWithHistory -benchtime 1x
func BenchmarkPlanWithHistory(b *testing.B) {
	snap, err := synthetic.Generate(synthetic.Options{Nodes: 500, Pods: 30 * 500, Seed: 1})
	if err != nil {
		b.Fatal(err)
	}
	pol, prof := loadPair(b, "binpacking")
	for _, length := range []int{0, 1500, 6000} {
		b.Run(fmt.Sprintf("moves=%d", length), func(b *testing.B) {
			h := history.New(nil, time.Hour)
			for i := range length {
				pod := snap.Pods[(i*7919)%len(snap.Pods)]
				owner := metav1.GetControllerOf(pod)
				if owner == nil {
					continue
				}
				h.Record(history.Eviction{Owner: owner.UID, From: "elsewhere", To: snap.Nodes[(i*31)%len(snap.Nodes)].Name})
			}
			_, ctx := ktesting.NewTestContext(b)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if _, err := planOn(ctx, pol, prof, snap, Options{MinScoreGain: 1, History: h}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
