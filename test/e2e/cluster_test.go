//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
	utilrand "k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
)

const (
	schedulerName = "rebalancer-scheduler"
	// testLabel marks every node of one test, so its pods stay on its nodes.
	testLabel = "e2e.rebalancer.dev/test"
	pollEvery = 100 * time.Millisecond
)

// testEnv is the namespace and node group of one test, removed at its end.
type testEnv struct {
	t    *testing.T
	ctx  context.Context
	ns   string
	name string // value of testLabel on this test's nodes
}

func newTestEnv(t *testing.T) *testEnv {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	t.Cleanup(cancel)
	// Unique per run: a namespace of an earlier run may still be terminating.
	name := strings.ToLower(strings.NewReplacer("/", "-", "_", "-").Replace(t.Name()))
	if len(name) > 50 {
		name = name[:50]
	}
	name = strings.TrimRight(name, "-") + "-" + utilrand.String(5)
	e := &testEnv{t: t, ctx: ctx, ns: name, name: name}
	if _, err := client.CoreV1().Namespaces().Create(ctx, &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx := context.Background()
		_ = client.CoreV1().Namespaces().Delete(ctx, name, metav1.DeleteOptions{})
		_ = client.CoreV1().Nodes().DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{LabelSelector: testLabel + "=" + name})
	})
	// Pods are rejected until the namespace's default ServiceAccount exists.
	e.poll("serviceaccount default", func() (bool, error) {
		_, err := client.CoreV1().ServiceAccounts(name).Get(ctx, "default", metav1.GetOptions{})
		return err == nil, nil
	})
	return e
}

// poll waits for cond, failing the test after a minute.
func (e *testEnv) poll(what string, cond func() (bool, error)) {
	e.t.Helper()
	e.pollFor(what, time.Minute, cond)
}

// pollFor waits for cond, failing the test after timeout.
func (e *testEnv) pollFor(what string, timeout time.Duration, cond func() (bool, error)) {
	e.t.Helper()
	err := wait.PollUntilContextTimeout(e.ctx, pollEvery, timeout, true, func(context.Context) (bool, error) { return cond() })
	if err != nil {
		e.t.Fatalf("waiting for %s: %v", what, err)
	}
}

// uidsOf is the set of the pods' UIDs: a pod missing from a later list
// was evicted, one not in the set is a replacement.
func uidsOf(pods []v1.Pod) map[string]bool {
	out := make(map[string]bool, len(pods))
	for _, p := range pods {
		out[string(p.UID)] = true
	}
	return out
}

func resources(cpu, memory string) v1.ResourceList {
	return v1.ResourceList{v1.ResourceCPU: resource.MustParse(cpu), v1.ResourceMemory: resource.MustParse(memory)}
}

// nodeNames are n node names of this test, prefix-SUFFIX-0 to -(n-1):
// cluster-scoped, so unique to the run (a node of an earlier run may still
// be going away).
func (e *testEnv) nodeNames(prefix string, n int) []string {
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("%s-%s-%d", prefix, e.name[len(e.name)-5:], i)
	}
	return names
}

// addNodes creates KWOK nodes with the given CPU each and 32Gi of memory and
// waits until they are Ready.
func (e *testEnv) addNodes(cpu string, names ...string) {
	e.t.Helper()
	for _, n := range names {
		capacity := resources(cpu, "32Gi")
		capacity[v1.ResourcePods] = resource.MustParse("110")
		node := &v1.Node{
			ObjectMeta: metav1.ObjectMeta{
				Name:        n,
				Annotations: map[string]string{"kwok.x-k8s.io/node": "fake", "node.alpha.kubernetes.io/ttl": "0"},
				Labels:      map[string]string{"kubernetes.io/hostname": n, "kubernetes.io/os": "linux", "type": "kwok", testLabel: e.name},
			},
			Spec:   v1.NodeSpec{Taints: []v1.Taint{{Key: "kwok.x-k8s.io/node", Value: "fake", Effect: v1.TaintEffectNoSchedule}}},
			Status: v1.NodeStatus{Capacity: capacity, Allocatable: capacity},
		}
		if _, err := client.CoreV1().Nodes().Create(e.ctx, node, metav1.CreateOptions{}); err != nil {
			e.t.Fatal(err)
		}
	}
	e.poll("nodes Ready", func() (bool, error) {
		for _, n := range names {
			node, err := client.CoreV1().Nodes().Get(e.ctx, n, metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			ready := false
			for _, c := range node.Status.Conditions {
				ready = ready || (c.Type == v1.NodeReady && c.Status == v1.ConditionTrue)
			}
			// The node lifecycle controller taints new nodes not-ready until kwok reports them.
			for _, taint := range node.Spec.Taints {
				if strings.HasPrefix(taint.Key, "node.kubernetes.io/") {
					ready = false
				}
			}
			if !ready {
				return false, nil
			}
		}
		return true, nil
	})
}

// addPDB gives the pods of app a PodDisruptionBudget requiring all of its
// pods available, and waits until the disruption controller has computed it.
func (e *testEnv) addPDB(app string, pods int32) {
	e.t.Helper()
	pdb := &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Name: app, Namespace: e.ns},
		Spec: policyv1.PodDisruptionBudgetSpec{
			MinAvailable: ptr.To(intstr.FromInt32(pods)),
			Selector:     &metav1.LabelSelector{MatchLabels: map[string]string{"app": app}},
		},
	}
	if _, err := client.PolicyV1().PodDisruptionBudgets(e.ns).Create(e.ctx, pdb, metav1.CreateOptions{}); err != nil {
		e.t.Fatal(err)
	}
	e.poll("the disruption controller to compute the PDB", func() (bool, error) {
		got, err := client.PolicyV1().PodDisruptionBudgets(e.ns).Get(e.ctx, app, metav1.GetOptions{})
		return err == nil && got.Status.ObservedGeneration == got.Generation && got.Status.ExpectedPods == pods, err
	})
}

