package consolidation

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"sigs.k8s.io/descheduler/pkg/descheduler/evictions"

	"github.com/rebalancer-dev/rebalancer/pkg/plan"
	"github.com/rebalancer-dev/rebalancer/pkg/simulator"
)

// replaceOntoEmpty empties several nodes onto fewer empty nodes, while the
// budget allows a saving. Sources are tried smallest load first, so that
// as many as possible fit; their pods may also take the room left on the
// nodes in use that stay.
func (r *round) replaceOntoEmpty(ctx context.Context) error {
	c := r.c
	var sources []candidate
	replacing := int(c.args.MaxNodesPerCycle)-r.emptied >= 2 && len(r.empties) > 0
	for _, cand := range r.candidates {
		if replacing && r.inUse[cand.node.Name] && !r.pinned[cand.node.Name] && r.affordable(cand, r.logger) {
			sources = append(sources, cand)
		}
	}
	sort.SliceStable(sources, func(i, j int) bool { return sources[i].load < sources[j].load })
	empties := r.empties
	sort.SliceStable(empties, func(i, j int) bool { return larger(empties[i], empties[j]) })
	open := func(n string) bool { return r.allowed[n] && r.inUse[n] }
	for tries := 0; tries < maxReplaceTargets && tries < len(empties); tries++ {
		var moved, used []string
		var err error
		// One empty node for two or more, else two for three or more.
		for k := 1; k <= maxReplaceTogether; k++ {
			budget := int(c.args.MaxNodesPerCycle) - r.emptied
			if budget <= k {
				break
			}
			var targets []string // the next k nodes still empty
			for _, n := range empties[tries:] {
				if len(targets) < k && !r.inUse[n.Name] {
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
			r.emptied += len(moved)
			for _, n := range moved {
				r.inUse[n] = false
				r.tried[n] = true
				c.sim.Consider(n, plan.NodeEmptied)
			}
			for _, n := range used {
				r.inUse[n] = true
			}
			kept := sources[:0]
			for _, s := range sources {
				if r.inUse[s.node.Name] {
					kept = append(kept, s)
				}
			}
			sources = kept
			r.logger.V(2).Info("Nodes consolidated onto empty nodes", "nodes", moved, "targets", used)
		}
		if err != nil {
			return planFull(err)
		}
	}
	return nil
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
	allowed := func(n string) bool { return isTarget.Has(n) || open(n) && !gone.Has(n) }
	// saves returns the targets the moves took into use, and whether the
	// moves empty more nodes than that.
	saves := func(emptied []string) ([]string, bool) {
		var in []string
		for _, t := range targets {
			if ni, err := c.sim.Cluster().Node(t); err == nil && simulator.InUse(ni) {
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
		if detail, _ := c.sim.LimitsForbid(src.node.Name, movable); detail != "" {
			continue
		}
		gone.Insert(src.node.Name)
		node := c.sim.Begin() // this source, all or nothing
		for _, p := range movable {
			// The empty nodes first: room taken on a node in use may be
			// room a later source needed, or make that node's own pods
			// unable to leave it.
			opts := simulator.PredictOptions{LeaveSource: true, Prefer: isTarget.Has, Exclude: func(n string) bool {
				return !allowed(n) || c.overCeiling(n, p)
			}}
			_, err := c.sim.PlanMove(ctx, p, opts, evictions.EvictOptions{StrategyName: Name, Reason: fmt.Sprintf("emptying node %s, several onto empty %s", src.node.Name, strings.Join(targets, ", "))})
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
