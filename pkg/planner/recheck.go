package planner

import (
	"context"
	"errors"
	"fmt"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/klog/v2"

	"github.com/rebalancer-dev/rebalancer/pkg/gang"
	"github.com/rebalancer-dev/rebalancer/pkg/plan"
	"github.com/rebalancer-dev/rebalancer/pkg/simulator"
)

// Recheck judges a plan's moves again just before they are carried out, on
// a simulation of the cluster as it is then (a view taken after the plan),
// so that a plan made on a view that has changed since is not carried out
// blindly. Each accepted move is applied to the simulation, so later moves
// are judged with the earlier ones made, as they will be in the cluster.
type Recheck struct {
	sim     *simulator.Simulator
	minGain int64
	// sources are the nodes the plan moves pods off; drained those it
	// empties, which the executor taints before its first eviction.
	sources, drained sets.Set[string]
	// waiting are the pending pods ("namespace/name") of the fresh view,
	// read once: a room's moves go only while its pod still waits.
	waiting sets.Set[string]
}

// NewRecheck rechecks the moves of p on sim, a simulation of a fresh view
// of the cluster, with the --min-score-gain p was made with. sim is the
// recheck's own: it holds p's held nodes from now on.
func NewRecheck(sim *simulator.Simulator, p *plan.Plan, minScoreGain int64) *Recheck {
	sources, drained := sets.New[string](), sets.New[string]()
	for _, m := range p.Moves {
		sources.Insert(m.Source)
		if m.Drain {
			drained.Insert(m.Source)
		}
	}
	// The nodes the plan holds empty carry the drain taint, as its drained
	// nodes do, for the whole cycle.
	sim.Hold(sets.New(p.HeldEmpty...))
	return &Recheck{sim: sim, minGain: minScoreGain, sources: sources, drained: drained}
}

// stray says whether a replacement left to its scheduler's choice must not
// land on node: one the plan empties, or one not in use.
func (r *Recheck) stray(node string) bool {
	ni, err := r.sim.Node(node)
	return r.sources.Has(node) || err != nil || !simulator.InUse(ni)
}

// Validate rechecks one move of the live pod (which the caller found on the
// move's source) by the rule that planned it (decide), on the cluster as it
// is now: a steered move's target must still pass the filters, an
// unsteered one must still be its scheduler's sure choice, a drain's
// replacement must still land only on nodes the plan keeps in use, a
// balance move must still gain the minimum score. An opt-out, or for a
// balance move a sticky annotation, set since the plan keeps the pod. It
// returns false and a plan reason (opt-out, sticky, no-fit, target-changed
// for a replacement that would now go elsewhere, low-gain) with a detail
// otherwise. It matches executor.Validate.
func (r *Recheck) Validate(ctx context.Context, m plan.Move, pod *v1.Pod) (ok bool, reason, detail string) {
	// An eviction its owner began since in the background, an opt-out set
	// since, a gang the pod joined since, and against a balance plugin's
	// move a sticky annotation set since: it stays. A gang's member moves
	// with the gang it was planned with.
	if why, detail := stays(r.sim, pod, m.Source, m.Balance); why != "" && (why != plan.ReasonGang || m.Gang == "" || gang.Name(pod) != m.Gang) {
		return false, why, detail
	}
	// A room made for a pod that no longer waits (placed, or gone) would
	// only move pods.
	if m.Room != "" {
		if r.waiting == nil {
			r.waiting = sets.New[string]()
			for _, p := range r.sim.Pending() {
				r.waiting.Insert(key(p))
			}
		}
		if !r.waiting.Has(m.Room) {
			return false, plan.ReasonNoRoom, fmt.Sprintf("%s, which the move makes room for, no longer waits for a node", m.Room)
		}
	}
	opts := simulator.PredictOptions{LeaveSource: m.Drain || m.Gang != "" || m.Room != "", Drained: r.drained}
	if m.Steered {
		// The hint sends the replacement to the target whenever the target
		// passes the filters.
		opts.Exclude = func(n string) bool { return n != m.Target }
	}
	pred, err := r.sim.Predict(ctx, pod, opts)
	switch {
	case errors.Is(err, simulator.ErrUnknownScheduler):
		return false, plan.ReasonUnknownScheduler, err.Error()
	case err != nil:
		return false, plan.ReasonTargetChanged, fmt.Sprintf("cannot simulate the move again: %v", err)
	}
	if v := decide(pred, intent{balance: m.Balance, drain: m.Drain, planned: &m}, r.stray, r.minGain); v.reason != "" {
		return false, v.reason, v.detail
	}
	if _, err := r.sim.Relocate(ctx, pod, pred.Node); err != nil {
		klog.FromContext(ctx).Error(err, "Could not apply a rechecked move to the simulation", "pod", klog.KObj(pod))
	}
	return true, "", ""
}
