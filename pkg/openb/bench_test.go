package openb

import (
	"context"
	"testing"
)

// BenchmarkImportTrace replays the whole default pod list of the openb
// trace, every creation and deletion, with kube-scheduler's default
// profile (hack/bench's import measures a 1,000,000-pod list).
func BenchmarkImportTrace(b *testing.B) {
	nodes, pods := openbTrace(b)
	var last int64
	for _, p := range pods {
		last = max(last, p.Created, p.Deleted)
	}
	events := 0
	for b.Loop() {
		_, stats, err := Import(context.Background(), nodes, pods, Options{At: last})
		if err != nil {
			b.Fatal(err)
		}
		events += stats.Created + stats.Deleted
	}
	b.ReportMetric(float64(events)/b.Elapsed().Seconds(), "events/s")
}
