package main

import "testing"

func TestParseMetrics(t *testing.T) {
	m, err := parseMetrics(`# HELP go_goroutines Number of goroutines.
# TYPE go_goroutines gauge
go_goroutines 42
process_resident_memory_bytes 1.2345e+08
# TYPE rebalancer_evictions_total counter
rebalancer_evictions_total{result="evicted",strategy="Consolidation"} 7
rebalancer_evictions_total{result="skipped",strategy="Consolidation"} 3
rebalancer_evictions_total{result="evicted",strategy="HighNodeUtilization"} 2 1700000000000
odd{note="a } b"} 5
# TYPE rebalancer_cycle_duration_seconds histogram
rebalancer_cycle_duration_seconds_bucket{le="1"} 1
rebalancer_cycle_duration_seconds_bucket{le="+Inf"} 2
rebalancer_cycle_duration_seconds_sum 1.5
rebalancer_cycle_duration_seconds_count 2
`)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		metric string
		labels []string
		want   float64
	}{
		{metric: "go_goroutines", want: 42},
		{metric: "process_resident_memory_bytes", want: 1.2345e8},
		{metric: "rebalancer_evictions_total", labels: []string{"result=evicted"}, want: 9},
		{metric: "rebalancer_evictions_total", want: 12},
		{metric: "rebalancer_evictions_total", labels: []string{"result=evicted", "strategy=Consolidation"}, want: 7},
		{metric: "odd", want: 5},
		{metric: "rebalancer_cycle_duration_seconds_sum", want: 1.5},
		{metric: "rebalancer_cycle_duration_seconds_count", want: 2},
		{metric: "missing", want: 0},
	} {
		if got := m.sum(tc.metric, tc.labels...); got != tc.want {
			t.Errorf("sum(%s, %v) = %v, want %v", tc.metric, tc.labels, got, tc.want)
		}
	}
	if _, err := parseMetrics("not metrics {\n"); err == nil {
		t.Error("a page that is not the text format: want an error")
	}
}
