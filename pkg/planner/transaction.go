package planner

import (
	"maps"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// transaction is a group of moves that enter the plan together or not at
// all: the state the moves change is saved at the start, and Rollback puts
// it back and reverts the simulation. Skips stay: they say why it failed.
type transaction struct {
	p            *planner
	moves        int
	total        uint
	perNode      map[string]uint
	perNamespace map[string]uint
	perOwner     map[types.UID]int
	budgets      []int32
	undo         []undoMove
}

type undoMove struct {
	original, replacement *v1.Pod
}

func (p *planner) begin() *transaction {
	if p.tx != nil {
		panic("planner: nested transactions are not supported")
	}
	tx := &transaction{
		p:            p,
		moves:        len(p.out.Moves),
		total:        p.total,
		perNode:      maps.Clone(p.perNode),
		perNamespace: maps.Clone(p.perNamespace),
		perOwner:     maps.Clone(p.perOwner),
	}
	for _, b := range p.pdbs {
		tx.budgets = append(tx.budgets, b.left)
	}
	p.tx = tx
	return tx
}

// Commit keeps the moves.
func (tx *transaction) Commit() { tx.p.tx = nil }

// Rollback takes the moves back, newest first.
func (tx *transaction) Rollback() error {
	p := tx.p
	p.tx = nil
	for i := len(tx.undo) - 1; i >= 0; i-- {
		u := tx.undo[i]
		if err := p.sim.Revert(u.original, u.replacement); err != nil {
			return err
		}
		p.moved.Delete(u.original.UID)
		p.replacements.Delete(u.replacement.UID)
	}
	p.out.Moves = p.out.Moves[:tx.moves]
	p.total, p.perNode, p.perNamespace, p.perOwner = tx.total, tx.perNode, tx.perNamespace, tx.perOwner
	for i, b := range p.pdbs {
		b.left = tx.budgets[i]
	}
	return nil
}
