package planner

import (
	v1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/rebalancer-dev/rebalancer/pkg/disruption"
	"github.com/rebalancer-dev/rebalancer/pkg/simulator"
)

// applied is one move of the plan as the planner's bookkeeping counts it.
type applied struct {
	obj              *v1.Pod
	pod, replacement types.UID
	node, namespace  string
	target           string
	podName          string
	owner            types.UID                     // "" for a pod without a controller
	pdb              *policyv1.PodDisruptionBudget // what the eviction spends; nil: none
	drain            bool                          // the move empties its source (plan.Move.Drain)
}

// count adds a move to the limits and budgets it spends (delta 1) or takes
// it back out (delta -1).
func (p *planner) count(a applied, delta int) {
	p.version++ // a move entered or left the plan
	if delta > 0 {
		p.moved.Insert(a.pod)
		p.replacements.Insert(a.replacement)
	} else {
		p.moved.Delete(a.pod)
		p.replacements.Delete(a.replacement)
	}
	p.total = uint(int(p.total) + delta)
	p.sources[a.node] += delta
	p.targets[a.target] += delta
	if a.drain {
		p.drained[a.node] += delta
		if p.drained[a.node] > 0 {
			p.drainedNodes.Insert(a.node)
		} else {
			p.drainedNodes.Delete(a.node)
		}
	}
	p.perNode[a.node] = uint(int(p.perNode[a.node]) + delta)
	p.perNamespace[a.namespace] = uint(int(p.perNamespace[a.namespace]) + delta)
	if a.owner != "" {
		p.perOwner[a.owner] += delta
	}
	if a.pdb != nil {
		p.spent++ // gangMustStay's memo is stale
	}
	if delta > 0 {
		disruption.Spend(a.pdb, a.podName)
	} else {
		disruption.Refund(a.pdb, a.podName)
	}
}

// transaction is a group of moves that enter the plan together or not at
// all: a fork of the simulation plus the bookkeeping of the moves made in
// it. Transactions nest. Skips stay on rollback: they say why it failed.
type transaction struct {
	p     *planner
	fork  simulator.Fork
	moves int // len(p.applied) when it began
}

func (p *planner) begin() *transaction {
	return &transaction{p: p, fork: p.sim.Fork(), moves: len(p.applied)}
}

// Commit keeps the moves.
func (tx *transaction) Commit() { tx.p.sim.Commit(tx.fork) }

// Rollback takes the moves back, newest first.
func (tx *transaction) Rollback() error {
	p := tx.p
	if err := p.sim.Revert(tx.fork); err != nil {
		return err
	}
	for i := len(p.applied) - 1; i >= tx.moves; i-- {
		p.count(p.applied[i], -1)
	}
	p.applied = p.applied[:tx.moves]
	p.out.Moves = p.out.Moves[:tx.moves] // one move each
	return nil
}
