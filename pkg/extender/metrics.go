package extender

import (
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/rebalancer-dev/rebalancer/pkg/hint"
)

// Metrics are the extender's series on /metrics.
type Metrics struct {
	requests *prometheus.CounterVec
	latency  *prometheus.HistogramVec
	recorded prometheus.Counter
	consumed prometheus.Counter
	steered  prometheus.Counter
}

// NewMetrics registers the extender's metrics on reg; hints held are read
// from book at scrape time.
func NewMetrics(reg prometheus.Registerer, book *hint.Book) *Metrics {
	m := &Metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "rebalancer", Subsystem: "extender", Name: "requests_total",
			Help: "Extender requests by verb and HTTP status code.",
		}, []string{"verb", "code"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: "rebalancer", Subsystem: "extender", Name: "request_duration_seconds",
			Help: "Time to answer an extender request, by verb. kube-scheduler waits 5 s by default (httpTimeout).",
			// 100 µs to ~3.3 s.
			Buckets: prometheus.ExponentialBuckets(0.0001, 2, 16),
		}, []string{"verb"}),
		recorded: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "rebalancer", Subsystem: "extender", Name: "hints_recorded_total",
			Help: "Rebalance hints recorded from pods seen leaving.",
		}),
		consumed: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "rebalancer", Subsystem: "extender", Name: "hints_consumed_total",
			Help: "Rebalance hints consumed by a replacement that was bound.",
		}),
		steered: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "rebalancer", Subsystem: "extender", Name: "steered_total",
			Help: "Prioritize calls answered with a hint (a replacement scored towards its planned target).",
		}),
	}
	held := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Namespace: "rebalancer", Subsystem: "extender", Name: "hints",
		Help: "Rebalance hints held (live, consumed or not).",
	}, func() float64 { return float64(book.Len()) })
	reg.MustRegister(m.requests, m.latency, m.recorded, m.consumed, m.steered, held)
	return m
}

func (m *Metrics) observe(verb string, code int, took time.Duration) {
	m.requests.WithLabelValues(verb, strconv.Itoa(code)).Inc()
	m.latency.WithLabelValues(verb).Observe(took.Seconds())
}
