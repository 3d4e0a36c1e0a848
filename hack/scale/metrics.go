package main

import (
	"fmt"
	"io"
	"math"
	"slices"

	dto "github.com/prometheus/client_model/go"

	"github.com/rebalancer-dev/rebalancer/hack/internal/harness"
)

// extenderLatency is the extender's histogram of its answers' time.
const extenderLatency = "rebalancer_extender_request_duration_seconds"

// histogram is a Prometheus histogram's series: cumulative bucket counts
// by upper bound, ascending, ending with +Inf.
type histogram struct {
	Bounds []float64
	Counts []float64
	Count  float64
	Sum    float64
}

// parseHistogram reads the series of the histogram metric whose labels
// include every one of want ("name=value") from a /metrics page in the
// Prometheus text format, adding up the series that match; empty when
// there are none.
func parseHistogram(body io.Reader, metric string, want ...string) (histogram, error) {
	families, err := harness.ParseMetrics(body)
	if err != nil {
		return histogram{}, err
	}
	return histogramOf(families[metric], want...)
}

// histogramOf adds up the series of the histogram family whose labels
// include every one of want; empty when there are none (a histogram
// without observations yet has no series).
func histogramOf(f *dto.MetricFamily, want ...string) (histogram, error) {
	var h histogram
	for _, m := range harness.Matching(f, want...) {
		hist := m.GetHistogram()
		if hist == nil {
			continue
		}
		// The text format lists the +Inf bucket; the parser may leave
		// it out.
		var bounds, counts []float64
		for _, b := range hist.GetBucket() {
			bounds = append(bounds, b.GetUpperBound())
			counts = append(counts, float64(b.GetCumulativeCount()))
		}
		if len(bounds) == 0 || !math.IsInf(bounds[len(bounds)-1], 1) {
			bounds = append(bounds, math.Inf(1))
			counts = append(counts, float64(hist.GetSampleCount()))
		}
		if h.Bounds == nil {
			h.Bounds, h.Counts = bounds, make([]float64, len(bounds))
		}
		if !slices.Equal(bounds, h.Bounds) {
			return histogram{}, fmt.Errorf("%s: series with different buckets", f.GetName())
		}
		for i, c := range counts {
			h.Counts[i] += c
		}
		h.Count += float64(hist.GetSampleCount())
		h.Sum += hist.GetSampleSum()
	}
	return h, nil
}

// minus is what h observed since earlier, a scrape of the same series.
func (h histogram) minus(earlier histogram) histogram {
	out := histogram{Bounds: h.Bounds, Counts: make([]float64, len(h.Counts)), Count: h.Count - earlier.Count, Sum: h.Sum - earlier.Sum}
	for i := range h.Counts {
		out.Counts[i] = h.Counts[i]
		if i < len(earlier.Counts) {
			out.Counts[i] -= earlier.Counts[i]
		}
	}
	return out
}

// quantile estimates the q-quantile as Prometheus' histogram_quantile
// does: linear within the bucket it falls in; the highest finite bound
// when it falls in +Inf; 0 without observations.
func (h histogram) quantile(q float64) float64 {
	if h.Count == 0 || len(h.Counts) == 0 {
		return 0
	}
	rank := q * h.Count
	for i, c := range h.Counts {
		if c < rank {
			continue
		}
		if math.IsInf(h.Bounds[i], 1) {
			if i == 0 {
				return 0
			}
			return h.Bounds[i-1]
		}
		lower, below := 0.0, 0.0
		if i > 0 {
			lower, below = h.Bounds[i-1], h.Counts[i-1]
		}
		if c == below {
			return h.Bounds[i]
		}
		return lower + (h.Bounds[i]-lower)*(rank-below)/(c-below)
	}
	return h.Bounds[len(h.Bounds)-1]
}

func (h histogram) mean() float64 {
	if h.Count == 0 {
		return 0
	}
	return h.Sum / h.Count
}

func scrapeHistogram(url, metric string, want ...string) (histogram, error) {
	families, err := harness.Scrape(url)
	if err != nil {
		return histogram{}, err
	}
	return histogramOf(families[metric], want...)
}
