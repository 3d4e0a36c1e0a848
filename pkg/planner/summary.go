package planner

import (
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/rebalancer-dev/rebalancer/pkg/plan"
	"github.com/rebalancer-dev/rebalancer/pkg/simulator"
	"github.com/rebalancer-dev/rebalancer/pkg/snapshot"
)

type nodeUsage struct {
	cpu, memory float64 // percent of allocatable requested
	inUse       bool
}

// usage reads each node's requests from the simulation. A node is in use
// when it runs a pod other than a DaemonSet's or a mirror pod: those run on
// every node anyway and do not keep a node from being removed.
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
			if !nodeBound(pi.GetPod()) {
				u.inUse = true
				break
			}
		}
		out[ni.Node().Name] = u
	}
	return out, nil
}

// nodeBound pods belong to the node itself: DaemonSet pods and mirror pods.
func nodeBound(pod *v1.Pod) bool {
	if _, mirror := pod.Annotations[v1.MirrorPodAnnotationKey]; mirror {
		return true
	}
	owner := metav1.GetControllerOf(pod)
	return owner != nil && owner.Kind == "DaemonSet"
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
