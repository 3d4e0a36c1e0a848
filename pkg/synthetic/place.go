package synthetic

import (
	"cmp"
	"fmt"
	"math"
	"slices"

	v1 "k8s.io/api/core/v1"
)

// candidates is how many random nodes each pod chooses from. A few make
// placement spread load like a scheduler scoring for least allocation,
// yet leave it as uneven as churn does; all nodes would even it out.
const candidates = 3

// nodeState is a node and what the pods placed on it so far request.
type nodeState struct {
	node             *v1.Node
	cpu, mem         int64 // allocatable millicores and bytes
	usedCPU, usedMem int64
	pods             int
	// fill is how much of the workload the node draws relative to other
	// nodes: placement balances used/fill, so nodes end up unevenly used.
	fill float64
}

func (n *nodeState) fits(cpu, mem int64) bool {
	return n.pods < maxPodsPerNode && n.usedCPU+cpu <= n.cpu && n.usedMem+mem <= n.mem
}

func (n *nodeState) add(cpu, mem int64) {
	n.usedCPU += cpu
	n.usedMem += mem
	n.pods++
}

// placer places pods on nodes.
type placer struct {
	*generator
	// Slots are pod slots: 110 per node. In a dense cluster every slot may be
	// needed, so a node must not run out of CPU or memory with slots left.
	// A slot is lost when not even the smallest pod fits in what its node
	// has left; at most spare slots, those no pod needs, may be lost.
	minCPU, minMem int64
	lost, spare    int
}

// lostOn returns how many slots of n are lost once it runs pods of cpu and mem more.
func (p *placer) lostOn(n *nodeState, cpu, mem int64) int {
	free := maxPodsPerNode - n.pods
	room := min((n.cpu-n.usedCPU-cpu)/p.minCPU, (n.mem-n.usedMem-mem)/p.minMem)
	return max(0, free-int(room))
}

// place binds every pod that addPods did not bind, largest first, and
// accounts for all.
func (g *generator) place(groups []*group) error {
	var allocCPU, allocMem float64
	for _, n := range g.nodes {
		allocCPU += float64(n.cpu)
		allocMem += float64(n.mem)
	}
	share := func(gr *group) float64 { return max(float64(gr.cpu)/allocCPU, float64(gr.mem)/allocMem) }
	p := &placer{generator: g, minCPU: math.MaxInt64, minMem: math.MaxInt64, spare: maxPodsPerNode*g.o.Nodes - g.o.Pods}
	var rest []*group
	for _, gr := range groups {
		if gr.ownerKind == daemonSetKind {
			for j := range gr.replicas {
				g.nodes[j].add(gr.cpu, gr.mem)
			}
			continue
		}
		rest = append(rest, gr)
		p.minCPU, p.minMem = min(p.minCPU, gr.cpu), min(p.minMem, gr.mem)
	}
	if len(rest) == 0 {
		return nil
	}
	for i := range g.nodes {
		p.lost += p.lostOn(&g.nodes[i], 0, 0)
	}
	// Pods that are hard to place go first, while there is room for them
	// anywhere; each still goes to a lightly used node, so all end up spread.
	slices.SortStableFunc(rest, func(a, b *group) int { return cmp.Compare(share(b), share(a)) })
	placed := 0
	for _, gr := range rest {
		for j := range gr.replicas {
			if placed++; placed%4096 == 0 {
				if err := g.ended(); err != nil {
					return err
				}
			}
			pod := &g.parts[gr.first+j].pod
			n := p.pick(gr.cpu, gr.mem)
			if n == nil {
				return fmt.Errorf("synthetic: %d pods do not fit on %d nodes: no node has room for pod %s/%s (cpu %dm, memory %dMi)",
					g.o.Pods, g.o.Nodes, pod.Namespace, pod.Name, gr.cpu, gr.mem/mi)
			}
			p.lost += p.lostOn(n, gr.cpu, gr.mem) - p.lostOn(n, 0, 0)
			n.add(gr.cpu, gr.mem)
			pod.Spec.NodeName = n.node.Name
		}
	}
	return nil
}

// pick returns, of a few random nodes that fit a pod, the one least used
// relative to its fill once the pod is on it; of all nodes if none of
// those fits; nil if no node fits.
func (p *placer) pick(cpu, mem int64) *nodeState {
	var best *nodeState
	bestScore := math.Inf(1)
	consider := func(n *nodeState) {
		if !n.fits(cpu, mem) || p.lost-p.lostOn(n, 0, 0)+p.lostOn(n, cpu, mem) > p.spare {
			return
		}
		// Pod slots count as a resource too, so that the pods of a dense
		// cluster spread over all of them.
		used := max(float64(n.usedCPU+cpu)/float64(n.cpu), float64(n.usedMem+mem)/float64(n.mem), float64(n.pods+1)/maxPodsPerNode)
		if score := used / n.fill; score < bestScore {
			best, bestScore = n, score
		}
	}
	for range candidates {
		consider(&p.nodes[p.rng.IntN(len(p.nodes))])
	}
	if best == nil {
		for i := range p.nodes {
			consider(&p.nodes[i])
		}
	}
	return best
}
