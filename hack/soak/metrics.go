package main

import (
	"cmp"
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// metricValues are a /metrics page's metric families, by name.
type metricValues map[string]*dto.MetricFamily

// parseMetrics reads the Prometheus text format with Prometheus's own
// parser.
func parseMetrics(body string) (metricValues, error) {
	parser := expfmt.NewTextParser(model.UTF8Validation)
	return parser.TextToMetricFamilies(strings.NewReader(body))
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
	for _, s := range family.GetMetric() {
		labels := map[string]string{}
		for _, l := range s.GetLabel() {
			labels[l.GetName()] = l.GetValue()
		}
		ok := true
		for _, w := range want {
			name, v, _ := strings.Cut(w, "=")
			ok = ok && labels[name] == v
		}
		if ok {
			total += value(s)
		}
	}
	return total
}

var scrapeClient = &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
	// rebalancer-scheduler serves /metrics over TLS with a self-signed
	// certificate, on loopback.
	TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // a loopback process of the run
}}

func scrape(url string) (metricValues, error) {
	resp, err := scrapeClient.Get(url)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return parseMetrics(string(body))
}
