package main

import (
	"cmp"
	"strings"

	dto "github.com/prometheus/client_model/go"

	"github.com/rebalancer-dev/rebalancer/hack/internal/harness"
)

// metricValues are a /metrics page's metric families, by name.
type metricValues map[string]*dto.MetricFamily

// parseMetrics reads the Prometheus text format (harness.ParseMetrics).
func parseMetrics(body string) (metricValues, error) {
	return harness.ParseMetrics(strings.NewReader(body))
}

// sum adds the samples of metric whose labels include every one of want
// ("name=value", e.g. "result=evicted"). A histogram's or summary's
// <name>_sum and <name>_count are read from the family <name>.
func (m metricValues) sum(metric string, want ...string) float64 {
	value := func(s *dto.Metric) float64 {
		switch {
		case s.Gauge != nil:
			return s.Gauge.GetValue()
		case s.Counter != nil:
			return s.Counter.GetValue()
		case s.Untyped != nil:
			return s.Untyped.GetValue()
		}
		return 0
	}
	family := m[metric]
	if family == nil {
		for suffix, part := range map[string]func(*dto.Metric) float64{
			"_sum": func(s *dto.Metric) float64 {
				return cmp.Or(s.GetHistogram().GetSampleSum(), s.GetSummary().GetSampleSum())
			},
			"_count": func(s *dto.Metric) float64 {
				return float64(cmp.Or(s.GetHistogram().GetSampleCount(), s.GetSummary().GetSampleCount()))
			},
		} {
			if base, ok := strings.CutSuffix(metric, suffix); ok && m[base] != nil {
				family, value = m[base], part
			}
		}
	}
	total := 0.0
	for _, s := range harness.Matching(family, want...) {
		total += value(s)
	}
	return total
}

func scrape(url string) (metricValues, error) { return harness.Scrape(url) }
