package planner

import (
	"context"
	"slices"

	promapi "github.com/prometheus/client_golang/api"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"sigs.k8s.io/descheduler/pkg/descheduler/evictions"
	"sigs.k8s.io/descheduler/pkg/descheduler/metricscollector"
	frameworktypes "sigs.k8s.io/descheduler/pkg/framework/types"

	"github.com/rebalancer-dev/rebalancer/pkg/plan"
	"github.com/rebalancer-dev/rebalancer/pkg/simhandle"
	"github.com/rebalancer-dev/rebalancer/pkg/simulator"
)

// judgingHandle is the descheduler's handle each plugin is built with,
// its evictor the planner's judge.
type judgingHandle struct {
	frameworktypes.Handle
	evictor *judge
}

func (h *judgingHandle) Evictor() frameworktypes.Evictor { return h.evictor }

// MetricsCollector serves the simulation's usage, as it is when a plugin
// asks (LowNodeUtilization asks at every Balance); nil when the policy
// reads none, as the descheduler has no collector then.
func (h *judgingHandle) MetricsCollector() *metricscollector.MetricsCollector {
	if h.evictor.p.usage == nil {
		return nil
	}
	return h.evictor.p.usage.collector(context.Background())
}

// PrometheusClient answers the policy's Prometheus queries as the
// cluster's Prometheus did; nil when it asks none, as the descheduler has
// no client then.
func (h *judgingHandle) PrometheusClient() promapi.Client {
	if h.evictor.p.prometheus == nil {
		return nil
	}
	return h.evictor.p.prometheus
}

// judgingHandle also gives rebalancer's own plugins (Consolidation, MakeRoom) the
// simulation and grouped moves.
var _ simhandle.Handle = &judgingHandle{}

func (h *judgingHandle) Cluster() simhandle.Cluster { return h.evictor.p.sim }

func (h *judgingHandle) PlanMove(ctx context.Context, pod *v1.Pod, opts simulator.PredictOptions, eo evictions.EvictOptions) (string, error) {
	p := h.evictor.p
	planned, skipped := len(p.out.Moves), len(p.out.Skipped)
	if err := h.evictor.move(ctx, pod, eo, opts, ""); err != nil {
		if len(p.out.Skipped) > skipped {
			s := p.out.Skipped[len(p.out.Skipped)-1]
			return "", &simhandle.Refusal{Reason: s.Reason, Detail: s.Detail, Err: err}
		}
		return "", err
	}
	for _, m := range p.out.Moves[planned:] { // a gang's moves with it
		if m.UID == string(pod.UID) {
			return m.Target, nil
		}
	}
	return "", nil
}

// PlanMoveFor judges the eviction of pod to make room on its node for the
// pending pod room (MakeRoom): its replacement may not come back there,
// and its node is not drained (the pending pod goes there).
func (h *judgingHandle) PlanMoveFor(ctx context.Context, pod, room *v1.Pod, eo evictions.EvictOptions) error {
	return h.evictor.move(ctx, pod, eo, simulator.PredictOptions{LeaveSource: true}, key(room))
}

// Place places the pending pod where its scheduler would in the
// simulation, for MakeRoom once it made room; the pod is then offered for
// no eviction (it does not run yet). It returns the node, "" when the pod
// still fits nowhere.
func (h *judgingHandle) Place(ctx context.Context, pod *v1.Pod) (string, error) {
	p := h.evictor.p
	bound, _, err := p.sim.Place(ctx, pod)
	if err != nil || bound == nil {
		return "", err
	}
	p.arriving.Insert(bound.UID)
	p.arrivingOn.Insert(bound.Spec.NodeName)
	return bound.Spec.NodeName, nil
}

func (h *judgingHandle) Begin() simhandle.Transaction { return h.evictor.p.begin() }

func (h *judgingHandle) Skip(pod *v1.Pod, why, detail string) {
	h.evictor.p.skip(h.evictor.profile, h.evictor.strategy, pod, why, detail)
}

func (h *judgingHandle) MustStay(pod *v1.Pod) (why, detail string) { return h.evictor.p.mustStay(pod) }

func (h *judgingHandle) PinnedBy(node string, evictable func(*v1.Pod) bool) (*v1.Pod, string, string) {
	return h.evictor.p.pinnedBy(node, evictable)
}

// Warn adds text to the plan's warnings, once.
func (h *judgingHandle) Warn(text string) {
	p := h.evictor.p
	if !slices.Contains(p.out.Warnings, text) {
		p.out.Warnings = append(p.out.Warnings, text)
	}
}

func (h *judgingHandle) LimitsForbid(node string, pods []*v1.Pod) (string, bool) {
	return h.evictor.p.limitsForbid(node, pods)
}

func (h *judgingHandle) Consider(node, outcome string) {
	p := h.evictor.p
	if p.considered == nil {
		p.considered = map[string]string{}
	}
	p.considered[node] = outcome
}

// consolidationOutcomes counts what became of the nodes Consolidation
// considered, in the final plan: a drain the replay dropped counts by the
// reason it was dropped.
func (p *planner) consolidationOutcomes() *plan.NodeOutcomes {
	if p.considered == nil {
		return nil
	}
	drained := sets.New[string]()
	for _, d := range p.out.Summary.Drains {
		drained.Insert(d.Node)
	}
	out := &plan.NodeOutcomes{Considered: len(p.considered)}
	for node, outcome := range p.considered {
		if outcome == plan.NodeEmptied && !drained.Has(node) {
			outcome = p.dropped[node]
			if outcome == "" {
				outcome = plan.ReasonTargetChanged
			}
		}
		switch outcome {
		case plan.NodeEmptied:
			out.Emptied++
		case plan.NodeKept:
			out.Kept++
		default:
			if out.Refused == nil {
				out.Refused = map[string]int{}
			}
			out.Refused[outcome]++
		}
	}
	return out
}

func (h *judgingHandle) Pin(pod *v1.Pod, why, detail string) {
	p := h.evictor.p
	if p.pinned == nil {
		p.pinned = map[string]plan.PinnedNode{}
	}
	if _, ok := p.pinned[pod.Spec.NodeName]; !ok {
		p.pinned[pod.Spec.NodeName] = plan.PinnedNode{Node: pod.Spec.NodeName, Pod: key(pod), Reason: why, Detail: detail}
	}
}
