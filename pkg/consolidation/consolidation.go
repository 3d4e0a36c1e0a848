// Package consolidation is the Consolidation balance plugin: it empties
// whole nodes when the scheduler profile, simulated, finds every movable pod
// on them a place on another node that stays in use. Upstream
// HighNodeUtilization only packs onto nodes already above its thresholds, so
// on a uniformly thin cluster it does nothing; Consolidation reaches for the
// lower bound instead. It runs only inside rebalancer's planner, which hands
// it the simulation.
package consolidation

import (
	"context"
	"errors"
	"fmt"
	"sort"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	resourcehelper "k8s.io/component-helpers/resource"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"sigs.k8s.io/descheduler/pkg/descheduler/evictions"
	frameworktypes "sigs.k8s.io/descheduler/pkg/framework/types"

	"github.com/rebalancer-dev/rebalancer/pkg/plan"
	"github.com/rebalancer-dev/rebalancer/pkg/simulator"
)

// Name is the plugin's name in a DeschedulerPolicy.
const Name = "Consolidation"

// Simulation is what Consolidation needs from the planner's handle.
type Simulation interface {
	// Simulator is the planner's simulation of the scheduler profile.
	Simulator() *simulator.Simulator
	// Move judges the eviction of pod as the planner judges every eviction
	// (limits, PDBs, the simulated target), with extra prediction options;
	// nil means the move is in the plan.
	Move(ctx context.Context, pod *v1.Pod, opts simulator.Options, eo evictions.EvictOptions) error
	// Begin starts a group of moves that enter the plan all together or not at all.
	Begin() Transaction
	// Skip records a pod the plugin would have moved and why it did not.
	Skip(pod *v1.Pod, why, detail string)
}

// Transaction is a group of moves: Rollback takes them all back.
type Transaction interface {
	Commit()
	Rollback() error
}

// Consolidation is a descheduler BalancePlugin.
type Consolidation struct {
	handle frameworktypes.Handle
	sim    Simulation
	args   *Args
}

var _ frameworktypes.BalancePlugin = &Consolidation{}

// New builds the plugin; the handle must come from rebalancer's planner.
func New(_ context.Context, obj runtime.Object, handle frameworktypes.Handle) (frameworktypes.Plugin, error) {
	args, ok := obj.(*Args)
	if !ok {
		return nil, fmt.Errorf("%s: want args of type %T, got %T", Name, args, obj)
	}
	sim, ok := handle.(Simulation)
	if !ok {
		return nil, fmt.Errorf("%s runs only in rebalancer's planner, which simulates the scheduler profile", Name)
	}
	return &Consolidation{handle: handle, sim: sim, args: args}, nil
}

// Name returns the plugin name.
func (c *Consolidation) Name() string { return Name }

type candidate struct {
	node        *v1.Node
	utilization float64
}

// Balance tries the given nodes from least to most utilized and empties a
// node only if every movable pod on it moves: otherwise its moves are taken
// back and the node is left alone.
func (c *Consolidation) Balance(ctx context.Context, nodes []*v1.Node) *frameworktypes.Status {
	logger := klog.FromContext(ctx).WithValues("plugin", Name)
	sim := c.sim.Simulator()
	allowed := map[string]bool{} // nodes of the policy's nodeSelector
	inUse := map[string]bool{}
	var candidates []candidate
	for _, n := range nodes {
		allowed[n.Name] = true
		pods, err := sim.PodsOn(n.Name)
		if err != nil {
			return &frameworktypes.Status{Err: err}
		}
		for _, p := range pods {
			if !simulator.NodeBound(p) {
				inUse[n.Name] = true
				break
			}
		}
		if !inUse[n.Name] {
			continue // already empty
		}
		ni, err := sim.Node(n.Name)
		if err != nil {
			return &frameworktypes.Status{Err: err}
		}
		candidates = append(candidates, candidate{node: n, utilization: c.utilization(ni, nil)})
	}
	sort.SliceStable(candidates, func(i, j int) bool {
		if candidates[i].utilization != candidates[j].utilization {
			return candidates[i].utilization < candidates[j].utilization
		}
		return candidates[i].node.Name < candidates[j].node.Name
	})

	emptied := 0
	for _, cand := range candidates {
		if emptied >= int(c.args.MaxNodesPerCycle) {
			break
		}
		name := cand.node.Name
		movable, blocker := c.movablePods(name)
		if blocker != nil {
			c.sim.Skip(blocker, plan.ReasonProtected, fmt.Sprintf("the evictor's filters protect it, so node %s cannot be emptied", name))
			logger.V(3).Info("Node not consolidated: it holds a protected pod", "node", name, "pod", klog.KObj(blocker))
			continue
		}
		ok, err := c.empty(ctx, name, movable, func(target string, pod *v1.Pod) bool {
			return !allowed[target] || !inUse[target] || target == name || c.overCeiling(target, pod)
		})
		if err != nil {
			var total *evictions.EvictionTotalLimitError
			if errors.As(err, &total) {
				break
			}
			return &frameworktypes.Status{Err: err}
		}
		if ok {
			emptied++
			inUse[name] = false // nothing may move onto a node being emptied
			logger.V(2).Info("Node consolidated", "node", name, "pods", len(movable))
		}
	}
	return nil
}

