package planner

import (
	"context"
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"

	"github.com/rebalancer-dev/rebalancer/pkg/hint"
	"github.com/rebalancer-dev/rebalancer/pkg/plan"
	"github.com/rebalancer-dev/rebalancer/pkg/simulator"
)

// hold checks the plan the way the cluster will carry it out. The planner
// decides one move at a time, each replacement placed before the next pod
// goes; the executor evicts them back to back, so the replacements are
// pending together and the schedulers place them in queue order (priority,
// then arrival), with the pods already pending among them. hold replays the
// plan like that on the cluster as it was and keeps only the moves that
// still hold: a steered or certain move's replacement lands on its target,
// another's leaves its source. A drain with a move that fails is dropped
// whole. It repeats until every move holds, and returns the nodes' usage
// after the replay of the final plan: the plan's "after".
func (p *planner) hold(ctx context.Context) ([]simulator.NodeUsage, error) {
	for {
		fork := p.sim.Fork()
		evictions := make([]simulator.Eviction, len(p.applied))
		for i, a := range p.applied {
			m := p.out.Moves[i]
			evictions[i] = simulator.Eviction{Pod: a.obj, Hint: &hint.Hint{Source: m.Source, Target: m.Target, PlanID: p.out.ID}}
			if metav1.GetControllerOf(a.obj) != nil {
				evictions[i].Replacement = simulator.NewReplacement(a.obj, a.obj.Name, a.replacement, time.Time{})
			}
		}
		landed, err := p.sim.Replay(ctx, evictions, nil)
		var after []simulator.NodeUsage
		if err == nil {
			after, err = p.sim.Usage()
		}
		if rerr := p.sim.Revert(fork); rerr != nil && err == nil {
			err = rerr
		}
		if err != nil {
			return nil, fmt.Errorf("replaying the plan: %w", err)
		}

		failed := map[int]string{} // move index -> why
		drains := sets.New[string]()
		for i, a := range p.applied {
			m := p.out.Moves[i]
			if evictions[i].Replacement == nil {
				continue // nobody recreates it: there is no placement to check
			}
			switch {
			case landed[i] == "":
				failed[i] = "with the plan's replacements pending together, no node is left for it"
			case a.anywhere && landed[i] == m.Source:
				failed[i] = fmt.Sprintf("with the plan's replacements pending together, scheduler %q puts it back on %s", m.Scheduler, m.Source)
			case !a.anywhere && landed[i] != m.Target:
				failed[i] = fmt.Sprintf("with the plan's replacements pending together, scheduler %q puts it on %s, not %s", m.Scheduler, landed[i], m.Target)
			default:
				continue
			}
			if m.Drain {
				drains.Insert(m.Source)
			}
		}
		if len(failed) == 0 {
			return after, nil
		}
		for i, m := range p.out.Moves {
			if _, ok := failed[i]; !ok && m.Drain && drains.Has(m.Source) {
				failed[i] = fmt.Sprintf("the drain of %s fails: another of its pods does not land as planned", m.Source)
			}
		}
		p.drop(failed)
	}
}

// drop takes failed moves out of the plan and records why as skips. The
// budgets and limits they spent are not given back: the plan is final.
func (p *planner) drop(failed map[int]string) {
	keep := 0
	for i, m := range p.out.Moves {
		why, ok := failed[i]
		if !ok {
			p.out.Moves[keep], p.applied[keep] = m, p.applied[i]
			keep++
			continue
		}
		reason := plan.ReasonTargetChanged
		if p.applied[i].anywhere {
			reason = plan.ReasonUnsteered
		}
		p.out.Skipped = append(p.out.Skipped, plan.Skip{Pod: m.Pod, UID: m.UID, Profile: m.Profile, Strategy: m.Strategy,
			Scheduler: m.Scheduler, Why: reason, Detail: why})
		p.logger.V(2).Info("Move dropped from the plan", "pod", m.Pod, "strategy", m.Strategy, "why", why)
		p.moved.Delete(types.UID(m.UID))
	}
	p.out.Moves, p.applied = p.out.Moves[:keep], p.applied[:keep]
}
