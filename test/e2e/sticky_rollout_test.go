//go:build e2e

package e2e

import (
	"fmt"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"

	"github.com/rebalancer-dev/rebalancer/pkg/wellknown"
)

// TestStickyThroughARollingUpdate: `kubectl rollout restart` of a sticky
// Deployment of 6 replicas, spread 2 a node over 3 nodes, under the default
// RollingUpdate strategy (maxSurge and maxUnavailable 25%): the new pods
// are created while the old ones still run, or before they are marked for
// deletion. rebalancer-scheduler runs bin-packing, which prefers a fourth,
// fuller node; the new pods go back to the nodes the old ones leave, one
// new pod per old pod. roomy: each node has room for its old pods and new
// ones side by side. tight: each has room for one surge pod beside its two
// old pods, so a node's second new pod fits only once an old pod left
// there, and meanwhile another old pod's node is taken.
func TestStickyThroughARollingUpdate(t *testing.T) {
	for _, tc := range []struct {
		name, homeCPU string
	}{
		{"roomy", "8"},
		{"tight", "3"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			needScheduler(t)
			e := newTestEnv(t)
			nodes := e.nodeNames("rolling", 4)
			homes, full := nodes[:3], nodes[3]
			const onEach, replicas = 2, 6
			old := e.deploymentOnEach(schedulerName, "cache", tc.homeCPU, homes, onEach, map[string]string{wellknown.StickyAnnotation: "true"})
			oldNodes, oldDesc := perNode(old)
			for _, home := range homes {
				if oldNodes[home] != onEach {
					t.Fatalf("old pods %s, want %d on each of %v", oldDesc, onEach, homes)
				}
			}
			// The node bin-packing prefers for any new pod.
			e.addNodes("8", full)
			e.fragmentedReplicaSet("filler", resources("5", "1Gi"), []string{full})
			e.boundPods("filler", 1)

			if back := e.rolloutRestart("cache", old); back < replicas-1 {
				t.Errorf("%d of %d new pods on a node an old pod left, want at least %d", back, replicas, replicas-1)
			}
		})
	}
}

// deploymentOnEach creates Deployment name of scheduler with onEach pods of
// 1 CPU on each of homes, nodes of cpu CPUs it adds: each node joins alone,
// the ones before it cordoned, and the Deployment grows by onEach. It
// returns the pods, all bound.
func (e *testEnv) deploymentOnEach(scheduler, name, cpu string, homes []string, onEach int, annotations map[string]string) []v1.Pod {
	e.t.Helper()
	for i, home := range homes {
		e.addNodes(cpu, home)
		n := int32((i + 1) * onEach)
		if i == 0 {
			e.addDeploymentOf(scheduler, name, n, resources("1", "1Gi"), annotations)
		} else {
			patch := fmt.Sprintf(`{"spec":{"replicas":%d}}`, n)
			if _, err := client.AppsV1().Deployments(e.ns).Patch(e.ctx, name, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
				e.t.Fatal(err)
			}
		}
		e.boundPods(name, int(n))
		e.cordon(home, true)
	}
	for _, home := range homes {
		e.cordon(home, false)
	}
	return e.boundPods(name, onEach*len(homes))
}

// rolloutRestart does what `kubectl rollout restart` does to Deployment
// name, whose pods are old, waits until only new pods remain, all bound,
// and returns how many of them run on a node an old pod ran on (a node
// counted as often as old pods ran there).
func (e *testEnv) rolloutRestart(name string, old []v1.Pod) int {
	e.t.Helper()
	restart := fmt.Sprintf(`{"spec":{"template":{"metadata":{"annotations":{"kubectl.kubernetes.io/restartedAt":%q}}}}}`, time.Now().Format(time.RFC3339Nano))
	if _, err := client.AppsV1().Deployments(e.ns).Patch(e.ctx, name, types.StrategicMergePatchType, []byte(restart), metav1.PatchOptions{}); err != nil {
		e.t.Fatal(err)
	}
	oldHash := old[0].Labels[appsv1.DefaultDeploymentUniqueLabelKey]
	var rolled []v1.Pod
	e.poll("the rolling update of "+name, func() (bool, error) {
		list, err := client.CoreV1().Pods(e.ns).List(e.ctx, metav1.ListOptions{LabelSelector: "app=" + name})
		if err != nil {
			return false, err
		}
		rolled = rolled[:0]
		for _, p := range list.Items {
			if p.Labels[appsv1.DefaultDeploymentUniqueLabelKey] == oldHash || p.DeletionTimestamp != nil || p.Spec.NodeName == "" {
				return false, nil
			}
			rolled = append(rolled, p)
		}
		return len(rolled) == len(old), nil
	})
	oldNodes, oldDesc := perNode(old)
	newNodes, newDesc := perNode(rolled)
	back := 0
	for node, n := range newNodes {
		back += min(n, oldNodes[node])
	}
	e.t.Logf("old pods %s; new pods %s: %d of %d on an old pod's node", oldDesc, newDesc, back, len(old))
	return back
}

// cordon marks a node unschedulable, or schedulable again.
func (e *testEnv) cordon(name string, unschedulable bool) {
	e.t.Helper()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		node, err := client.CoreV1().Nodes().Get(e.ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		node.Spec.Unschedulable = unschedulable
		_, err = client.CoreV1().Nodes().Update(e.ctx, node, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		e.t.Fatal(err)
	}
}