// podSpec runs on this test's KWOK nodes only.
func (e *testEnv) podSpec(scheduler string, requests v1.ResourceList) v1.PodSpec {
	return v1.PodSpec{
		SchedulerName: scheduler,
		NodeSelector:  map[string]string{testLabel: e.name},
		Tolerations:   []v1.Toleration{{Key: "kwok.x-k8s.io/node", Operator: v1.TolerationOpExists, Effect: v1.TaintEffectNoSchedule}},
		Containers:    []v1.Container{{Name: "app", Image: "registry.k8s.io/pause:3.10", Resources: v1.ResourceRequirements{Requests: requests}}},
	}
}

// addDeployment creates a Deployment scheduled by rebalancer-scheduler.
func (e *testEnv) addDeployment(name string, replicas int32, requests v1.ResourceList) {
	e.t.Helper()
	e.addDeploymentOf(schedulerName, name, replicas, requests, nil)
}

// addDeploymentOf creates a Deployment whose pods name scheduler and carry
// annotations.
func (e *testEnv) addDeploymentOf(scheduler, name string, replicas int32, requests v1.ResourceList, annotations map[string]string) {
	e.t.Helper()
	sel := map[string]string{"app": name}
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: e.ns},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(replicas),
			Selector: &metav1.LabelSelector{MatchLabels: sel},
			Template: v1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: sel, Annotations: annotations}, Spec: e.podSpec(scheduler, requests)},
		},
	}
	if _, err := client.AppsV1().Deployments(e.ns).Create(e.ctx, d, metav1.CreateOptions{}); err != nil {
		e.t.Fatal(err)
	}
}

// addPinnedPod creates a pod bound to node directly (no scheduler), to make a
// node fuller than the others.
func (e *testEnv) addPinnedPod(name, node string, requests v1.ResourceList) {
	e.t.Helper()
	spec := e.podSpec("", requests)
	spec.NodeName = node
	p := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: e.ns}, Spec: spec}
	if _, err := client.CoreV1().Pods(e.ns).Create(e.ctx, p, metav1.CreateOptions{}); err != nil {
		e.t.Fatal(err)
	}
}

// boundPods waits until exactly n pods matching app are bound and not
// terminating, and returns them.
func (e *testEnv) boundPods(app string, n int) []v1.Pod {
	e.t.Helper()
	var pods []v1.Pod
	e.poll(fmt.Sprintf("%d bound pods of %s", n, app), func() (bool, error) {
		list, err := client.CoreV1().Pods(e.ns).List(e.ctx, metav1.ListOptions{LabelSelector: labels.Set{"app": app}.String()})
		if err != nil {
			return false, err
		}
		pods = pods[:0]
		for _, p := range list.Items {
			if p.DeletionTimestamp == nil && p.Spec.NodeName != "" {
				pods = append(pods, p)
			}
		}
		return len(pods) == n && len(list.Items) == n, nil
	})
	return pods
}

// perNode counts pods by node, as "node=count" sorted by node, for messages.
func perNode(pods []v1.Pod) (map[string]int, string) {
	m := map[string]int{}
	for _, p := range pods {
		m[p.Spec.NodeName]++
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s=%d", k, m[k]))
	}
	return m, strings.Join(parts, " ")
}

// deletePodAndWait deletes a pod and waits until it is gone.
func (e *testEnv) waitGone(name string) {
	e.t.Helper()
	e.poll("pod "+name+" gone", func() (bool, error) {
		_, err := client.CoreV1().Pods(e.ns).Get(e.ctx, name, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
}

// taintForMaintenance puts a NoSchedule taint on a node, as an operator
// does before maintenance: the pods on it no longer tolerate their node.
func (e *testEnv) taintForMaintenance(name string) {
	e.t.Helper()
	// KWOK and the controllers write the node too: read it again on a
	// conflict, as kubectl does.
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		node, err := client.CoreV1().Nodes().Get(e.ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		node.Spec.Taints = append(node.Spec.Taints, v1.Taint{Key: "e2e.rebalancer.dev/maintenance", Effect: v1.TaintEffectNoSchedule})
		_, err = client.CoreV1().Nodes().Update(e.ctx, node, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		e.t.Fatal(err)
	}
}
