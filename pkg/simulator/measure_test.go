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

// TestLowerBoundTaints: a tainted node counts when a pod to place
// tolerates its taints, and not when none does; cordoned nodes never.
func TestLowerBoundTaints(t *testing.T) {
	dedicated := v1.Taint{Key: "dedicated", Value: "batch", Effect: v1.TaintEffectNoSchedule}
	tolerating := []v1.Toleration{{Key: "dedicated", Operator: v1.TolerationOpEqual, Value: "batch", Effect: v1.TaintEffectNoSchedule}}
	cluster := func(tolerations []v1.Toleration, taints ...v1.Taint) *snapshot.Snapshot {
		snap := &snapshot.Snapshot{}
		for i := range 4 {
			snap.Nodes = append(snap.Nodes, &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprint("n", i)}, Spec: v1.NodeSpec{Taints: taints},
				Status: v1.NodeStatus{Allocatable: v1.ResourceList{v1.ResourceCPU: resource.MustParse("4"), v1.ResourceMemory: resource.MustParse("8Gi"), v1.ResourcePods: resource.MustParse("110")}}})
			snap.Pods = append(snap.Pods, &v1.Pod{
				ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprint("p", i), Namespace: "ns", UID: types.UID(fmt.Sprint("u", i)),
					OwnerReferences: []metav1.OwnerReference{{Kind: "ReplicaSet", Name: "o", Controller: new(true)}}},
				Spec: v1.PodSpec{NodeName: fmt.Sprint("n", i), Tolerations: tolerations, Containers: []v1.Container{{Resources: v1.ResourceRequirements{
					Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse("1"), v1.ResourceMemory: resource.MustParse("1Gi")}}}}},
			})
		}
		return snap
	}
	for _, tc := range []struct {
		name string
		snap *snapshot.Snapshot
		want int
	}{
		{"no taints", cluster(nil), 1},
		{"every node tainted, the taint tolerated", cluster(tolerating, dedicated), 1},
		{"every node tainted, the taint not tolerated", cluster(nil, dedicated), 4},
		{"NoExecute tolerated by Exists", cluster([]v1.Toleration{{Operator: v1.TolerationOpExists}}, v1.Taint{Key: "gpu", Effect: v1.TaintEffectNoExecute}), 1},
		{"one of two taints tolerated", cluster(tolerating, dedicated, v1.Taint{Key: "gpu", Effect: v1.TaintEffectNoSchedule}), 4},
		{"PreferNoSchedule keeps no pod off", cluster(nil, v1.Taint{Key: "soft", Effect: v1.TaintEffectPreferNoSchedule}), 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := lowerBound(t, tc.snap); got != tc.want {
				t.Errorf("lower bound = %d, want %d", got, tc.want)
			}
		})
	}
	// Some pods tolerate: the node may hold them, so it counts (a lower
	// bound may only err low).
	snap := cluster(nil, dedicated)
	snap.Pods[0].Spec.Tolerations = tolerating
	if got := lowerBound(t, snap); got != 1 {
		t.Errorf("one pod tolerating: lower bound = %d, want 1", got)
	}
	snap = cluster(nil)
	for _, n := range snap.Nodes[1:] {
		n.Spec.Unschedulable = true
	}
	snap.Pods = append(snap.Pods, snap.Pods[0].DeepCopy(), snap.Pods[0].DeepCopy(), snap.Pods[0].DeepCopy(), snap.Pods[0].DeepCopy())
	for i, p := range snap.Pods[4:] {
		p.Name, p.UID, p.Spec.NodeName = fmt.Sprint("extra", i), types.UID(fmt.Sprint("x", i)), ""
		p.Spec.Containers[0].Resources.Requests[v1.ResourceCPU] = resource.MustParse("2")
	}
	if got := lowerBound(t, snap); got != 4 {
		t.Errorf("three nodes cordoned, 12 CPUs asked of the one 4-CPU node left: lower bound = %d, want all 4", got)
	}
}
