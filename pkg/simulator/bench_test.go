package simulator

import (
	"context"
	"fmt"
	"testing"

	v1 "k8s.io/api/core/v1"

	"github.com/rebalancer-dev/rebalancer/pkg/synthetic"
)

// BenchmarkPredict measures placement predictions of running pods on
// generated clusters of 30 pods per node, with the shipped bin-packing
// profile scoring every feasible node:
//
//	go test ./pkg/simulator/ -run '^$' -bench Predict -benchtime 200x
func BenchmarkPredict(b *testing.B) {
	for _, nodes := range []int{1000, 5000} {
		b.Run(fmt.Sprintf("nodes=%d", nodes), func(b *testing.B) {
			snap, err := synthetic.Generate(synthetic.Options{Nodes: nodes, Pods: 30 * nodes, Seed: 1})
			if err != nil {
				b.Fatal(err)
			}
			s := newSim(b, "binpacking-scheduler.yaml", snap)
			var pods []*v1.Pod
			for _, p := range s.Bound() {
				if !NodeBound(p) {
					pods = append(pods, p)
				}
			}
			ctx := context.Background()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if _, err := s.Predict(ctx, pods[(i*7919)%len(pods)], PredictOptions{}); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "predictions/s")
		})
	}
}
