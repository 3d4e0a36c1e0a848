// Package optout is the one place that knows the annotations by which users
// keep pods and nodes out of disruption. rebalancer honours the ones the
// cluster autoscaler and Karpenter already define, so a workload protected
// from them is protected from rebalancer too, and its own.
package optout

import (
	v1 "k8s.io/api/core/v1"

	"github.com/rebalancer-dev/rebalancer/pkg/wellknown"
)

// Annotations that opt out, with the value that does.
const (
	// SafeToEvict "false" on a pod: cluster-autoscaler does not evict it.
	SafeToEvict = "cluster-autoscaler.kubernetes.io/safe-to-evict"
	// ScaleDownDisabled "true" on a node: cluster-autoscaler does not
	// remove it.
	ScaleDownDisabled = "cluster-autoscaler.kubernetes.io/scale-down-disabled"
	// KarpenterDoNotDisrupt "true" on a pod or a node: Karpenter neither
	// evicts the pod nor disrupts the node.
	KarpenterDoNotDisrupt = "karpenter.sh/do-not-disrupt"
)

type rule struct{ key, value string }

var (
	podRules  = []rule{{SafeToEvict, "false"}, {KarpenterDoNotDisrupt, "true"}, {wellknown.DoNotDisruptAnnotation, "true"}}
	nodeRules = []rule{{ScaleDownDisabled, "true"}, {KarpenterDoNotDisrupt, "true"}, {wellknown.DoNotDisruptAnnotation, "true"}}
)

// Pod returns the annotation (as "key=value") by which the pod opts out of
// being moved, or "".
func Pod(pod *v1.Pod) string {
	if pod == nil {
		return ""
	}
	return match(pod.Annotations, podRules)
}

// Node returns the annotation by which the node opts out of having its pods
// moved off (being drained or balanced), or "".
func Node(node *v1.Node) string {
	if node == nil {
		return ""
	}
	return match(node.Annotations, nodeRules)
}

func match(annotations map[string]string, rules []rule) string {
	for _, r := range rules {
		if annotations[r.key] == r.value {
			return r.key + "=" + r.value
		}
	}
	return ""
}
