package planner

import (
	"fmt"

	v1 "k8s.io/api/core/v1"
	"sigs.k8s.io/descheduler/pkg/descheduler/evictions"

	"github.com/rebalancer-dev/rebalancer/pkg/snapshot"
)

// evictingInBackground says the pod's owner is evicting it in the
// background: it asked for an eviction to be answered by an evacuation
// (KubeVirt migrates a VM live) and marks the pod until it is gone. Like
// the descheduler, rebalancer does not move such a pod again, and counts
// it against the policy's limits while it runs. A pod that has finished
// is not in flight.
func evictingInBackground(pod *v1.Pod) bool {
	_, marked := pod.Annotations[evictions.EvictionInProgressAnnotationKey]
	return marked && pod.Status.Phase != v1.PodSucceeded && pod.Status.Phase != v1.PodFailed
}

func evictingDetail(pod *v1.Pod) string {
	return fmt.Sprintf("its owner is evicting it in the background (annotation %s): it leaves %s on its own", evictions.EvictionInProgressAnnotationKey, pod.Spec.NodeName)
}

// countInFlight counts the evictions in the background of the cluster's
// bound pods against the limits per node, per namespace and in total, as
// the descheduler counts its eviction requests, and returns how many.
func (p *planner) countInFlight(state *snapshot.Snapshot) int {
	n := 0
	for _, pod := range state.Pods {
		if pod.Spec.NodeName == "" || !evictingInBackground(pod) {
			continue
		}
		n++
		p.total++
		p.perNode[pod.Spec.NodeName]++
		p.perNamespace[pod.Namespace]++
	}
	return n
}
