package main

import (
	"fmt"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

func testNode(name string, unschedulable bool) *v1.Node {
	capacity := v1.ResourceList{v1.ResourceCPU: resource.MustParse("8"), v1.ResourceMemory: resource.MustParse("32Gi"), v1.ResourcePods: resource.MustParse("110")}
	return &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: v1.NodeSpec{Unschedulable: unschedulable},
		Status: v1.NodeStatus{Allocatable: capacity}}
}

func testPod(name, node, cpu, mem string) *v1.Pod {
	return &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: v1.PodSpec{NodeName: node, Containers: []v1.Container{{Name: "c",
		Resources: v1.ResourceRequirements{Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse(cpu), v1.ResourceMemory: resource.MustParse(mem)}}}}}}
}

func TestLowerBound(t *testing.T) {
	nodes := []*v1.Node{testNode("a", false), testNode("b", false), testNode("c", false), testNode("d", true)}
	var pods []*v1.Pod
	// 17 CPUs: three 8-CPU nodes at least; memory needs fewer.
	for i := range 17 {
		pods = append(pods, testPod(fmt.Sprint("p", i), "", "1", "1Gi"))
	}
	if got := lowerBound(nodes, pods); got != 3 {
		t.Errorf("bound %d, want 3", got)
	}
	// A DaemonSet's pod is on every node anyway: not counted.
	ds := testPod("ds", "a", "4", "1Gi")
	ds.OwnerReferences = []metav1.OwnerReference{{Kind: "DaemonSet", Name: "ds", Controller: ptr.To(true)}}
	if got := lowerBound(nodes, append(pods[:16], ds)); got != 2 {
		t.Errorf("bound %d with a DaemonSet pod, want 2", got)
	}
	// Memory can decide: 5 pods of 10Gi need two 32Gi nodes.
	var big []*v1.Pod
	for i := range 5 {
		big = append(big, testPod(fmt.Sprint("m", i), "", "100m", "10Gi"))
	}
	if got := lowerBound(nodes, big); got != 2 {
		t.Errorf("bound %d by memory, want 2", got)
	}
}

func TestFitsSomewhere(t *testing.T) {
	nodes := []*v1.Node{testNode("a", false), testNode("b", true)}
	pods := []*v1.Pod{testPod("x", "a", "6", "1Gi"), testPod("y", "b", "1", "1Gi")}
	rooms := room(nodes, pods)
	if len(rooms) != 1 || rooms["a"].cpu != 2000 {
		t.Fatalf("rooms %v, want node a with 2 CPUs free and no cordoned node", rooms)
	}
	if !fitsSomewhere(testPod("fits", "", "2", "1Gi"), rooms) {
		t.Error("a 2-CPU pod does not fit in 2 free CPUs")
	}
	if fitsSomewhere(testPod("big", "", "2500m", "1Gi"), rooms) {
		t.Error("a 2.5-CPU pod fits in 2 free CPUs")
	}
}
