//go:build e2e

package e2e

import (
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/rebalancer-dev/rebalancer/pkg/plan"
	"github.com/rebalancer-dev/rebalancer/pkg/wellknown"
)

// TestStickyPlacement: rebalancer-scheduler runs the bin-packing profile,
// which prefers the fullest node. A sticky Deployment's pod, deleted by
// hand, comes back to its node all the same; a pod of a Deployment that is
// not sticky, deleted beside it, goes to the fullest node. Then the sticky
// pod's node is tainted: `run --once` moves the pod off it (a deschedule
// plugin's violation outranks stickiness) to the planned node, where its
// replacement lands.
func TestStickyPlacement(t *testing.T) {
	needScheduler(t)
	e := newTestEnv(t)
	nodes := e.nodeNames("sticky", 3)
	home, full := nodes[0], nodes[1]
	// Both Deployments' pods first, onto the only node there is.
	e.addNodes("8", home)
	e.addDeploymentOf(schedulerName, "cache", 1, resources("1", "1Gi"), map[string]string{wellknown.StickyAnnotation: "true"})
	e.addDeploymentOf(schedulerName, "plain", 1, resources("1", "1Gi"), nil)
	cache, plainPod := e.boundPods("cache", 1)[0], e.boundPods("plain", 1)[0]
	// Then a fuller node, which bin-packing prefers for any new pod.
	e.addNodes("8", full, nodes[2])
	e.fragmentedReplicaSet("filler", resources("5", "1Gi"), []string{full})
	e.boundPods("filler", 1)

	for _, p := range []v1.Pod{cache, plainPod} {
		if err := client.CoreV1().Pods(e.ns).Delete(e.ctx, p.Name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	replacement := func(app string, old v1.Pod) v1.Pod {
		t.Helper()
		var got v1.Pod
		e.poll("the replacement of "+old.Name, func() (bool, error) {
			for _, p := range e.boundPods(app, 1) {
				if p.UID != old.UID {
					got = p
					return true, nil
				}
			}
			return false, nil
		})
		return got
	}
	back := replacement("cache", cache)
	if back.Spec.NodeName != home {
		t.Errorf("the sticky pod's replacement landed on %s, want its node %s", back.Spec.NodeName, home)
	}
	control := replacement("plain", plainPod)
	if control.Spec.NodeName != full {
		t.Errorf("the control's replacement landed on %s, want the profile's choice %s", control.Spec.NodeName, full)
	}
	t.Logf("deleted by hand: sticky pod back on %s, control on %s", back.Spec.NodeName, control.Spec.NodeName)

	// Its node tainted, the sticky pod is moved off by the taint plugin,
	// to the planned node, not back.
	e.taintForMaintenance(home)
	res := runOnce(t)
	var moved *plan.Move
	for i, m := range res.Plan.Moves {
		if m.Namespace == e.ns && m.Name == back.Name {
			moved = &res.Plan.Moves[i]
		}
	}
	if moved == nil || moved.Strategy != "RemovePodsViolatingNodeTaints" || moved.Source != home || moved.Target == home {
		t.Fatalf("the sticky pod's move: %+v; want it off the tainted %s by RemovePodsViolatingNodeTaints (moves %+v)", moved, home, res.Plan.Moves)
	}
	final := replacement("cache", back)
	if final.Spec.NodeName != moved.Target {
		t.Errorf("the sticky pod's replacement landed on %s, planned on %s", final.Spec.NodeName, moved.Target)
	}
	t.Logf("tainted: sticky pod moved %s → %s, landed on %s", moved.Source, moved.Target, final.Spec.NodeName)
}

// TestStickyThroughARollout: a rollout replaces a sticky Deployment's
// ReplicaSet; each new pod, created as an old one leaves, comes back to the
// node the old one left, though bin-packing prefers another node.
func TestStickyThroughARollout(t *testing.T) {
	needScheduler(t)
	e := newTestEnv(t)
	nodes := e.nodeNames("rollout", 2)
	home, full := nodes[0], nodes[1]
	e.addNodes("8", home)
	const replicas = 3
	e.addDeploymentOf(schedulerName, "cache", replicas, resources("1", "1Gi"), map[string]string{wellknown.StickyAnnotation: "true"})
	old := e.boundPods("cache", replicas)
	e.addNodes("8", full)
	e.fragmentedReplicaSet("filler", resources("4", "1Gi"), []string{full})
	e.boundPods("filler", 1)

	// Recreate: the new pods are created once the old ones are gone. (A
	// rolling update gives no such order, even with maxSurge 0: the
	// Deployment controller scales the new ReplicaSet up as soon as it has
	// scaled the old one down, and the two ReplicaSets' syncs race.)
	deployments := client.AppsV1().Deployments(e.ns)
	d, err := deployments.Get(e.ctx, "cache", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	d.Spec.Strategy = appsv1.DeploymentStrategy{Type: appsv1.RecreateDeploymentStrategyType}
	d.Spec.Template.Annotations["example.com/revision"] = "2"
	if _, err := deployments.Update(e.ctx, d, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	oldHash := old[0].Labels[appsv1.DefaultDeploymentUniqueLabelKey]
	var rolled []v1.Pod
	e.poll("the rollout", func() (bool, error) {
		rolled = rolled[:0]
		for _, p := range e.boundPods("cache", replicas) {
			if p.Labels[appsv1.DefaultDeploymentUniqueLabelKey] == oldHash {
				return false, nil
			}
			rolled = append(rolled, p)
		}
		return true, nil
	})
	for _, p := range rolled {
		if p.Spec.NodeName != home {
			t.Errorf("after the rollout %s landed on %s, want the node its predecessor left, %s", p.Name, p.Spec.NodeName, home)
		}
	}
}
