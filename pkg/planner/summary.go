package planner

import (
	"github.com/rebalancer-dev/rebalancer/pkg/plan"
	"github.com/rebalancer-dev/rebalancer/pkg/simulator"
	"github.com/rebalancer-dev/rebalancer/pkg/snapshot"
)

type nodeUsage struct {
	cpu, memory float64 // percent of allocatable requested
	inUse       bool
}

// usage reads each node's requests from the simulation. A node is in use
// when it runs a pod that is not simulator.NodeBound.
func usage(sim *simulator.Simulator) (map[string]nodeUsage, error) {
	nodes, err := sim.Nodes()
	if err != nil {
		return nil, err
	}
	out := make(map[string]nodeUsage, len(nodes))
	for _, ni := range nodes {
		u := nodeUsage{
			cpu:    percent(ni.GetRequested().GetMilliCPU(), ni.GetAllocatable().GetMilliCPU()),
			memory: percent(ni.GetRequested().GetMemory(), ni.GetAllocatable().GetMemory()),
		}
		for _, pi := range ni.GetPods() {
			if !simulator.NodeBound(pi.GetPod()) {
				u.inUse = true
				break
			}
		}
		out[ni.Node().Name] = u
	}
	return out, nil
}

func percent(used, total int64) float64 {
	if total <= 0 {
		return 0
	}
	return float64(used*10000/total) / 100 // two decimals, stable in JSON
}

func summarize(snap *snapshot.Snapshot, before, after map[string]nodeUsage) plan.Summary {
	s := plan.Summary{Nodes: len(snap.Nodes), Pods: len(snap.Pods)}
	for name, b := range before {
		a := after[name]
		if b.inUse {
			s.NodesInUseBefore++
		}
		if a.inUse {
			s.NodesInUseAfter++
		}
		s.PerNode = append(s.PerNode, plan.NodeUsage{Node: name, CPUBefore: b.cpu, CPUAfter: a.cpu, MemoryBefore: b.memory, MemoryAfter: a.memory})
	}
	return s
}