// movablePods lists the pods that must leave a node to empty it, biggest
// first, or returns the first pod that may not move.
func (c *Consolidation) movablePods(node string) (movable []*v1.Pod, blocker *v1.Pod) {
	pods, _ := c.handle.GetPodsAssignedToNodeFunc()(node, nil) // the node is in the simulation: no error
	ev := c.handle.Evictor()
	for _, p := range pods {
		if simulator.NodeBound(p) {
			continue
		}
		if !ev.Filter(p) || !ev.PreEvictionFilter(p) {
			return nil, p
		}
		movable = append(movable, p)
	}
	sort.SliceStable(movable, func(i, j int) bool { return size(movable[i]) > size(movable[j]) })
	return movable, nil
}

// empty moves every pod off node in one transaction. It reports false, with
// the moves taken back, when one of them has no acceptable target.
func (c *Consolidation) empty(ctx context.Context, node string, pods []*v1.Pod, exclude func(target string, pod *v1.Pod) bool) (bool, error) {
	tx := c.sim.Begin()
	for _, p := range pods {
		opts := simulator.Options{LeaveSource: true, Exclude: func(target string) bool { return exclude(target, p) }}
		err := c.sim.Move(ctx, p, opts, evictions.EvictOptions{StrategyName: Name, Reason: "emptying node " + node})
		if err == nil {
			continue
		}
		if rbErr := tx.Rollback(); rbErr != nil {
			return false, rbErr
		}
		var total *evictions.EvictionTotalLimitError
		if errors.As(err, &total) {
			return false, err
		}
		return false, nil
	}
	tx.Commit()
	return true, nil
}

// utilization is a node's mean requested fraction over the counted
// resources, with extra added (nil for none).
func (c *Consolidation) utilization(ni fwk.NodeInfo, extra v1.ResourceList) float64 {
	var sum float64
	for _, r := range c.args.Resources {
		sum += fraction(ni, r, extra)
	}
	return sum / float64(len(c.args.Resources))
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
	req := requests(pod)
	for _, r := range c.args.Resources {
		if fraction(ni, r, req)*100 > float64(c.args.TargetUtilizationCeiling) {
			return true
		}
	}
	return false
}

func fraction(ni fwk.NodeInfo, r v1.ResourceName, extra v1.ResourceList) float64 {
	var used, total int64
	req, alloc := ni.GetRequested(), ni.GetAllocatable()
	q := extra[r]
	switch r {
	case v1.ResourceCPU:
		used, total = req.GetMilliCPU()+q.MilliValue(), alloc.GetMilliCPU()
	case v1.ResourceMemory:
		used, total = req.GetMemory()+q.Value(), alloc.GetMemory()
	case v1.ResourceEphemeralStorage:
		used, total = req.GetEphemeralStorage()+q.Value(), alloc.GetEphemeralStorage()
	case v1.ResourcePods:
		used, total = int64(len(ni.GetPods())), int64(alloc.GetAllowedPodNumber())
		if extra != nil {
			used++
		}
	default:
		used, total = req.GetScalarResources()[r]+q.Value(), alloc.GetScalarResources()[r]
	}
	if total <= 0 {
		return 0
	}
	return float64(used) / float64(total)
}

// requests is a pod's effective request as the scheduler computes it
// (init containers, sidecars and overhead included).
func requests(pod *v1.Pod) v1.ResourceList {
	return resourcehelper.PodRequests(pod, resourcehelper.PodResourcesOptions{})
}

func size(pod *v1.Pod) int64 {
	r := requests(pod)
	return r.Cpu().MilliValue()*1024 + r.Memory().Value()/(1<<20)
}
