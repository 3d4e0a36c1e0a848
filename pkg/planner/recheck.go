package planner

import (
	"context"
	"errors"
	"fmt"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/klog/v2"
	"sigs.k8s.io/descheduler/pkg/api"

	"github.com/rebalancer-dev/rebalancer/pkg/hint"
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
	balance sets.Set[string] // the policy's balance plugins
	// sources are the nodes the plan moves pods off; drained those it
	// empties, which the executor taints before its first eviction.
	sources, drained sets.Set[string]
}

// NewRecheck rechecks the moves of p on sim, a simulation of a fresh view
// of the cluster, with the policy p was made with and its --min-score-gain.
func NewRecheck(sim *simulator.Simulator, policy *api.DeschedulerPolicy, p *plan.Plan, minScoreGain int64) *Recheck {
	balance := sets.New[string]()
	for _, prof := range policy.Profiles {
		balance.Insert(prof.Plugins.Balance.Enabled...)
	}
	sources, drained := sets.New[string](), sets.New[string]()
	for _, m := range p.Moves {
		sources.Insert(m.Source)
		if m.Drain {
			drained.Insert(m.Source)
		}
	}
	return &Recheck{sim: sim, minGain: minScoreGain, balance: balance, sources: sources, drained: drained}
}

// stray says whether a replacement left to its scheduler's choice must not
// land on node: one the plan empties, or one not in use.
func (r *Recheck) stray(node string) bool {
	ni, err := r.sim.Node(node)
	return r.sources.Has(node) || err != nil || !simulator.InUse(ni)
}

// Move rechecks one move of the live pod (which the caller found on the
// move's source): its target must still fit; a steered move's target must
// be where the hint sends it, an unsteered one's must still be its
// scheduler's sure choice (or, for a move that holds anywhere, the pod must
// still be unable to return to its source; for an unsteered drain, every
// node its scheduler may choose must still be in use and kept); and a
// balance move must still gain at least the minimum score. An opt-out, or for a balance move a
// sticky annotation, set since the plan keeps the pod. It returns false and
// a plan reason (opt-out, sticky, no-fit, target-changed, low-gain) with a
// detail otherwise. It matches
// executor.Options.Validate.
func (r *Recheck) Move(ctx context.Context, m plan.Move, pod *v1.Pod) (ok bool, reason, detail string) {
	// An opt-out set since the plan holds.
	if why := optedOut(r.sim, pod, m.Source); why != "" {
		return false, plan.ReasonOptOut, why
	}
	// So does a pod made sticky since, against a balance plugin's move.
	if r.balance.Has(m.Strategy) && hint.IsSticky(pod) {
		return false, plan.ReasonSticky, fmt.Sprintf("the pod is now annotated %s=true: it stays on %s unless a deschedule plugin finds it misplaced", hint.StickyAnnotation, m.Source)
	}
	opts := simulator.Options{LeaveSource: m.Drain, Drained: r.drained}
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
	case pred.Node == "" || m.Steered && pred.Node != m.Target:
		why := pred.Unschedulable
		if why == "" {
			why = fmt.Sprintf("%s no longer fits it", m.Target)
		}
		return false, plan.ReasonNoFit, why
	case pred.Node == pred.Source:
		return false, plan.ReasonTargetChanged, fmt.Sprintf("scheduler %q would now place the replacement back on %s", pred.Scheduler, pred.Source)
	case m.Drain && !m.Steered && strayLanding(pred, r.stray) != "":
		return false, plan.ReasonTargetChanged, fmt.Sprintf("scheduler %q would now place the replacement on a node the plan cannot have it on: %s", pred.Scheduler, strayLanding(pred, r.stray))
	case m.Drain && !m.Steered:
		// An unsteered drain holds wherever the replacement lands, among
		// nodes the plan keeps in use.
	case m.Anywhere && pred.SourceFeasible:
		return false, plan.ReasonTargetChanged, fmt.Sprintf("the replacement could now return to %s", pred.Source)
	case !m.Steered && !m.Anywhere && (pred.Node != m.Target || !pred.Certain):
		return false, plan.ReasonTargetChanged, fmt.Sprintf("scheduler %q would no longer surely place the replacement on %s (now %s)", pred.Scheduler, m.Target, pred.Node)
	case r.balance.Has(m.Strategy) && !m.Drain && pred.SourceFeasible && pred.Score-pred.SourceScore < r.minGain:
		return false, plan.ReasonLowGain, fmt.Sprintf("%s now scores %d, only %d above %s (minimum gain %d)", pred.Node, pred.Score, pred.Score-pred.SourceScore, pred.Source, r.minGain)
	}
	if _, err := r.sim.Move(pod, pred.Node); err != nil {
		klog.FromContext(ctx).Error(err, "Could not apply a rechecked move to the simulation", "pod", klog.KObj(pod))
	}
	return true, "", ""
}
