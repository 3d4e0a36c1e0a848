package planner

import (
	"fmt"

	"github.com/rebalancer-dev/rebalancer/pkg/plan"
	"github.com/rebalancer-dev/rebalancer/pkg/simulator"
)

// intent is what a move is for, which decides what its replacement's
// placement must give it.
type intent struct {
	// balance: a balance plugin's move, which must gain the minimum score
	// over its source.
	balance bool
	// drain: the pod must leave its node, which the plan empties; where it
	// lands matters only in that it is a node the plan keeps in use.
	drain bool
	// planned is the move as planned when it is checked again (nil while
	// planning): it must still hold as the plan made it, steered to its
	// target or surely placed there.
	planned *plan.Move
	// replayed: planned is checked in the plan's replay, all replacements
	// pending together. A replacement left to its scheduler that surely
	// lands on another node the plan keeps in use holds there instead.
	replayed bool
	// room names the pending pod a move makes room for (MakeRoom), while
	// planning: the move must be steered, as left to its scheduler the
	// replacement could take the room back before the pending pod, which
	// waits in its backoff.
	room string
}

// again is the reason a move checked again is refused for. Rechecked, a
// replacement that would go back to its node or no longer surely to its
// target goes elsewhere than planned: target-changed. In the plan's
// replay every refusal is the move not landing as planned: target-changed,
// or unsteered for a move left anywhere (changed).
func (in intent) again(reason string) string {
	switch {
	case in.planned == nil:
		return reason
	case in.replayed:
		return changed(in.planned)
	case reason == plan.ReasonSameNode, reason == plan.ReasonUnsteered:
		return plan.ReasonTargetChanged
	}
	return reason
}

// changed is why the plan's replay drops a move that does not land as
// planned, or goes with one that does not: unsteered for a move left
// anywhere to its scheduler, else target-changed.
func changed(m *plan.Move) string {
	if m.Anywhere {
		return plan.ReasonUnsteered
	}
	return plan.ReasonTargetChanged
}

// verdict is the decision on a move: accepted when reason is "", with the
// kind of move it is; else one of plan's reasons and a detail.
type verdict struct {
	reason, detail string
	// steered: the replacement follows a hint to the target. anywhere:
	// its scheduler chooses, and the move holds wherever it lands.
	steered, anywhere bool
	// candidates counts the nodes a drain's replacement left to its
	// scheduler may land on, when it is not certain of one.
	candidates int
	// retarget: in the plan's replay, the replacement surely lands on
	// another node than planned, which the move keeps as its target.
	retarget bool
}

// decide is the one rule that accepts a move, from the prediction of where
// its replacement goes (made with the drained nodes tainted and, for a
// planned steered move, every node but its target excluded), while
// planning, in the plan's replay (where the replacement landed, see
// landing) and before each eviction. stray says which nodes a drain's
// replacement must not land on (emptied by the plan, or not in use); nil
// when nothing is known of them, and then no drain is left to its
// scheduler's choice. A move checked again is refused with the reason
// again gives.
func decide(pred simulator.Prediction, in intent, stray func(string) bool, minGain int64) verdict {
	refuse := func(reason, format string, args ...any) verdict {
		return verdict{reason: in.again(reason), detail: fmt.Sprintf(format, args...)}
	}
	m := in.planned
	switch {
	case pred.Node == "" && m == nil:
		return verdict{reason: plan.ReasonNoFit, detail: pred.Unschedulable}
	case m != nil && pred.Node == "" && pred.Unschedulable != "":
		return refuse(plan.ReasonNoFit, "%s no longer fits it (%s)", m.Target, pred.Unschedulable)
	case m != nil && m.Steered && pred.Node != m.Target, m != nil && pred.Node == "":
		return refuse(plan.ReasonNoFit, "%s no longer fits it", m.Target)
	case pred.Node == pred.Source:
		return refuse(plan.ReasonSameNode, "the scheduler profile would place the replacement back on %s (score %d)", pred.Source, pred.Score)
	// A drain's gain is the node it empties, not each pod's score: a pod
	// may land on a node that scores less than the one being emptied.
	case in.balance && !in.drain && pred.SourceFeasible && pred.Score-pred.SourceScore < minGain:
		return refuse(plan.ReasonLowGain, "%s scores %d, only %d above %s (minimum gain %d)",
			pred.Node, pred.Score, pred.Score-pred.SourceScore, pred.Source, minGain)
	}
	// A steered move goes where the hint says. Otherwise the scheduler
	// chooses, and the move holds only whatever the choice: the scheduler
	// surely picks this node, or the gain is leaving a node the replacement
	// cannot return to (a deschedule plugin's violation), wherever it lands.
	v := verdict{steered: pred.Steered && pred.Exhaustive}
	v.anywhere = !v.steered && !pred.Certain
	unsteered := func(and string) verdict {
		why := "would not surely choose that node (its best nodes tie, or its best is a node the plan empties or rules out)"
		if !pred.Exhaustive {
			why = "scores only a sample of the nodes (percentageOfNodesToScore)"
		}
		return refuse(plan.ReasonUnsteered, "scheduler %q does not follow rebalance hints and %s%s, so it may not place the replacement on %s", pred.Scheduler, why, and, pred.Node)
	}
	// A drain need not know where each replacement lands, only that
	// wherever its scheduler may put it is a node the plan keeps in use.
	leftToScheduler := in.drain && !pred.Steered && stray != nil
	if leftToScheduler {
		if where := strayLanding(pred, stray); where != "" {
			return unsteered(", and " + where)
		}
		if v.anywhere {
			v.candidates = len(pred.Candidates)
		}
	}
	if v.anywhere && !leftToScheduler && (in.balance || in.drain || pred.SourceFeasible) {
		return unsteered("")
	}
	if in.room != "" && !v.steered {
		return refuse(plan.ReasonUnsteered, "scheduler %q does not follow rebalance hints: the replacement could take back the room made on %s for %s", pred.Scheduler, pred.Source, in.room)
	}
	if m == nil {
		return v
	}
	// Checked again, the move must still be the one planned.
	exact := !m.Steered && !m.Anywhere && !m.Drain
	switch {
	case m.Steered && !v.steered:
		return refuse(plan.ReasonUnsteered, "scheduler %q no longer scores every node, so the hint may not bring the replacement to %s", pred.Scheduler, m.Target)
	case exact && in.replayed && pred.Certain && pred.Node != m.Target && stray != nil && !stray(pred.Node):
		v.retarget = true
	case exact && in.replayed && pred.Certain && pred.Node != m.Target:
		return refuse(plan.ReasonTargetChanged, "scheduler %q surely puts it on %s, a node the plan empties or that was empty", pred.Scheduler, pred.Node)
	case exact && (pred.Node != m.Target || !pred.Certain):
		return refuse(plan.ReasonTargetChanged, "scheduler %q would no longer surely place the replacement on %s (now %s)", pred.Scheduler, m.Target, pred.Node)
	}
	return v
}

// landing is the prediction a move's replacement that landed at l in the
// plan's replay amounts to, for decide.
func landing(m *plan.Move, l simulator.Landing) simulator.Prediction {
	return simulator.Prediction{
		Source: m.Source, Scheduler: m.Scheduler, Steered: m.Steered, Node: l.Node, Score: l.Score,
		Certain: l.Certain, Candidates: l.Candidates, Exhaustive: m.Steered || l.Certain,
	}
}
