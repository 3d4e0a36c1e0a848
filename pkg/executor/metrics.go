package executor

import (
	"slices"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/rebalancer-dev/rebalancer/pkg/plan"
)

// Results of a move in rebalancer_evictions_total.
const (
	resultEvicted = "evicted"
	// resultBackground: the owner evicts the pod itself, in the background
	// (Result.InBackground).
	resultBackground = "background"
	resultSkipped    = "skipped"
	resultError      = "error"
)

// Metrics counts what the executor did. Every label value comes from a fixed
// set (the descheduler plugin names, plan.Reasons, the results), so
// the number of series stays bounded whatever the cluster holds.
type Metrics struct {
	evictions  *prometheus.CounterVec
	skips      *prometheus.CounterVec
	planMoves  prometheus.Gauge
	planHeld   prometheus.Gauge
	nodesInUse *prometheus.GaugeVec
	lowerBound prometheus.Gauge
	drainTimeouts,
	leftBehind prometheus.Counter
}

// NewMetrics creates the executor's metrics and registers them on reg. It
// panics if they are already registered there, like prometheus.MustRegister.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		evictions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "rebalancer",
			Name:      "evictions_total",
			Help:      "Moves the executor finished, by the descheduler plugin that asked for them and the result: evicted, background (the pod's owner evicts it itself), skipped, or error (skipped because of an API error).",
		}, []string{"strategy", "result"}),
		skips: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "rebalancer",
			Name:      "skips_total",
			Help:      "Moves the executor did not carry out, by reason.",
		}, []string{"reason"}),
	}
	m.planMoves = prometheus.NewGauge(prometheus.GaugeOpts{
		Namespace: "rebalancer", Name: "plan_moves",
		Help: "Moves in the last plan the executor was given.",
	})
	m.planHeld = prometheus.NewGauge(prometheus.GaugeOpts{
		Namespace: "rebalancer", Name: "plan_held_empty_nodes",
		Help: "Empty nodes the last plan holds off limits with the drain taint for its cycle (--hold-empty-nodes).",
	})
	m.nodesInUse = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: "rebalancer", Name: "nodes_in_use",
		Help: "Nodes running pods other than DaemonSet and mirror pods, before the last plan and as it predicts them after.",
	}, []string{"when"})
	m.lowerBound = prometheus.NewGauge(prometheus.GaugeOpts{
		Namespace: "rebalancer", Name: "nodes_lower_bound",
		Help: "The fewest nodes the pods' requests fit on, by resources alone, as of the last plan.",
	})
	m.drainTimeouts = prometheus.NewCounter(prometheus.CounterOpts{
		Namespace: "rebalancer", Name: "drain_timeouts_total",
		Help: "Drained nodes whose taint was removed at --drain-timeout with replacements of their pods still pending (a DrainTimeout event names them).",
	})
	m.leftBehind = prometheus.NewCounter(prometheus.CounterOpts{
		Namespace: "rebalancer", Name: "drain_taints_left_behind_total",
		Help: "Drain taints an earlier run left on nodes (it was killed mid-plan), removed at the start of a cycle.",
	})
	reg.MustRegister(m.evictions, m.skips, m.planMoves, m.planHeld, m.nodesInUse, m.lowerBound, m.drainTimeouts, m.leftBehind)
	// Start every reason at zero, so rate() and alerts see it before the
	// first skip.
	for _, r := range plan.Reasons {
		m.skips.WithLabelValues(r)
	}
	return m
}

// observePlan records the size of a plan and the nodes in use it expects.
func (m *Metrics) observePlan(p *plan.Plan) {
	if m == nil {
		return
	}
	m.planMoves.Set(float64(len(p.Moves)))
	m.planHeld.Set(float64(len(p.HeldEmpty)))
	m.nodesInUse.WithLabelValues("before").Set(float64(p.Summary.NodesInUseBefore))
	m.nodesInUse.WithLabelValues("after").Set(float64(p.Summary.NodesInUseAfter))
	m.lowerBound.Set(float64(p.Summary.NodesLowerBound))
}

func (m *Metrics) drainTimedOut() {
	if m != nil {
		m.drainTimeouts.Inc()
	}
}

func (m *Metrics) drainTaintLeftBehind() {
	if m != nil {
		m.leftBehind.Inc()
	}
}

func (m *Metrics) evicted(strategy string, background bool) {
	if m == nil {
		return
	}
	result := resultEvicted
	if background {
		result = resultBackground
	}
	m.evictions.WithLabelValues(strategy, result).Inc()
}

func (m *Metrics) skipped(strategy, reason string, apiError bool) {
	if m == nil {
		return
	}
	result := resultSkipped
	if apiError {
		result = resultError
	}
	m.evictions.WithLabelValues(strategy, result).Inc()
	// Validate's reasons are free text: only known ones are labels.
	if !slices.Contains(plan.Reasons, reason) {
		reason = plan.ReasonRejected
	}
	m.skips.WithLabelValues(reason).Inc()
}
