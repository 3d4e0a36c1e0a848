package disruption

import (
	"math"
	"strconv"

	v1 "k8s.io/api/core/v1"
)

// Cost is what evicting the pod costs, on the scale Karpenter's
// consolidation uses, so that a cluster tuned for one reads the same to
// the other: 1 for any pod, plus its controller.kubernetes.io/pod-deletion-cost
// over 2^27 (the ReplicaSet controller's own int32 annotation: 2^30 counts
// 8 pods more), plus its priority over 2^25 (2^25 counts one pod more), the
// sum clamped to [-10, 10]: system-cluster-critical's 2,000,000,000 costs
// 10. An annotation that is not an int32 counts nothing, as the
// ReplicaSet controller reads it.
func Cost(pod *v1.Pod) float64 {
	cost := 1.0
	if s, ok := pod.Annotations[v1.PodDeletionCost]; ok {
		if n, err := strconv.ParseInt(s, 10, 32); err == nil {
			cost += float64(n) / (1 << 27)
		}
	}
	if pod.Spec.Priority != nil {
		cost += float64(*pod.Spec.Priority) / (1 << 25)
	}
	return math.Max(-10, math.Min(10, cost))
}
