package simulator

import (
	"fmt"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/rebalancer-dev/rebalancer/pkg/snapshot"
)

func lowerBound(t *testing.T, snap *snapshot.Snapshot) int {
	t.Helper()
	n, err := newSim(t, "binpacking-scheduler.yaml", snap).LowerBound()
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func TestLowerBound(t *testing.T) {
	node := func(name, cpu, mem string, taint bool) *v1.Node {
		n := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}, Status: v1.NodeStatus{Allocatable: v1.ResourceList{
			v1.ResourceCPU: resource.MustParse(cpu), v1.ResourceMemory: resource.MustParse(mem), v1.ResourcePods: resource.MustParse("110")}}}
		if taint {
			n.Spec.Taints = []v1.Taint{{Key: "maintenance", Effect: v1.TaintEffectNoSchedule}}
		}
		return n
	}
	pod := func(i int, node, kind, cpu, mem string) *v1.Pod {
		return &v1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprint("p", i), Namespace: "ns", UID: types.UID(fmt.Sprint("u", i)),
				OwnerReferences: []metav1.OwnerReference{{Kind: kind, Name: "o", Controller: new(true)}}},
			Spec: v1.PodSpec{NodeName: node, Containers: []v1.Container{{Resources: v1.ResourceRequirements{Requests: v1.ResourceList{
				v1.ResourceCPU: resource.MustParse(cpu), v1.ResourceMemory: resource.MustParse(mem)}}}}},
		}
	}
	snap := &snapshot.Snapshot{Nodes: []*v1.Node{
		node("a", "8", "8Gi", false), node("b", "8", "64Gi", false), node("c", "4", "8Gi", false), node("tainted", "64", "64Gi", true),
	}}
	for i, n := range []string{"a", "b", "c", "tainted"} {
		snap.Pods = append(snap.Pods, pod(i, n, "DaemonSet", "1", "1Gi"))
	}
	// 10 CPUs of workload: a and b have 7 each after their DaemonSet pods.
	snap.Pods = append(snap.Pods, pod(10, "a", "ReplicaSet", "6", "1Gi"), pod(11, "", "ReplicaSet", "4", "1Gi"))
	if got := lowerBound(t, snap); got != 2 {
		t.Errorf("lower bound = %d, want 2 (CPU: 10 of 7+7)", got)
	}
	// 60Gi of memory: only b (63Gi free) holds it... with one other node's CPU.
	snap.Pods = append(snap.Pods, pod(12, "b", "ReplicaSet", "0", "60Gi"))
	if got := lowerBound(t, snap); got != 2 {
		t.Errorf("lower bound = %d, want 2", got)
	}
	snap.Pods = append(snap.Pods, pod(13, "", "ReplicaSet", "7", "1Gi"))
	if got := lowerBound(t, snap); got != 3 {
		t.Errorf("lower bound = %d, want 3 (CPU 17: all of a, b and c)", got)
	}
	snap.Pods = append(snap.Pods, pod(14, "", "ReplicaSet", "100", "1Gi"))
	if got := lowerBound(t, snap); got != 4 {
		t.Errorf("lower bound = %d, want all 4 nodes when the requests do not fit", got)
	}
}
