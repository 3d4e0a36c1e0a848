package planner

import (
	"fmt"
	"strings"
	"testing"

	"github.com/rebalancer-dev/rebalancer/pkg/plan"
	"github.com/rebalancer-dev/rebalancer/pkg/simulator"
)

// TestDecide: the one rule that accepts a move, over every reason it gives
// and every kind of move it accepts, while planning and when a planned move
// is checked again.
func TestDecide(t *testing.T) {
	emptied := func(n string) bool { return n == "drained" || n == "empty" }
	certain := func(node string) simulator.Prediction {
		return simulator.Prediction{Source: "src", Scheduler: "s", Node: node, Score: 80, Exhaustive: true, Certain: true}
	}
	tied := func(candidates ...string) simulator.Prediction {
		p := certain(candidates[0])
		p.Certain, p.Candidates = false, candidates
		return p
	}
	steered := simulator.Prediction{Source: "src", Scheduler: "s", Node: "t", Score: 80, Exhaustive: true, Steered: true}
	with := func(p simulator.Prediction, f func(*simulator.Prediction)) simulator.Prediction { f(&p); return p }
	exact := &plan.Move{Source: "src", Target: "t"}
	hinted := &plan.Move{Source: "src", Target: "t", Steered: true}
	for _, c := range []struct {
		name   string
		pred   simulator.Prediction
		in     intent
		stray  func(string) bool
		reason string // "" accepted
		kind   string // accepted: steered, anywhere, exact; with candidates N for a drain left to its scheduler
		detail string // in the reason's detail
	}{
		{"nothing fits", simulator.Prediction{Source: "src", Unschedulable: "0/3 nodes are available"}, intent{}, nil, plan.ReasonNoFit, "", "0/3 nodes"},
		{"back on its node", certain("src"), intent{}, nil, plan.ReasonSameNode, "", "back on src"},
		{"balance gains too little", with(certain("t"), func(p *simulator.Prediction) { p.SourceFeasible, p.SourceScore = true, 80 }), intent{balance: true}, nil, plan.ReasonLowGain, "", "minimum gain 1"},
		{"a drain's gain is its node", with(certain("t"), func(p *simulator.Prediction) { p.SourceFeasible, p.SourceScore = true, 90 }), intent{balance: true, drain: true}, emptied, "", "exact", ""},
		{"steered", steered, intent{balance: true}, nil, "", "steered", ""},
		{"steered scheduler that samples", with(steered, func(p *simulator.Prediction) { p.Exhaustive = false }), intent{balance: true}, nil, plan.ReasonUnsteered, "", "sample of the nodes"},
		{"unsteered, sure", certain("t"), intent{balance: true}, nil, "", "exact", ""},
		{"unsteered balance, tie", tied("t", "u"), intent{balance: true}, nil, plan.ReasonUnsteered, "", "would not surely choose"},
		{"unsteered violation, cannot return", tied("t", "u"), intent{}, nil, "", "anywhere", ""},
		{"unsteered violation, could return", with(tied("t", "u"), func(p *simulator.Prediction) { p.SourceFeasible = true }), intent{}, nil, plan.ReasonUnsteered, "", "may not place"},
		{"unsteered drain onto kept nodes", tied("t", "u", "v"), intent{drain: true}, emptied, "", "candidates 3", ""},
		{"unsteered drain that may land on an empty node", tied("t", "empty"), intent{drain: true}, emptied, plan.ReasonUnsteered, "", "empty, emptied, or ruled out"},
		{"room, steered", steered, intent{room: "ns/pending"}, nil, "", "steered", ""},
		{"room, unsteered though sure", certain("t"), intent{room: "ns/pending"}, nil, plan.ReasonUnsteered, "", "take back the room made on src for ns/pending"},
		{"unsteered drain, its landings unknown", tied("t", "u"), intent{drain: true}, nil, plan.ReasonUnsteered, "", "would not surely choose"},
		{"rechecked: unsteered drain now sure of a drained node", certain("drained"), intent{drain: true, planned: &plan.Move{Source: "src", Drain: true, Anywhere: true}}, emptied, plan.ReasonTargetChanged, "", "drained"},
		{"rechecked: steered target full", with(steered, func(p *simulator.Prediction) { p.Node = ""; p.Unschedulable = "" }), intent{planned: hinted}, nil, plan.ReasonNoFit, "", "t no longer fits"},
		{"rechecked: steered target now another", with(steered, func(p *simulator.Prediction) { p.Node = "u" }), intent{planned: hinted}, nil, plan.ReasonNoFit, "", "t no longer fits"},
		{"rechecked: steered, scheduler now samples", with(steered, func(p *simulator.Prediction) { p.Exhaustive = false }), intent{planned: hinted}, nil, plan.ReasonTargetChanged, "", "no longer scores every node"},
		{"rechecked: now back on its node", certain("src"), intent{planned: exact}, nil, plan.ReasonTargetChanged, "", "back on src"},
		{"rechecked: balance now gains too little", with(certain("t"), func(p *simulator.Prediction) { p.SourceFeasible, p.SourceScore = true, 80 }), intent{balance: true, planned: &plan.Move{Source: "src", Target: "t", Balance: true}}, nil, plan.ReasonLowGain, "", "minimum gain 1"},
		{"rechecked: steered holds", steered, intent{planned: hinted}, nil, "", "steered", ""},
		{"rechecked: exact, now surely elsewhere", certain("u"), intent{planned: exact}, nil, plan.ReasonTargetChanged, "", "now u"},
		{"rechecked: exact, now a tie it cannot return from", tied("t", "u"), intent{planned: exact}, nil, plan.ReasonTargetChanged, "", "no longer surely"},
		{"rechecked: exact holds", certain("t"), intent{planned: exact}, nil, "", "exact", ""},
		{"replayed: exact lands on its target", certain("t"), intent{planned: exact, replayed: true}, emptied, "", "exact", ""},
		{"replayed: exact lands surely on another kept node", certain("u"), intent{planned: exact, replayed: true}, emptied, "", "retarget", ""},
		{"replayed: exact lands surely on a node the plan empties", certain("drained"), intent{planned: exact, replayed: true}, emptied, plan.ReasonTargetChanged, "", "plan empties or that was empty"},
		{"replayed: exact lands on its target by a tie", tied("t", "u"), intent{planned: exact, replayed: true}, emptied, plan.ReasonTargetChanged, "", "no longer surely"},
		{"replayed: balance lands on its target by a tie", tied("t", "u"), intent{balance: true, planned: &plan.Move{Source: "src", Target: "t", Balance: true}, replayed: true}, emptied, plan.ReasonTargetChanged, "", "would not surely choose"},
		{"replayed: steered lands elsewhere", with(steered, func(p *simulator.Prediction) { p.Node = "u" }), intent{planned: hinted, replayed: true}, emptied, plan.ReasonTargetChanged, "", "t no longer fits"},
		{"replayed: nothing left for it", with(certain(""), func(p *simulator.Prediction) { p.Certain = false }), intent{planned: exact, replayed: true}, emptied, plan.ReasonTargetChanged, "", "t no longer fits"},
		{"replayed: back on its node", certain("src"), intent{planned: exact, replayed: true}, emptied, plan.ReasonTargetChanged, "", "back on src"},
		{"replayed: violation left anywhere, back on its node", certain("src"), intent{planned: &plan.Move{Source: "src", Target: "t", Anywhere: true}, replayed: true}, emptied, plan.ReasonUnsteered, "", "back on src"},
		{"replayed: violation anywhere but its node", tied("u", "v"), intent{planned: &plan.Move{Source: "src", Target: "t", Anywhere: true}, replayed: true}, emptied, "", "anywhere", ""},
		{"replayed: unsteered drain among kept nodes", tied("u", "v"), intent{drain: true, planned: &plan.Move{Source: "src", Target: "t", Drain: true}, replayed: true}, emptied, "", "candidates 2", ""},
		{"replayed: unsteered drain that may stray", tied("u", "empty"), intent{drain: true, planned: &plan.Move{Source: "src", Target: "t", Drain: true}, replayed: true}, emptied, plan.ReasonTargetChanged, "", "empty"},
		{"replayed: unsteered drain left anywhere that may stray", tied("u", "empty"), intent{drain: true, planned: &plan.Move{Source: "src", Target: "t", Drain: true, Anywhere: true}, replayed: true}, emptied, plan.ReasonUnsteered, "", "empty"},
	} {
		t.Run(c.name, func(t *testing.T) {
			v := decide(c.pred, c.in, c.stray, 1)
			if v.reason != c.reason {
				t.Fatalf("reason %q (%s), want %q", v.reason, v.detail, c.reason)
			}
			if !strings.Contains(v.detail, c.detail) {
				t.Errorf("detail %q, want it to say %q", v.detail, c.detail)
			}
			if v.reason != "" {
				return
			}
			kind := "exact"
			switch {
			case v.retarget:
				kind = "retarget"
			case v.steered:
				kind = "steered"
			case v.candidates > 0:
				kind = fmt.Sprintf("candidates %d", v.candidates)
			case v.anywhere:
				kind = "anywhere"
			}
			if kind != c.kind {
				t.Errorf("accepted as %s, want %s", kind, c.kind)
			}
		})
	}
}
