package harness

import (
	"testing"

	v1 "k8s.io/api/core/v1"
)

func TestReady(t *testing.T) {
	node := KWOKNode("n1", "run.example/node", 8000, "32Gi")
	if Ready(node) {
		t.Error("a node without a Ready condition counts as ready")
	}
	node.Status.Conditions = []v1.NodeCondition{{Type: v1.NodeReady, Status: v1.ConditionTrue}}
	if !Ready(node) {
		t.Error("a Ready KWOK node (its own taint only) does not count")
	}
	node.Spec.Taints = append(node.Spec.Taints, v1.Taint{Key: v1.TaintNodeNotReady, Effect: v1.TaintEffectNoSchedule})
	if Ready(node) {
		t.Error("a node the lifecycle controller still taints not-ready counts as ready")
	}
	if node.Labels["run.example/node"] != "true" || node.Spec.Taints[0].Key != KWOKTaint || node.Status.Allocatable.Cpu().MilliValue() != 8000 {
		t.Errorf("KWOKNode: %+v", node)
	}
}
