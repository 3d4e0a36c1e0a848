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
	"errors"
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"sigs.k8s.io/descheduler/pkg/descheduler/evictions"
	frameworktypes "sigs.k8s.io/descheduler/pkg/framework/types"

	"github.com/rebalancer-dev/rebalancer/pkg/disruption"
	"github.com/rebalancer-dev/rebalancer/pkg/plan"
	"github.com/rebalancer-dev/rebalancer/pkg/requests"
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

// markClosed marks the candidates that refuse some of the movable pods of
// the candidates, by their distinct toleration sets.
func markClosed(candidates []candidate) {
	sets := simulator.TolerationSets{}
	for _, cand := range candidates {
		for _, pi := range cand.ni.GetPods() {
			if p := pi.GetPod(); !simulator.NodeBound(p) {
				sets.Add(p.Spec.Tolerations)
			}
		}
	}
	for i := range candidates {
		candidates[i].closed = simulator.RefusesSome(candidates[i].node, sets)
	}
}

// Balance empties nodes outside the keep set (see keepOrder and pack), the
// least loaded first, then tries the keep set's own, and empties a node
// only if every movable pod on it moves: otherwise its moves are taken back
// and the node is left alone.
func (c *Consolidation) Balance(ctx context.Context, nodes []*v1.Node) *frameworktypes.Status {
	logger := klog.FromContext(ctx).WithValues("plugin", Name)
	sim := c.sim.Simulator()
	allowed := map[string]bool{} // nodes of the policy's nodeSelector
	inUse := map[string]bool{}
	var used []fwk.NodeInfo
	var empties []*v1.Node
	for _, n := range nodes {
		allowed[n.Name] = true
		ni, err := sim.Node(n.Name)
		if err != nil {
			return &frameworktypes.Status{Err: err}
		}
		if inUse[n.Name] = simulator.InUse(ni); !inUse[n.Name] {
			// Already empty: a target for several nodes at once. (Nodes this
			// cycle empties are not: their pods must not come back.)
			empties = append(empties, n)
			continue
		}
		used = append(used, ni)
	}
	largest := c.largest(used)
	candidates := make([]candidate, 0, len(used))
	for _, ni := range used {
		cand := candidate{node: ni.Node(), ni: ni, cost: simulator.DrainCost(ni)}
		for _, r := range c.args.Resources {
			if requested, _ := amounts(ni, r, nil); largest[r] > 0 {
				cand.load += float64(requested) / float64(largest[r])
			}
		}
		candidates = append(candidates, cand)
	}

	// A node holding a pod that may not move stays in use whatever the
	// plan does: such nodes are kept first, so that pods do not fill nodes
	// that could have been emptied instead.
	pinned := map[string]bool{}
	for _, cand := range candidates {
		if pod, why, detail := c.pinnedBy(cand.node.Name); pod != nil {
			pinned[cand.node.Name] = true
			c.sim.Consider(cand.node.Name, why)
			c.sim.Pin(pod, why, detail)
			c.sim.Skip(pod, why, fmt.Sprintf("%s, so node %s cannot be emptied", detail, cand.node.Name))
			logger.V(3).Info("Node not consolidated: it holds a pod that may not move", "node", cand.node.Name, "pod", klog.KObj(pod), "why", why)
		}
	}
	markClosed(candidates)
	order, counted := c.keepOrder(candidates, pinned)
	ceiling := map[v1.ResourceName]int32{}
	if pct := c.args.TargetUtilizationCeiling; pct < 100 {
		for _, r := range c.args.Resources {
			ceiling[r] = pct
		}
	}
	pk := pack(order, pinned, counted, ceiling)
	keep := pk.keep
	// Outside the keep set first, then inside it; least loaded first; of
	// equal loads, the cheapest to empty.
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
	affordable := c.affordable(candidates)
	tried := map[string]bool{}

	// What became of each node, for the plan to say (plan.NodeOutcomes):
	// the nodes not tried are kept by the packing, or left for
	// maxNodesPerCycle or the policy's limits.
	defer func() {
		for _, cand := range candidates {
			switch name := cand.node.Name; {
			case pinned[name] || tried[name]:
			case keep[name]:
				c.sim.Consider(name, plan.NodeKept)
			default:
				c.sim.Consider(name, plan.ReasonLimit)
			}
		}
	}()
	emptied := 0
	for _, cand := range candidates {
		if emptied >= int(c.args.MaxNodesPerCycle) {
			break
		}
		name := cand.node.Name
		if pinned[name] {
			continue
		}
		if !affordable(cand, logger) {
			tried[name] = true
			c.sim.Consider(name, plan.ReasonCost)
			continue
		}
		movable, _, ok := c.movablePods(name)
		if !ok {
			if !keep[name] {
				tried[name] = true
				c.sim.Consider(name, plan.ReasonTarget) // it took pods from a node emptied before it
			}
			continue
		}
		ok, why, err := c.empty(ctx, name, movable, func(target string, pod *v1.Pod) bool {
			return !allowed[target] || !inUse[target] || target == name || c.overCeiling(target, pod)
		}, pk)
		if err != nil {
			var total *evictions.EvictionTotalLimitError
			if errors.As(err, &total) {
				break
			}
			return &frameworktypes.Status{Err: err}
		}
		tried[name] = true
		c.sim.Consider(name, why)
		if ok {
			emptied++
			inUse[name] = false // nothing may move onto a node being emptied
			logger.V(2).Info("Node consolidated", "node", name, "pods", len(movable))
		}
	}

	// Then several nodes onto fewer empty nodes, while the budget allows
	// a saving. Sources are tried smallest load first, so that as many as
	// possible fit; their pods may also take the room left on the nodes in
	// use that stay.
	var sources []candidate
	replacing := int(c.args.MaxNodesPerCycle)-emptied >= 2 && len(empties) > 0
	for _, cand := range candidates {
		if replacing && inUse[cand.node.Name] && !pinned[cand.node.Name] && affordable(cand, logger) {
			sources = append(sources, cand)
		}
	}
	sort.SliceStable(sources, func(i, j int) bool { return sources[i].load < sources[j].load })
	sort.SliceStable(empties, func(i, j int) bool { return larger(empties[i], empties[j]) })
	open := func(n string) bool { return allowed[n] && inUse[n] }
	for tries := 0; tries < maxReplaceTargets && tries < len(empties); tries++ {
		var moved, used []string
		var err error
		// One empty node for two or more, else two for three or more.
		for k := 1; k <= maxReplaceTogether; k++ {
			budget := int(c.args.MaxNodesPerCycle) - emptied
			if budget <= k {
				break
			}
			var targets []string // the next k nodes still empty
			for _, n := range empties[tries:] {
				if len(targets) < k && !inUse[n.Name] {
					targets = append(targets, n.Name)
				}
			}
			if len(targets) < k {
				break
			}
			moved, used, err = c.replace(ctx, targets, sources, budget, open)
			if len(moved) > 0 || err != nil {
				break
			}
		}
		if len(moved) > 0 {
			emptied += len(moved)
			for _, n := range moved {
				inUse[n] = false
				tried[n] = true
				c.sim.Consider(n, plan.NodeEmptied)
			}
			for _, n := range used {
				inUse[n] = true
			}
			kept := sources[:0]
			for _, s := range sources {
				if inUse[s.node.Name] {
					kept = append(kept, s)
				}
			}
			sources = kept
			logger.V(2).Info("Nodes consolidated onto empty nodes", "nodes", moved, "targets", used)
		}
		if err != nil {
			var total *evictions.EvictionTotalLimitError
			if errors.As(err, &total) {
				break
			}
			return &frameworktypes.Status{Err: err}
		}
	}
	return nil
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

// maxReplaceTargets bounds the empty nodes one plan starts from,
// maxReplaceTogether the empty nodes filled at once, and maxReplaceSources
// the nodes tried as sources for each: together they bound the simulations
// spent on a cluster with no such saving to find.
const (
	maxReplaceTargets  = 3
	maxReplaceTogether = 2
	maxReplaceSources  = 16
)

// larger orders empty nodes largest first (CPU, then memory), then by name.
func larger(a, b *v1.Node) bool {
	ca, cb := a.Status.Allocatable.Cpu().MilliValue(), b.Status.Allocatable.Cpu().MilliValue()
	if ca != cb {
		return ca > cb
	}
	ma, mb := a.Status.Allocatable.Memory().Value(), b.Status.Allocatable.Memory().Value()
	if ma != mb {
		return ma > mb
	}
	return a.Name < b.Name
}

// replace empties as many source nodes as fit (up to budget, in the order
// given, each all or nothing) onto the empty nodes targets and the room on
// the nodes in use that stay (open says which are in use). The moves stay
// only if they empty more nodes than they take into use. It returns the
// emptied sources and the targets taken into use.
func (c *Consolidation) replace(ctx context.Context, targets []string, sources []candidate, budget int, open func(node string) bool) ([]string, []string, error) {
	tx := c.sim.Begin()
	isTarget := sets.New(targets...)
	gone := sets.New[string]() // the sources emptied here, and the one being emptied
	// saves returns the targets the moves took into use, and whether the
	// moves empty more nodes than that.
	saves := func(emptied []string) ([]string, bool) {
		var in []string
		for _, t := range targets {
			if ni, err := c.sim.Simulator().Node(t); err == nil && simulator.InUse(ni) {
				in = append(in, t)
			}
		}
		return in, len(emptied) > len(in)
	}
	var out []string
	for i, src := range sources {
		if len(out) == budget || i == maxReplaceSources {
			break
		}
		movable, blocker, ok := c.movablePods(src.node.Name)
		if !ok || blocker != nil || len(movable) == 0 {
			continue
		}
		gone.Insert(src.node.Name)
		node := c.sim.Begin() // this source, all or nothing
		for _, p := range movable {
			// The empty nodes first: room taken on a node in use may be
			// room a later source needed, or make that node's own pods
			// unable to leave it.
			allowed := func(n string) bool { return isTarget.Has(n) || open(n) && !gone.Has(n) }
			opts := simulator.PredictOptions{LeaveSource: true, Prefer: isTarget.Has, Exclude: func(n string) bool {
				return !allowed(n) || c.overCeiling(n, p)
			}}
			_, err := c.sim.Move(ctx, p, opts, evictions.EvictOptions{StrategyName: Name, Reason: fmt.Sprintf("emptying node %s, several onto empty %s", src.node.Name, strings.Join(targets, ", "))})
			if err == nil {
				continue
			}
			ok = false
			var total *evictions.EvictionTotalLimitError
			if errors.As(err, &total) {
				// The plan is full: keep what was emptied if it saves a node.
				if uerr := node.Rollback(); uerr != nil {
					return nil, nil, uerr
				}
				if in, ok := saves(out); ok {
					tx.Commit()
					return out, in, err
				}
				if rbErr := tx.Rollback(); rbErr != nil {
					return nil, nil, rbErr
				}
				return nil, nil, err
			}
			break
		}
		if !ok {
			gone.Delete(src.node.Name)
			if err := node.Rollback(); err != nil {
				return nil, nil, err
			}
			continue
		}
		node.Commit()
		out = append(out, src.node.Name)
	}
	if in, ok := saves(out); ok {
		tx.Commit()
		return out, in, nil
	}
	return nil, nil, tx.Rollback()
}

// pinnedBy returns the first pod that keeps node in use whatever the plan
// does, and why: one the evictor's filters protect, or one the planner
// would not move (opted out, sticky, in its cooldown, held by a PDB).
func (c *Consolidation) pinnedBy(node string) (*v1.Pod, string, string) {
	pods, _ := c.handle.GetPodsAssignedToNodeFunc()(node, nil)
	ev := c.handle.Evictor()
	for _, p := range pods {
		if simulator.NodeBound(p) {
			continue
		}
		if !ev.Filter(p) || !ev.PreEvictionFilter(p) {
			return p, plan.ReasonProtected, "the evictor's filters protect it"
		}
		if why, detail := c.sim.MustStay(p); why != "" {
			return p, why, detail
		}
	}
	return nil, "", ""
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
	if ni, err := c.sim.Simulator().Node(node); err == nil {
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
		if !c.sim.Simulator().Runs(p) {
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
		target, err := c.sim.Move(ctx, p, opts, evictions.EvictOptions{StrategyName: Name, Reason: "emptying node " + node})
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
	ni, err := c.sim.Simulator().Node(node)
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

func fraction(ni fwk.NodeInfo, r v1.ResourceName, extra v1.ResourceList) float64 {
	used, total := amounts(ni, r, extra)
	if total <= 0 {
		return 0
	}
	return float64(used) / float64(total)
}

// amounts are how much of r the node's pods request, with extra added (nil
// for none), and how much the node has.
func amounts(ni fwk.NodeInfo, r v1.ResourceName, extra v1.ResourceList) (used, total int64) {
	req, alloc := ni.GetRequested(), ni.GetAllocatable()
	q := extra[r]
	switch r {
	case v1.ResourceCPU:
		return req.GetMilliCPU() + q.MilliValue(), alloc.GetMilliCPU()
	case v1.ResourceMemory:
		return req.GetMemory() + q.Value(), alloc.GetMemory()
	case v1.ResourceEphemeralStorage:
		return req.GetEphemeralStorage() + q.Value(), alloc.GetEphemeralStorage()
	case v1.ResourcePods:
		used = int64(len(ni.GetPods()))
		if extra != nil {
			used++
		}
		return used, int64(alloc.GetAllowedPodNumber())
	}
	return req.GetScalarResources()[r] + q.Value(), alloc.GetScalarResources()[r]
}

// largest is the most of each counted resource one of the nodes has.
func (c *Consolidation) largest(nodes []fwk.NodeInfo) map[v1.ResourceName]int64 {
	out := map[v1.ResourceName]int64{}
	for _, ni := range nodes {
		for _, r := range c.args.Resources {
			_, total := amounts(ni, r, nil)
			out[r] = max(out[r], total)
		}
	}
	return out
}

// keepOrder lists the candidates in the order the plan keeps them, which
// pack cuts: the pinned ones, then the nodes that hold the most of the
// candidates' average movable pod (each resource the scheduler counts, the
// pods per node included; of equals the most loaded, then the costliest to
// empty). A node that refuses some of the pods that would move (cordoned,
// or a NoSchedule or NoExecute taint one of them does not tolerate) holds
// none: it comes last, the first emptied. The node count is what
// consolidation lowers: emptying the least utilized first empties large,
// thin nodes onto small, full ones, and a node's CPU counts for nothing
// once its pods per node run out. counted are the resources pack weighs
// besides pod slots.
func (c *Consolidation) keepOrder(candidates []candidate, pinned map[string]bool) (order []candidate, counted []v1.ResourceName) {
	counted = slices.Clone(c.args.Resources)
	for _, r := range []v1.ResourceName{v1.ResourceCPU, v1.ResourceMemory, v1.ResourcePods} {
		if !slices.Contains(counted, r) {
			counted = append(counted, r)
		}
	}
	pods := slices.Index(counted, v1.ResourcePods)
	need := make([]int64, len(counted)) // the movable pods' total requests
	room := make([][]int64, len(candidates))
	for i, cand := range candidates {
		bound := nodeBound(cand.ni) // DaemonSet and mirror pods stay
		room[i] = make([]int64, len(counted))
		for k, r := range counted {
			requested, allocatable := amounts(cand.ni, r, nil)
			need[k] += requested - bound[r]
			room[i][k] = allocatable - bound[r]
		}
	}
	// holds is how many of the average movable pod fit on a node.
	holds := make([]float64, len(candidates))
	for i, cand := range candidates {
		if cand.closed {
			continue // none
		}
		holds[i] = math.Inf(1)
		for k := range counted {
			if need[k] > 0 {
				holds[i] = min(holds[i], float64(room[i][k])*float64(need[pods])/float64(need[k]))
			}
		}
	}
	idx := make([]int, len(candidates))
	for i := range idx {
		idx[i] = i
	}
	sort.SliceStable(idx, func(x, y int) bool {
		i, j := idx[x], idx[y]
		a, b := candidates[i], candidates[j]
		switch {
		case pinned[a.node.Name] != pinned[b.node.Name]:
			return pinned[a.node.Name]
		case holds[i] != holds[j]:
			return holds[i] > holds[j]
		case a.load != b.load:
			return a.load > b.load
		case a.cost != b.cost:
			return a.cost > b.cost
		}
		return a.node.Name > b.node.Name // the last kept, the first emptied
	})
	order = make([]candidate, len(idx))
	for x, i := range idx {
		order[x] = candidates[i]
	}
	return order, slices.Delete(counted, pods, pods+1)
}

// nodeBound is what the node's DaemonSet and mirror pods request, in
// amounts' units, the pods among them counted: they stay with it.
func nodeBound(ni fwk.NodeInfo) map[v1.ResourceName]int64 {
	out := map[v1.ResourceName]int64{}
	for _, pi := range ni.GetPods() {
		pod := pi.GetPod()
		if !simulator.NodeBound(pod) {
			continue
		}
		out[v1.ResourcePods]++
		for r, q := range requests.Of(pod) {
			out[r] += requests.Units(r, q)
		}
	}
	return out
}
