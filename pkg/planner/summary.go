package planner

import (
	"github.com/rebalancer-dev/rebalancer/pkg/plan"
	"github.com/rebalancer-dev/rebalancer/pkg/simulator"
	"github.com/rebalancer-dev/rebalancer/pkg/snapshot"
)

// summarize compares the nodes before and after the plan's moves; both
// lists come from Simulator.Usage, in the same node order. The nodes the
// moves leave empty are its drains.
func summarize(state *snapshot.Snapshot, before, after []simulator.NodeUsage, moves []plan.Move) plan.Summary {
	s := plan.Summary{Nodes: len(state.Nodes), Pods: len(state.Pods)}
	emptied := map[string]bool{}
	for i, b := range before {
		a := after[i]
		if b.InUse {
			s.NodesInUseBefore++
		}
		if a.InUse {
			s.NodesInUseAfter++
		}
		n := plan.NodeUsage{Node: b.Node, CPUBefore: b.CPU, CPUAfter: a.CPU, MemoryBefore: b.Memory, MemoryAfter: a.Memory}
		if b.Measured && a.Measured {
			n.Used = &plan.Used{CPUBefore: b.UsedCPU, CPUAfter: a.UsedCPU, MemoryBefore: b.UsedMemory, MemoryAfter: a.UsedMemory}
		}
		s.PerNode = append(s.PerNode, n)
		emptied[b.Node] = b.InUse && !a.InUse
	}
	s.Drains = plan.Drains(moves, func(node string) bool { return emptied[node] })
	return s
}
