package main

import (
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// metricValues are a /metrics page's samples: name{labels} -> value.
type metricValues map[string]float64

// parseMetrics reads the Prometheus text format, as much of it as the
// samples need: comments skipped, timestamps ignored.
func parseMetrics(body string) metricValues {
	out := metricValues{}
	for _, line := range strings.Split(body, "\n") {
		if line == "" || line[0] == '#' {
			continue
		}
		// The value follows the series, after the closing brace when there
		// are labels (whose values may hold spaces).
		series, rest, _ := strings.Cut(line, " ")
		if i := strings.LastIndexByte(line, '}'); i >= 0 {
			series, rest = line[:i+1], line[i+1:]
		}
		fields := strings.Fields(rest)
		if len(fields) == 0 {
			continue
		}
		v, err := strconv.ParseFloat(fields[0], 64)
		if err != nil {
			continue
		}
		out[series] = v
	}
	return out
}

// sum adds the samples of metric whose labels contain every one of want
// (e.g. `result="evicted"`).
func (m metricValues) sum(metric string, want ...string) float64 {
	total := 0.0
	for series, v := range m {
		name, labels, _ := strings.Cut(series, "{")
		if name != metric {
			continue
		}
		ok := true
		for _, w := range want {
			ok = ok && strings.Contains(labels, w)
		}
		if ok {
			total += v
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
	return parseMetrics(string(body)), nil
}
