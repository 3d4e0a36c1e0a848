// Package testutil builds the objects unit tests share: pods, nodes and a
// test's context. It exists so that each package's tests do not keep a
// private copy of the same builder. As in the descheduler's
// test/test_utils.go, a builder makes the common object and optional apply
// funcs make a test's own changes.
//
// Only tests import it. It imports no package of this repository, so that
// the tests of any package (pkg/simulator, pkg/planner...) can use it.
package testutil

import (
	"context"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/ktesting"
)

// BuildTestNode returns a Ready node labelled with its hostname, whose
// capacity and allocatable (one list) are cpu, memory and 110 pods, then
// applies apply in order.
func BuildTestNode(name, cpu, memory string, apply ...func(*v1.Node)) *v1.Node {
	rl := v1.ResourceList{v1.ResourceCPU: resource.MustParse(cpu), v1.ResourceMemory: resource.MustParse(memory), v1.ResourcePods: resource.MustParse("110")}
	n := &v1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{v1.LabelHostname: name}},
		Status:     v1.NodeStatus{Capacity: rl, Allocatable: rl, Conditions: []v1.NodeCondition{{Type: v1.NodeReady, Status: v1.ConditionTrue}}},
	}
	for _, f := range apply {
		f(n)
	}
	return n
}

// WithTaints sets the node's taints to taints, as given (nil stays nil).
func WithTaints(taints ...v1.Taint) func(*v1.Node) {
	return func(n *v1.Node) { n.Spec.Taints = taints }
}

// BuildTestPod returns a pod in namespace "default" of UID "uid-<name>",
// bound to nodeName ("" for a pending pod), with one container "c"
// requesting cpu and memory, then applies apply in order. It has no phase,
// labels, owner or scheduler name unless an apply func gives them.
func BuildTestPod(name, nodeName, cpu, memory string, apply ...func(*v1.Pod)) *v1.Pod {
	p := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: types.UID("uid-" + name)},
		Spec: v1.PodSpec{NodeName: nodeName, Containers: []v1.Container{{Name: "c", Resources: v1.ResourceRequirements{
			Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse(cpu), v1.ResourceMemory: resource.MustParse(memory)}}}}},
	}
	for _, f := range apply {
		f(p)
	}
	return p
}

// Running sets the pod's phase to Running.
func Running(p *v1.Pod) { p.Status.Phase = v1.PodRunning }

// WithScheduler sets the pod's spec.schedulerName.
func WithScheduler(name string) func(*v1.Pod) {
	return func(p *v1.Pod) { p.Spec.SchedulerName = name }
}

// WithLabels sets the pod's labels to labels itself, not a copy.
func WithLabels(labels map[string]string) func(*v1.Pod) {
	return func(p *v1.Pod) { p.Labels = labels }
}

// ControllerRef is a controller owner reference of APIVersion apps/v1,
// whatever kind says.
func ControllerRef(kind, name string, uid types.UID) metav1.OwnerReference {
	controller := true
	return metav1.OwnerReference{APIVersion: "apps/v1", Kind: kind, Name: name, UID: uid, Controller: &controller}
}

// Context returns a logger writing to t and a context carrying it,
// cancelled by a t.Cleanup registered here, when the test ends.
func Context(t testing.TB) (klog.Logger, context.Context) {
	logger, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	t.Cleanup(cancel)
	return logger, ctx
}
