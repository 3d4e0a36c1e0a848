package consolidation

import (
	"context"
	"errors"

	v1 "k8s.io/api/core/v1"
	"sigs.k8s.io/descheduler/pkg/descheduler/evictions"

	"github.com/rebalancer-dev/rebalancer/pkg/plan"
	"github.com/rebalancer-dev/rebalancer/pkg/requests"
	"github.com/rebalancer-dev/rebalancer/pkg/simhandle"
	"github.com/rebalancer-dev/rebalancer/pkg/simulator"
)

// emptyOneByOne empties the candidates one at a time onto the nodes in use
// that stay, until maxNodesPerCycle or the plan's total limit.
func (r *round) emptyOneByOne(ctx context.Context) error {
	c := r.c
	for _, cand := range r.candidates {
		if r.emptied >= int(c.args.MaxNodesPerCycle) {
			return nil
		}
		name := cand.node.Name
		if r.pinned[name] {
			continue
		}
		if !r.affordable(cand, r.logger) {
			r.tried[name] = true
			c.sim.Consider(name, plan.ReasonCost)
			continue
		}
		movable, _, ok := c.movablePods(name)
		if !ok {
			if !r.pk.keep[name] {
				r.tried[name] = true
				c.sim.Consider(name, plan.ReasonTarget) // it took pods from a node emptied before it
			}
			continue
		}
		if detail, perNode := c.sim.LimitsForbid(name, movable); detail != "" {
			// Asked, the moves would be simulated one by one up to the
			// limit, then taken back: on a fleet of nodes all above it,
			// that is most of the plan's time, for nothing.
			r.tried[name] = true
			c.sim.Consider(name, plan.ReasonLimit)
			c.sim.Skip(movable[0], plan.ReasonLimit, detail)
			if perNode && (r.overLimit.pods == 0 || len(movable) < r.overLimit.pods) {
				r.overLimit.pods, r.overLimit.detail = len(movable), detail
			}
			continue
		}
		ok, why, err := c.empty(ctx, name, movable, func(target string, pod *v1.Pod) bool {
			return !r.allowed[target] || !r.inUse[target] || target == name || c.overCeiling(target, pod)
		}, r.pk)
		if err != nil {
			return planFull(err)
		}
		r.tried[name] = true
		c.sim.Consider(name, why)
		if ok {
			r.emptied++
			r.inUse[name] = false // nothing may move onto a node being emptied
			r.logger.V(2).Info("Node consolidated", "node", name, "pods", len(movable))
		}
	}
	return nil
}

// planFull is nil for the error of a plan that holds all the evictions the
// policy allows (the plugin stops there), err otherwise.
func planFull(err error) error {
	var total *evictions.EvictionTotalLimitError
	if errors.As(err, &total) {
		return nil
	}
	return err
}

// pinnedBy returns the first pod that keeps node in use whatever the plan
// does, and why: one the evictor's filters protect, or one the planner
// would not move (opted out, sticky, in its cooldown, held by a PDB).
func (c *Consolidation) pinnedBy(node string) (*v1.Pod, string, string) {
	ev := c.handle.Evictor()
	return c.sim.PinnedBy(node, func(p *v1.Pod) bool { return ev.Filter(p) && ev.PreEvictionFilter(p) })
}

// movablePods lists the pods that must leave a node to empty it, biggest
// first, or returns the first pod that may not move. ok is false when the
// node received pods moved earlier in this plan: those cannot move again,
// so the node cannot be emptied.
func (c *Consolidation) movablePods(node string) (movable []*v1.Pod, blocker *v1.Pod, ok bool) {
	pods, _ := c.handle.GetPodsAssignedToNodeFunc()(node, nil) // the node is in the simulation: no error
	ev := c.handle.Evictor()
	for _, p := range pods {
		if simulator.NodeBound(p) {
			continue
		}
		if !ev.Filter(p) || !ev.PreEvictionFilter(p) {
			return nil, p, true
		}
		movable = append(movable, p)
	}
	// The plugin lists the cluster as the plan found it; the simulation has
	// the plan's moves applied.
	n := 0
	if ni, err := c.sim.Cluster().Node(node); err == nil {
		n = simulator.Workload(ni)
	}
	if n != len(movable) {
		return nil, nil, false
	}
	requests.BiggestFirst(movable, requests.Of)
	return movable, nil, true
}

// empty moves every pod off node in one transaction, onto a node the
// packing left room on for pods of its shape, else onto a node it keeps,
// where one is allowed (simulator.PredictOptions.Prefer, PreferElse). It
// reports false, with the moves taken back, when one of them has no
// acceptable target, and why: the skip reason of that move
// (plan.NodeEmptied when it empties the node).
func (c *Consolidation) empty(ctx context.Context, node string, pods []*v1.Pod, exclude func(target string, pod *v1.Pod) bool, pk *packing) (ok bool, why string, err error) {
	tx := c.sim.Begin()
	type taken struct {
		node string
		s    shape
	}
	var took []taken
	for _, p := range pods {
		if !c.sim.Cluster().Runs(p) {
			continue // a gang's member, moved with an earlier pod's gang
		}
		s := pk.shapeOf(p)
		first, second := pk.prefer(s)
		opts := simulator.PredictOptions{
			LeaveSource: true,
			Exclude:     func(target string) bool { return exclude(target, p) },
			Prefer:      first,
			PreferElse:  second,
		}
		target, err := c.sim.PlanMove(ctx, p, opts, evictions.EvictOptions{StrategyName: Name, Reason: "emptying node " + node})
		if err == nil {
			if pk.take(target, s) {
				took = append(took, taken{target, s})
			}
			continue
		}
		if rbErr := tx.Rollback(); rbErr != nil {
			return false, "", rbErr
		}
		for _, t := range took {
			pk.giveBack(t.node, t.s)
		}
		var total *evictions.EvictionTotalLimitError
		if errors.As(err, &total) {
			return false, plan.ReasonLimit, err
		}
		return false, simhandle.Why(err), nil
	}
	tx.Commit()
	return true, plan.NodeEmptied, nil
}

// overCeiling says whether placing pod on node takes any counted resource
// above the ceiling.
func (c *Consolidation) overCeiling(node string, pod *v1.Pod) bool {
	if c.args.TargetUtilizationCeiling >= 100 {
		return false // the scheduler's own Fit filter decides
	}
	ni, err := c.sim.Cluster().Node(node)
	if err != nil {
		return true
	}
	req := requests.Of(pod)
	for _, r := range c.args.Resources {
		if fraction(ni, r, req)*100 > float64(c.args.TargetUtilizationCeiling) {
			return true
		}
	}
	return false
}
