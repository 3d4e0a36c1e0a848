package disruption

import (
	"fmt"
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

// DrainBudget is maxDrainCostPercent applied to a cluster: emptying one
// node may cost at most Percent % of what a node in use costs to empty on
// average. Emptying one node of N saves 1/N of the nodes; at 200,
// Karpenter's k = 2, it may disrupt up to 2/N of them. Percent 0 is no
// limit.
type DrainBudget struct {
	Percent int32
	// Mean is what a node in use costs to empty on average.
	Mean float64
}

// NewDrainBudget is the budget of percent over the nodes in use, costs
// being what emptying each costs.
func NewDrainBudget(percent int32, costs []float64) DrainBudget {
	b := DrainBudget{Percent: percent}
	for _, c := range costs {
		b.Mean += c
	}
	if len(costs) > 0 {
		b.Mean /= float64(len(costs))
	}
	return b
}

// Allows says whether emptying a node that costs cost is within budget.
func (b DrainBudget) Allows(cost float64) bool {
	return b.Percent <= 0 || cost <= b.Mean*float64(b.Percent)/100
}

// Refusal says why emptying node, at cost, is not: the detail of its
// cost skip.
func (b DrainBudget) Refusal(node string, cost float64) string {
	return fmt.Sprintf("emptying node %s costs %s (its pods' evictions), above maxDrainCostPercent %d%% of the average node in use's %s",
		node, strconv.FormatFloat(cost, 'f', 2, 64), b.Percent, strconv.FormatFloat(b.Mean, 'f', 2, 64))
}

// Costliest is the pod whose eviction costs the most, the first of
// equals; nil when there is none.
func Costliest(pods []*v1.Pod) *v1.Pod {
	var out *v1.Pod
	for _, p := range pods {
		if out == nil || Cost(p) > Cost(out) {
			out = p
		}
	}
	return out
}
