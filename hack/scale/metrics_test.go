package main

import (
	"math"
	"strings"
	"testing"
)

const page = `# HELP rebalancer_extender_request_duration_seconds Time to answer an extender request, by verb.
# TYPE rebalancer_extender_request_duration_seconds histogram
rebalancer_extender_request_duration_seconds_bucket{verb="prioritize",le="0.001"} 10
rebalancer_extender_request_duration_seconds_bucket{verb="prioritize",le="0.002"} 60
rebalancer_extender_request_duration_seconds_bucket{verb="prioritize",le="0.004"} 99
rebalancer_extender_request_duration_seconds_bucket{verb="prioritize",le="+Inf"} 100
rebalancer_extender_request_duration_seconds_sum{verb="prioritize"} 0.2
rebalancer_extender_request_duration_seconds_count{verb="prioritize"} 100
rebalancer_extender_request_duration_seconds_bucket{verb="other",le="0.001"} 5
rebalancer_extender_request_duration_seconds_bucket{verb="other",le="0.002"} 5
rebalancer_extender_request_duration_seconds_bucket{verb="other",le="0.004"} 5
rebalancer_extender_request_duration_seconds_bucket{verb="other",le="+Inf"} 5
rebalancer_extender_request_duration_seconds_sum{verb="other"} 0.001
rebalancer_extender_request_duration_seconds_count{verb="other"} 5
# TYPE process_resident_memory_bytes gauge
process_resident_memory_bytes 1.2e+08
`

func near(a, b float64) bool { return math.Abs(a-b) < 1e-9 }

func TestParseHistogram(t *testing.T) {
	h, err := parseHistogram(strings.NewReader(page), extenderLatency, "verb=prioritize")
	if err != nil {
		t.Fatal(err)
	}
	if h.Count != 100 || !near(h.Sum, 0.2) || len(h.Bounds) != 4 || !math.IsInf(h.Bounds[3], 1) {
		t.Fatalf("got %+v", h)
	}
	all, err := parseHistogram(strings.NewReader(page), extenderLatency)
	if err != nil {
		t.Fatal(err)
	}
	if all.Count != 105 || all.Counts[0] != 15 {
		t.Errorf("both series: got %+v", all)
	}
	none, err := parseHistogram(strings.NewReader(page), "rebalancer_missing_seconds")
	if err != nil || none.Count != 0 || none.quantile(0.5) != 0 {
		t.Errorf("missing metric: %+v, %v", none, err)
	}
}

func TestQuantile(t *testing.T) {
	h, err := parseHistogram(strings.NewReader(page), extenderLatency, "verb=prioritize")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ q, want float64 }{
		{0.05, 0.0005},  // in the first bucket, from 0
		{0.5, 0.0018},   // 40 of the 50 in (1ms, 2ms]
		{0.99, 0.004},   // the top of (2ms, 4ms]
		{0.995, 0.004},  // in +Inf: the highest finite bound
		{0.35, 0.0015},  // halfway through the second bucket
		{0.795, 0.0030}, // halfway through the third
	} {
		if got := h.quantile(c.q); !near(got, c.want) {
			t.Errorf("quantile(%g) = %g, want %g", c.q, got, c.want)
		}
	}
	if got := h.mean(); !near(got, 0.002) {
		t.Errorf("mean = %g, want 0.002", got)
	}
}

func TestMinus(t *testing.T) {
	before := histogram{Bounds: []float64{0.001, math.Inf(1)}, Counts: []float64{10, 20}, Count: 20, Sum: 1}
	after := histogram{Bounds: []float64{0.001, math.Inf(1)}, Counts: []float64{30, 40}, Count: 40, Sum: 3}
	d := after.minus(before)
	if d.Count != 20 || d.Sum != 2 || d.Counts[0] != 20 || d.Counts[1] != 20 {
		t.Errorf("got %+v", d)
	}
	// Nothing observed before: the histogram had no series.
	if d := after.minus(histogram{}); d.Count != 40 || d.Counts[0] != 30 {
		t.Errorf("from empty: got %+v", d)
	}
}
