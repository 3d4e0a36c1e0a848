package consolidation

import (
	"math"
	"slices"
	"sort"

	v1 "k8s.io/api/core/v1"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/rebalancer-dev/rebalancer/pkg/requests"
	"github.com/rebalancer-dev/rebalancer/pkg/simulator"
)

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

// amounts are how much of r the node's pods request, with extra added (nil
// for none), and how much the node has.
func amounts(ni fwk.NodeInfo, r v1.ResourceName, extra v1.ResourceList) (used, total int64) {
	used, total = requests.OnNode(ni, r)
	switch {
	case r == v1.ResourcePods && extra != nil:
		used++
	case r != v1.ResourcePods:
		used += requests.Units(r, extra[r])
	}
	return used, total
}

func fraction(ni fwk.NodeInfo, r v1.ResourceName, extra v1.ResourceList) float64 {
	used, total := amounts(ni, r, extra)
	if total <= 0 {
		return 0
	}
	return float64(used) / float64(total)
}
