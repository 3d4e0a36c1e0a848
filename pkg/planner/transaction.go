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
	p     *planner
	start savepoint
	undo  []undoMove
}

type undoMove struct {
	original, replacement *v1.Pod
}

// savepoint is the planner's bookkeeping at one point of a transaction.
type savepoint struct {
	moves        int
	total        uint
	perNode      map[string]uint
	perNamespace map[string]uint
	perOwner     map[types.UID]int
	budgets      []int32
	undo         int // moves of the transaction made before it
}

func (p *planner) begin() *transaction {
	if p.tx != nil {
		panic("planner: nested transactions are not supported")
	}
	tx := &transaction{p: p}
	tx.start = tx.save()
	p.tx = tx
	return tx
}

func (tx *transaction) save() savepoint {
	p := tx.p
	sp := savepoint{
		moves:        len(p.out.Moves),
		total:        p.total,
		perNode:      maps.Clone(p.perNode),
		perNamespace: maps.Clone(p.perNamespace),
		perOwner:     maps.Clone(p.perOwner),
		undo:         len(tx.undo),
	}
	for _, b := range p.pdbs {
		sp.budgets = append(sp.budgets, b.left)
	}
	return sp
}

// restore takes back the moves made since sp, newest first.
func (tx *transaction) restore(sp savepoint) error {
	p := tx.p
	for i := len(tx.undo) - 1; i >= sp.undo; i-- {
		u := tx.undo[i]
		if err := p.sim.Revert(u.original, u.replacement); err != nil {
			return err
		}
		p.moved.Delete(u.original.UID)
		p.replacements.Delete(u.replacement.UID)
	}
	tx.undo = tx.undo[:sp.undo]
	p.out.Moves = p.out.Moves[:sp.moves]
	p.total, p.perNode, p.perNamespace, p.perOwner = sp.total, maps.Clone(sp.perNode), maps.Clone(sp.perNamespace), maps.Clone(sp.perOwner)
	for i, b := range p.pdbs {
		b.left = sp.budgets[i]
	}
	return nil
}

// Savepoint marks the moves made so far; the function it returns takes back
// the moves made after, and the transaction goes on.
func (tx *transaction) Savepoint() func() error {
	sp := tx.save()
	return func() error { return tx.restore(sp) }
}

// Commit keeps the moves.
func (tx *transaction) Commit() { tx.p.tx = nil }

// Rollback takes all the moves back.
func (tx *transaction) Rollback() error {
	tx.p.tx = nil
	return tx.restore(tx.start)
}
