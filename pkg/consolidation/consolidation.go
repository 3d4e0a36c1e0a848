// Package consolidation is the Consolidation balance plugin: it empties
// whole nodes when the scheduler profile, simulated, finds every movable pod
// on them a place on another node that stays in use. Upstream
// HighNodeUtilization only packs onto nodes already above its thresholds, so
// on a uniformly thin cluster it does nothing; Consolidation reaches for the
// lower bound instead. When no node in use has room, it empties several
// nodes onto fewer empty nodes, a net saving (in clusters of mixed node sizes,
// pods stranded on small nodes fit together on a large one). It runs only
// inside rebalancer's planner, which hands it the simulation.
package consolidation

import (
	"context"
	"fmt"
	"sort"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	frameworktypes "sigs.k8s.io/descheduler/pkg/framework/types"

	"github.com/rebalancer-dev/rebalancer/pkg/disruption"
	"github.com/rebalancer-dev/rebalancer/pkg/plan"
	"github.com/rebalancer-dev/rebalancer/pkg/simhandle"
	"github.com/rebalancer-dev/rebalancer/pkg/simulator"
)

// Name is the plugin's name in a DeschedulerPolicy.
const Name = "Consolidation"

// Consolidation is a descheduler BalancePlugin.
type Consolidation struct {
	handle frameworktypes.Handle
	sim    simhandle.Handle
	args   *Args
}

var _ frameworktypes.BalancePlugin = &Consolidation{}

// New builds the plugin; the handle must come from rebalancer's planner.
func New(_ context.Context, obj runtime.Object, handle frameworktypes.Handle) (frameworktypes.Plugin, error) {
	args, ok := obj.(*Args)
	if !ok {
		return nil, fmt.Errorf("%s: want args of type %T, got %T", Name, args, obj)
	}
	sim, err := simhandle.From(Name, handle)
	if err != nil {
		return nil, err
	}
	return &Consolidation{handle: handle, sim: sim, args: args}, nil
}

// Name returns the plugin name.
func (c *Consolidation) Name() string { return Name }

// Sequential is true: the planner judges each move as the plugin asks for
// it, as the packing reads the cluster each move leaves.
func (c *Consolidation) Sequential() bool { return true }

var _ simhandle.Sequential = &Consolidation{}

// MaxDrainCost is the profile's limit on what emptying a node may cost
// (MaxDrainCostPercent), which the planner holds HighNodeUtilization to.
func (a *Args) MaxDrainCost() int32 { return a.MaxDrainCostPercent }

var _ simhandle.DrainCostLimit = &Args{}

type candidate struct {
	node *v1.Node
	// ni is the node as the plan found it (keepOrder and pack read it).
	ni fwk.NodeInfo
	// load is what the node's pods request of the counted resources, each
	// as a fraction of the largest node's allocatable, summed: comparable
	// across node sizes.
	load float64
	// cost is what emptying the node costs (simulator.DrainCost).
	cost float64
	// closed: the node refuses some of the pods that would move (cordoned,
	// or a taint one of them does not tolerate), so the packing gives it
	// none (see markClosed).
	closed bool
}

// Balance empties nodes outside the keep set (see keepOrder and pack), the
// least loaded first, then tries the keep set's own, and empties a node
// only if every movable pod on it moves: otherwise its moves are taken back
// and the node is left alone. Then it empties several nodes onto fewer
// empty ones (replaceOntoEmpty).
func (c *Consolidation) Balance(ctx context.Context, nodes []*v1.Node) *frameworktypes.Status {
	r, err := c.survey(ctx, nodes)
	if err != nil {
		return &frameworktypes.Status{Err: err}
	}
	defer r.report()
	if err := r.emptyOneByOne(ctx); err != nil {
		return &frameworktypes.Status{Err: err}
	}
	if err := r.replaceOntoEmpty(ctx); err != nil {
		return &frameworktypes.Status{Err: err}
	}
	return nil
}

// round is one Balance: the nodes as the plan found them, in the order
// they are tried, and what became of each.
type round struct {
	c      *Consolidation
	logger klog.Logger
	// allowed are the nodes of the policy's nodeSelector; inUse those
	// that hold pods, as the plan goes on.
	allowed, inUse map[string]bool
	// empties were empty when the plan began: targets for several nodes
	// at once. (Nodes this plan empties are not: their pods must not come
	// back.)
	empties []*v1.Node
	// candidates are the nodes in use, outside the keep set first, then
	// inside it; least loaded first; of equal loads, the cheapest to
	// empty.
	candidates []candidate
	// pinned hold a pod that may not move; tried were tried (or refused).
	pinned, tried map[string]bool
	pk            *packing
	affordable    func(candidate, klog.Logger) bool
	emptied       int
	// overLimit is the lightest node the per-node eviction limit refused.
	overLimit struct {
		pods   int
		detail string
	}
}

