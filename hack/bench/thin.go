package main

// The thin fleet: the most common shape there is, identical nodes each
// running many small pods, where no node is above any threshold and every
// node holds more pods than a per-node eviction limit of 10.

import (
	"context"
	"fmt"
	"math/rand/v2"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/rebalancer-dev/rebalancer/pkg/plan"
	"github.com/rebalancer-dev/rebalancer/pkg/snapshot"
)

// thinPodsPerNode are the pods of each thin node; thinPodsPerOwner the
// replicas of each ReplicaSet, spread over the fleet.
const (
	thinPodsPerNode  = 30
	thinPodsPerOwner = 300
)

// thinFleet is nodes identical 32-CPU, 128 GiB nodes, each with 30 pods of
// 100 to 500 millicores (memory twice that in MiB), owned by ReplicaSets of
// 300 pods in 20 namespaces, for rebalancer-scheduler.
func thinFleet(nodes int) *snapshot.Snapshot {
	r := rand.New(rand.NewPCG(seed, seed))
	snap := &snapshot.Snapshot{}
	for i := range 20 {
		snap.Namespaces = append(snap.Namespaces, &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("team-%d", i)}})
	}
	owners := max(1, nodes*thinPodsPerNode/thinPodsPerOwner)
	for i := range nodes {
		name := fmt.Sprintf("thin-%05d", i)
		snap.Nodes = append(snap.Nodes, fleetNode(name, "32", "128Gi"))
		for j := range thinPodsPerNode {
			owner := r.IntN(owners)
			milli := []int64{100, 200, 250, 300, 400, 500}[r.IntN(6)]
			snap.Pods = append(snap.Pods, replicaPod(fmt.Sprintf("app%d-%d-%d", owner, i, j), owner, name, v1.ResourceList{
				v1.ResourceCPU:    *resource.NewMilliQuantity(milli, resource.DecimalSI),
				v1.ResourceMemory: *resource.NewQuantity(2*milli<<20, resource.BinarySI)}))
		}
	}
	return snap
}

// fleetNode is a Ready node of cpu and memory, and room for 110 pods.
func fleetNode(name, cpu, memory string) *v1.Node {
	capacity := v1.ResourceList{v1.ResourceCPU: resource.MustParse(cpu), v1.ResourceMemory: resource.MustParse(memory), v1.ResourcePods: resource.MustParse("110")}
	return &v1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{v1.LabelHostname: name}},
		Status: v1.NodeStatus{Capacity: capacity, Allocatable: capacity,
			Conditions: []v1.NodeCondition{{Type: v1.NodeReady, Status: v1.ConditionTrue}}},
	}
}

// replicaPod is a running pod of ReplicaSet app<owner>, in namespace
// team-<owner mod 20>, on node, for rebalancer-scheduler.
func replicaPod(name string, owner int, node string, requests v1.ResourceList) *v1.Pod {
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: fmt.Sprintf("team-%d", owner%20), UID: types.UID(name),
			Labels: map[string]string{"app": fmt.Sprintf("app%d", owner)},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: fmt.Sprintf("app%d", owner),
				UID: types.UID(fmt.Sprintf("rs-%d", owner)), Controller: ptr.To(true)}}},
		Spec: v1.PodSpec{NodeName: node, SchedulerName: "rebalancer-scheduler", Containers: []v1.Container{{Name: "app", Image: "app",
			Resources: v1.ResourceRequirements{Requests: requests}}}},
		Status: v1.PodStatus{Phase: v1.PodRunning},
	}
}

// timedPlan plans snap with the shipped bin-packing pair, as `rebalancer
// plan --snapshot` does once the file is decoded, and times it.
func timedPlan(ctx context.Context, snap *snapshot.Snapshot) (*plan.Plan, float64, error) {
	start := time.Now()
	p, err := planAsUsers(ctx, policyFile, snap)
	return p, time.Since(start).Seconds(), err
}

// benchThin plans the thin fleet with the shipped bin-packing pair.
func benchThin(ctx context.Context, nodes int) (measurement, error) {
	p, seconds, err := timedPlan(ctx, thinFleet(nodes))
	if err != nil {
		return measurement{}, err
	}
	return measurement{Seconds: seconds, Count: len(p.Moves), Value: float64(p.Summary.NodesInUseBefore - p.Summary.NodesInUseAfter)}, nil
}
