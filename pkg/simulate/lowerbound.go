package simulate

import (
	"sort"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	resourcehelper "k8s.io/component-helpers/resource"

	"github.com/rebalancer-dev/rebalancer/pkg/simulator"
	"github.com/rebalancer-dev/rebalancer/pkg/snapshot"
)

// LowerBound is the fewest nodes that could hold the cluster's pods: for each
// resource (CPU, memory, pod slots, extended resources such as GPUs), the
// number of nodes, largest first, whose capacity adds up to the total
// request; the max over resources. A node's capacity is its allocatable less
// the requests of the pods bound to it (DaemonSet and mirror pods, which run
// on every node anyway). Cordoned nodes and nodes with NoSchedule or
// NoExecute taints are left out. Pending pods count: they need room too.
// When the nodes cannot hold the requests at all, it is the number of nodes.
func LowerBound(snap *snapshot.Snapshot) int {
	capacity := map[string]v1.ResourceList{}
	for _, n := range snap.Nodes {
		if usable(n) {
			capacity[n.Name] = n.Status.Allocatable.DeepCopy()
		}
	}
	demand := map[v1.ResourceName]int64{}
	for _, p := range snap.Pods {
		if terminal(p) {
			continue
		}
		requests := resourcehelper.PodRequests(p, resourcehelper.PodResourcesOptions{})
		if simulator.NodeBound(p) {
			if c, ok := capacity[p.Spec.NodeName]; ok {
				for r, q := range requests {
					left := c[r]
					left.Sub(q)
					c[r] = left
				}
				pods := c[v1.ResourcePods]
				pods.Set(pods.Value() - 1)
				c[v1.ResourcePods] = pods
			}
			continue
		}
		for r, q := range requests {
			demand[r] += value(r, q)
		}
		demand[v1.ResourcePods]++
	}
	bound := 0
	for r, need := range demand {
		if need <= 0 {
			continue
		}
		var sizes []int64
		for _, c := range capacity {
			if q, ok := c[r]; ok && value(r, q) > 0 {
				sizes = append(sizes, value(r, q))
			}
		}
		sort.Slice(sizes, func(i, j int) bool { return sizes[i] > sizes[j] })
		n, sum := len(snap.Nodes), int64(0)
		for i, s := range sizes {
			if sum += s; sum >= need {
				n = i + 1
				break
			}
		}
		bound = max(bound, n)
	}
	return bound
}

// value is a quantity in the unit kube-scheduler counts it: CPU in millicores.
func value(r v1.ResourceName, q resource.Quantity) int64 {
	if r == v1.ResourceCPU {
		return q.MilliValue()
	}
	return q.Value()
}

func usable(n *v1.Node) bool {
	if n.Spec.Unschedulable {
		return false
	}
	for _, t := range n.Spec.Taints {
		if t.Effect == v1.TaintEffectNoSchedule || t.Effect == v1.TaintEffectNoExecute {
			return false
		}
	}
	return true
}
