package planner

import (
	"slices"

	"k8s.io/apimachinery/pkg/util/sets"

	"github.com/rebalancer-dev/rebalancer/pkg/conflict"
	"github.com/rebalancer-dev/rebalancer/pkg/plan"
	"github.com/rebalancer-dev/rebalancer/pkg/simulator"
)

// Hold says when a plan holds the nodes that are empty when it is made.
type Hold string

const (
	// HoldAuto (the default) holds them when the plan packs for schedulers
	// it cannot steer: the policy packs and no plugin of it spreads, and
	// every modelled scheduler that places pods of the cluster packs and
	// does not follow hints. Their replacements could go to any empty node;
	// a steered replacement goes to its target whatever the other nodes
	// are, so a plan with steered pods is never held by default.
	HoldAuto Hold = ""
	// HoldAlways holds them whenever the plan has a move left to a
	// scheduler that does not follow hints.
	HoldAlways Hold = "always"
	// HoldNever never holds them.
	HoldNever Hold = "never"
)

// holdEmpty keeps every replacement the plan counts on off the nodes of
// before that run no workload and accept new pods, as the executor will
// keep them with the drain taint for the plan's cycle, when the plan holds
// them (Options.HoldEmptyNodes). A scheduler that scores only a sample of
// the nodes, or scores a small empty node above a fuller one, may put a
// replacement on any of them: held, they are not among its choices, and a
// drain left to its choice can be certain. used are the schedulers that
// place pods of the cluster. It returns the nodes held.
func (p *planner) holdEmpty(before []simulator.NodeUsage, used map[string]bool) (sets.Set[string], error) {
	if p.holding = p.holds(used); !p.holding {
		return nil, nil
	}
	held := sets.New[string]()
	for _, u := range before {
		if u.InUse {
			continue
		}
		ni, err := p.sim.Node(u.Node)
		if err != nil {
			return nil, err
		}
		if !ni.Node().Spec.Unschedulable { // cordoned: kept off already
			held.Insert(u.Node)
		}
	}
	p.sim.Hold(held)
	return held, nil
}

// holds says whether the plan holds the empty nodes (see Hold).
func (p *planner) holds(used map[string]bool) bool {
	switch p.opts.HoldEmptyNodes {
	case HoldAlways:
		return true
	case HoldNever:
		return false
	}
	if !conflict.PolicyPacks(p.policy) {
		return false
	}
	unsteered := false
	for _, sc := range p.sim.Schedulers() {
		if !used[sc.Profile.SchedulerName] {
			continue
		}
		if sc.Steered || !conflict.ProfilePacks(sc.Profile, sc.ScoreWeights) {
			return false
		}
		unsteered = true
	}
	return unsteered
}

// publishHeld names the held nodes in the plan when a move counts on them:
// one left to a scheduler that does not follow hints. A steered
// replacement goes to its target whatever the other nodes are, so a plan
// of steered moves alone holds nothing and costs no node writes.
func (p *planner) publishHeld(held sets.Set[string]) {
	if len(held) > 0 && slices.ContainsFunc(p.out.Moves, func(m plan.Move) bool { return !m.Steered }) {
		p.out.HeldEmpty = sets.List(held)
	}
}
