package executor

import (
	"context"
	"fmt"

	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	"github.com/rebalancer-dev/rebalancer/pkg/plan"
)

// Result is what became of a plan's moves: each one is either evicted or
// skipped.
type Result struct {
	Evicted []plan.Move `json:"evicted"`
	// InBackground are the moves whose pods' owners answered the eviction
	// by evacuating the pods themselves (a KubeVirt VM migrates live): the
	// pods leave when their owners have moved them (see
	// evictsInBackground).
	InBackground []plan.Move `json:"inBackground,omitempty"`
	Skipped      []plan.Skip `json:"skipped"`
	// Errors counts the skips caused by an API error rather than by the
	// cluster's state (reasons error, patch-failed, taint-failed,
	// history-failed).
	Errors int `json:"errors"`
	// HistoryError says why the move history could not be written.
	HistoryError string `json:"historyError,omitempty"`
}

// outcome is what became of one move.
type outcome struct {
	// pod is the live pod, when it was read and is the one the move names;
	// events are recorded on it.
	pod *v1.Pod
	// reason is empty when the pod was evicted, or its owner evicts it in
	// the background.
	reason     string
	background bool
	detail     string
	// err is the API error behind the skip, if any.
	err error
	// historyErr is why the move history could not be written before the
	// eviction: the plan stops.
	historyErr error
}

// record adds a move's outcome to the result, the metrics, the log and the
// pod's events.
func (e *Executor) record(ctx context.Context, p *plan.Plan, r *Result, m plan.Move, o outcome) {
	logger := klog.FromContext(ctx)
	if o.reason == "" {
		if o.background {
			r.InBackground = append(r.InBackground, m)
		} else {
			r.Evicted = append(r.Evicted, m)
		}
		// The history has it already: written ahead (carry).
		e.o.Metrics.evicted(m.Strategy, o.background)
		if o.background {
			logger.Info("Pod evicted in the background by its owner", "pod", klog.KObj(o.pod), "source", m.Source, "target", m.Target, "strategy", m.Strategy)
			e.event(o.pod, v1.EventTypeNormal, EventRebalanced, "%s: %s → %s (%s), plan %s: its owner evacuates it", m.Strategy, m.Source, m.Target, m.Reason, p.ID)
			return
		}
		logger.Info("Evicted pod", "pod", klog.KObj(o.pod), "source", m.Source, "target", m.Target, "strategy", m.Strategy)
		e.event(o.pod, v1.EventTypeNormal, EventRebalanced, "%s: %s → %s (%s), plan %s", m.Strategy, m.Source, m.Target, m.Reason, p.ID)
		return
	}

	r.Skipped = append(r.Skipped, m.Skipped(o.reason, o.detail))
	e.o.Metrics.skipped(m.Strategy, o.reason, o.err != nil)
	kv := []any{"pod", klog.KRef(m.Namespace, m.Name), "source", m.Source, "target", m.Target, "strategy", m.Strategy, "reason", o.reason}
	switch {
	case o.err != nil:
		r.Errors++
		logger.Error(o.err, "Move failed", kv...)
	case o.reason == plan.ReasonStopped:
		// Execute logs the stop once.
		logger.V(4).Info("Skipped move", kv...)
	default:
		logger.Info("Skipped move", append(kv, "detail", o.detail)...)
	}
	// Only a pod that was read and is still the planned one gets the event:
	// a gone or replaced pod would carry it to the wrong object or none.
	if o.pod != nil {
		note := fmt.Sprintf("%s: %s → %s not done, plan %s: %s", m.Strategy, m.Source, m.Target, p.ID, o.reason)
		if o.detail != "" {
			note += " (" + o.detail + ")"
		}
		e.event(o.pod, v1.EventTypeWarning, EventRebalanceSkipped, "%s", note)
	}
}
