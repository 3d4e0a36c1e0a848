package main

// The held fleet: a cluster no plugin may change, every pod under a PDB
// that allows no disruption, where nine nodes in ten are alike and
// underutilized. Each plugin is refused every eviction it asks for; the
// plan must say so in the time of a plan that acts, not walk the cluster
// once for each of the thousands of tied nodes.

import (
	"context"
	"fmt"

	v1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/rebalancer-dev/rebalancer/pkg/snapshot"
)

// heldPodsPerOwner are the replicas of each ReplicaSet of the held fleet.
const heldPodsPerOwner = 100

// heldFleet is nodes identical 8-CPU, 32 GiB nodes: every tenth busy, with
// six pods of a CPU and 2 GiB (75 %), the others with two (25 %, tied
// under HighNodeUtilization's 40 %). The pods, Ready, belong to
// ReplicaSets of 100 in 20 namespaces, each namespace's under a PDB that
// allows no disruption.
func heldFleet(nodes int) *snapshot.Snapshot {
	snap := &snapshot.Snapshot{}
	for i := range 20 {
		ns := fmt.Sprintf("team-%d", i)
		snap.Namespaces = append(snap.Namespaces, &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
		snap.PodDisruptionBudgets = append(snap.PodDisruptionBudgets, &policyv1.PodDisruptionBudget{
			ObjectMeta: metav1.ObjectMeta{Name: "all", Namespace: ns, Generation: 1},
			Spec:       policyv1.PodDisruptionBudgetSpec{MaxUnavailable: ptr.To(intstr.FromInt32(0)), Selector: &metav1.LabelSelector{}},
			Status:     policyv1.PodDisruptionBudgetStatus{ObservedGeneration: 1, DisruptionsAllowed: 0},
		})
	}
	request := v1.ResourceList{v1.ResourceCPU: resource.MustParse("1"), v1.ResourceMemory: resource.MustParse("2Gi")}
	n := 0
	for i := range nodes {
		name := fmt.Sprintf("held-%05d", i)
		snap.Nodes = append(snap.Nodes, fleetNode(name, "8", "32Gi"))
		pods := 2
		if i%10 == 0 {
			pods = 6
		}
		for range pods {
			owner := n / heldPodsPerOwner
			pod := replicaPod(fmt.Sprintf("app%d-%d", owner, n), owner, name, request)
			pod.Status.Conditions = []v1.PodCondition{{Type: v1.PodReady, Status: v1.ConditionTrue}} // PDBs count it
			snap.Pods = append(snap.Pods, pod)
			n++
		}
	}
	return snap
}

// benchHeld plans the held fleet with the shipped bin-packing pair. Count
// is the plan's moves, Value its refusals.
func benchHeld(ctx context.Context, nodes int) (measurement, error) {
	p, seconds, err := timedPlan(ctx, heldFleet(nodes))
	if err != nil {
		return measurement{}, err
	}
	return measurement{Seconds: seconds, Count: len(p.Moves), Value: float64(len(p.Skipped))}, nil
}
