package webhook

import (
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the webhook's series on /metrics.
type metrics struct {
	requests *prometheus.CounterVec
	latency  prometheus.Histogram
}

// newMetrics registers the webhook's metrics on reg.
func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "rebalancer", Subsystem: "webhook", Name: "requests_total",
			Help: "Admission requests by HTTP status code and result: mutated (given the scheduler), unchanged, or error.",
		}, []string{"code", "result"}),
		latency: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: "rebalancer", Subsystem: "webhook", Name: "request_duration_seconds",
			Help:    "Time to answer an admission request.",
			Buckets: prometheus.ExponentialBuckets(0.0001, 2, 16),
		}),
	}
	reg.MustRegister(m.requests, m.latency)
	return m
}

func (m *metrics) observe(code int, result string, took time.Duration) {
	m.requests.WithLabelValues(strconv.Itoa(code), result).Inc()
	m.latency.Observe(took.Seconds())
}