// survey reads the nodes: which are in use, empty or pinned, what the
// packing keeps, and the order they are tried in.
func (c *Consolidation) survey(ctx context.Context, nodes []*v1.Node) (*round, error) {
	r := &round{c: c, logger: klog.FromContext(ctx).WithValues("plugin", Name),
		allowed: map[string]bool{}, inUse: map[string]bool{}, pinned: map[string]bool{}, tried: map[string]bool{}}
	sim := c.sim.Cluster()
	var used []fwk.NodeInfo
	for _, n := range nodes {
		r.allowed[n.Name] = true
		ni, err := sim.Node(n.Name)
		if err != nil {
			return nil, err
		}
		if r.inUse[n.Name] = simulator.InUse(ni); !r.inUse[n.Name] {
			r.empties = append(r.empties, n)
			continue
		}
		used = append(used, ni)
	}
	largest := c.largest(used)
	candidates := make([]candidate, 0, len(used))
	for _, ni := range used {
		cand := candidate{node: ni.Node(), ni: ni, cost: simulator.DrainCost(ni)}
		for _, res := range c.args.Resources {
			if requested, _ := amounts(ni, res, nil); largest[res] > 0 {
				cand.load += float64(requested) / float64(largest[res])
			}
		}
		candidates = append(candidates, cand)
	}

	// A node holding a pod that may not move stays in use whatever the
	// plan does: such nodes are kept first, so that pods do not fill nodes
	// that could have been emptied instead.
	for _, cand := range candidates {
		if pod, why, detail := c.pinnedBy(cand.node.Name); pod != nil {
			r.pinned[cand.node.Name] = true
			c.sim.Consider(cand.node.Name, why)
			c.sim.Pin(pod, why, detail)
			c.sim.Skip(pod, why, fmt.Sprintf("%s, so node %s cannot be emptied", detail, cand.node.Name))
			r.logger.V(3).Info("Node not consolidated: it holds a pod that may not move", "node", cand.node.Name, "pod", klog.KObj(pod), "why", why)
		}
	}
	markClosed(candidates)
	order, counted := c.keepOrder(candidates, r.pinned)
	ceiling := map[v1.ResourceName]int32{}
	if pct := c.args.TargetUtilizationCeiling; pct < 100 {
		for _, res := range c.args.Resources {
			ceiling[res] = pct
		}
	}
	r.pk = pack(order, r.pinned, counted, ceiling)
	keep := r.pk.keep
	sort.SliceStable(candidates, func(i, j int) bool {
		a, b := candidates[i], candidates[j]
		switch {
		case keep[a.node.Name] != keep[b.node.Name]:
			return !keep[a.node.Name]
		case a.load != b.load:
			return a.load < b.load
		case a.cost != b.cost:
			return a.cost < b.cost
		}
		return a.node.Name < b.node.Name
	})
	r.candidates = candidates
	r.affordable = c.affordable(candidates)
	return r, nil
}

// report says what became of each node, for the plan (plan.NodeOutcomes):
// the nodes not tried are kept by the packing, or left for
// maxNodesPerCycle or the policy's limits. A round that emptied no node
// because of the per-node eviction limit says so once.
func (r *round) report() {
	for _, cand := range r.candidates {
		switch name := cand.node.Name; {
		case r.pinned[name] || r.tried[name]:
		case r.pk.keep[name]:
			r.c.sim.Consider(name, plan.NodeKept)
		default:
			r.c.sim.Consider(name, plan.ReasonLimit)
		}
	}
	if r.emptied == 0 && r.overLimit.pods > 0 {
		r.c.sim.Warn(fmt.Sprintf("%s emptied no node: nodes it could empty run more pods than maxNoOfPodsToEvictPerNode lets a plan evict from a node (the lightest: %s)",
			Name, r.overLimit.detail))
	}
}

// affordable returns whether a candidate's drain costs little enough for
// maxDrainCostPercent, the candidates being the nodes in use. With no
// limit every candidate is.
func (c *Consolidation) affordable(candidates []candidate) func(candidate, klog.Logger) bool {
	costs := make([]float64, len(candidates))
	for i, cand := range candidates {
		costs[i] = cand.cost
	}
	budget := disruption.NewDrainBudget(c.args.MaxDrainCostPercent, costs)
	refused := map[string]bool{}
	return func(cand candidate, logger klog.Logger) bool {
		if budget.Allows(cand.cost) {
			return true
		}
		if name := cand.node.Name; !refused[name] {
			refused[name] = true
			logger.V(3).Info("Node not consolidated: emptying it costs more than maxDrainCostPercent allows", "node", name, "cost", cand.cost, "mean", budget.Mean)
			if pod := c.costliest(name); pod != nil {
				c.sim.Skip(pod, plan.ReasonCost, budget.Refusal(name, cand.cost))
			}
		}
		return false
	}
}

// costliest is the pod of node whose eviction costs the most (the first of
// equals), of those that would leave it.
func (c *Consolidation) costliest(node string) *v1.Pod {
	pods, _ := c.handle.GetPodsAssignedToNodeFunc()(node, func(p *v1.Pod) bool { return !simulator.NodeBound(p) })
	return disruption.Costliest(pods)
}
