package planner

import (
	"slices"

	"k8s.io/apimachinery/pkg/util/sets"

	"github.com/rebalancer-dev/rebalancer/pkg/plan"
	"github.com/rebalancer-dev/rebalancer/pkg/simulator"
)

// holdEmpty, with Options.HoldEmptyNodes, keeps every replacement the plan
// counts on off the nodes of before that run no workload and accept new
// pods, as the executor will keep them with the drain taint for the plan's
// cycle. A scheduler that scores only a sample of the nodes, or scores a
// small empty node above a fuller one, may put a replacement on any of
// them: held, they are not among its choices, and a drain left to its
// choice can be certain. It returns the nodes held.
func (p *planner) holdEmpty(before []simulator.NodeUsage) (sets.Set[string], error) {
	if !p.opts.HoldEmptyNodes {
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

// publishHeld names the held nodes in the plan when a move counts on them:
// one left to a scheduler that does not follow hints. A steered
// replacement goes to its target whatever the other nodes are, so a plan
// of steered moves alone holds nothing and costs no node writes.
func (p *planner) publishHeld(held sets.Set[string]) {
	if len(held) > 0 && slices.ContainsFunc(p.out.Moves, func(m plan.Move) bool { return !m.Steered }) {
		p.out.HeldEmpty = sets.List(held)
	}
}
