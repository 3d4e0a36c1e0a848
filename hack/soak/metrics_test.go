package main

import "testing"

func TestParseMetrics(t *testing.T) {
	m := parseMetrics(`# HELP go_goroutines Number of goroutines.
# TYPE go_goroutines gauge
go_goroutines 42
process_resident_memory_bytes 1.2345e+08
rebalancer_evictions_total{result="evicted",strategy="Consolidation"} 7
rebalancer_evictions_total{result="skipped",strategy="Consolidation"} 3
rebalancer_evictions_total{result="evicted",strategy="HighNodeUtilization"} 2 1700000000000
odd{note="a } b"} 5
rebalancer_cycle_duration_seconds_sum 1.5
`)
	if got := m.sum("go_goroutines"); got != 42 {
		t.Errorf("goroutines %v", got)
	}
	if got := m.sum("process_resident_memory_bytes"); got != 1.2345e8 {
		t.Errorf("rss %v", got)
	}
	if got := m.sum("rebalancer_evictions_total", `result="evicted"`); got != 9 {
		t.Errorf("evicted %v, want 9", got)
	}
	if got := m.sum("rebalancer_evictions_total"); got != 12 {
		t.Errorf("all evictions %v, want 12", got)
	}
	if got := m.sum("odd"); got != 5 {
		t.Errorf("a label value with a brace: %v", got)
	}
	if got := m.sum("rebalancer_cycle_duration_seconds_sum"); got != 1.5 {
		t.Errorf("sum %v", got)
	}
}
