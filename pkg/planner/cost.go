package planner

import (
	v1 "k8s.io/api/core/v1"
	"sigs.k8s.io/descheduler/pkg/api"
	"sigs.k8s.io/descheduler/pkg/framework/plugins/nodeutilization"

	"github.com/rebalancer-dev/rebalancer/pkg/disruption"
	"github.com/rebalancer-dev/rebalancer/pkg/plan"
	"github.com/rebalancer-dev/rebalancer/pkg/simhandle"
	"github.com/rebalancer-dev/rebalancer/pkg/simulator"
)

// drainCost is what emptying a node costs in the simulation as it stands
// (simulator.DrainCost); 0 for a node it does not know.
func (p *planner) drainCost(node string) float64 {
	ni, err := p.sim.Node(node)
	if err != nil {
		return 0
	}
	return simulator.DrainCost(ni)
}

// maxDrainCostPercent is the profile's limit on what emptying a node may
// cost: the first plugin args that set it (simhandle.DrainCostLimit,
// Consolidation's), which HighNodeUtilization in the same profile obeys as
// well (its own arguments are the descheduler's).
func maxDrainCostPercent(prof api.DeschedulerProfile) int32 {
	for _, pc := range prof.PluginConfigs {
		if a, ok := pc.Args.(simhandle.DrainCostLimit); ok {
			return a.MaxDrainCost()
		}
	}
	return 0
}

// drainBudget holds HighNodeUtilization, which empties the nodes it
// evicts from, to the profile's maxDrainCostPercent, as Consolidation
// holds itself: a node costing more than the budget allows keeps all its
// pods. The budget is measured on the plugin's nodes in use when it
// starts, each node's cost when its first eviction is asked.
type drainBudget struct {
	p      *planner
	budget disruption.DrainBudget
	// allowed is each source's verdict, given at its first eviction.
	allowed map[string]bool
}

// newDrainBudget is the budget of a plugin of the profile; nil when the
// plugin does not empty nodes or the profile sets no limit.
func newDrainBudget(p *planner, plugin string, prof api.DeschedulerProfile) *drainBudget {
	percent := maxDrainCostPercent(prof)
	if plugin != nodeutilization.HighNodeUtilizationPluginName || percent == 0 {
		return nil
	}
	return &drainBudget{p: p, budget: disruption.DrainBudget{Percent: percent}}
}

// begin measures the budget over the nodes the plugin is handed (the
// policy's nodeSelector applied), as Consolidation does over its own.
func (b *drainBudget) begin(nodes []*v1.Node) {
	var costs []float64
	for _, n := range nodes {
		if ni, err := b.p.sim.Node(n.Name); err == nil && simulator.InUse(ni) {
			costs = append(costs, simulator.DrainCost(ni))
		}
	}
	b.budget = disruption.NewDrainBudget(b.budget.Percent, costs)
	b.allowed = map[string]bool{}
}

// admit says whether an eviction off node is within budget; the first
// refusal of a node is recorded as a cost skip of its costliest pod.
func (b *drainBudget) admit(profile, strategy, node string) error {
	if ok, seen := b.allowed[node]; seen {
		if !ok {
			return errSkipped
		}
		return nil
	}
	cost := b.p.drainCost(node)
	ok := b.budget.Allows(cost)
	b.allowed[node] = ok
	if s := b.p.survey; s != nil {
		s.undo(func() { delete(b.allowed, node) }) // its skip is recorded in its turn
	}
	if ok {
		return nil
	}
	pods, err := b.p.podsOnNode(node, func(pod *v1.Pod) bool { return !simulator.NodeBound(pod) })
	if err != nil {
		return err
	}
	if pod := disruption.Costliest(pods); pod != nil {
		b.p.skip(profile, strategy, pod, plan.ReasonCost, b.budget.Refusal(node, cost))
	}
	return errSkipped
}
