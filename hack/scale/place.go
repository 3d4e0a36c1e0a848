package main

import (
	"context"
	"fmt"
	"hash/fnv"
	"log"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/dump"
)

// packCeiling is how full placeFor packs a node with rebalancer-scheduler's
// pods (of its CPU, memory and pod slots).
const packCeiling = 0.9

// placement is where placeFor puts each pod: deployment index -> replica
// index -> node index.
type placement [][]int

// placeFor places the Deployments' pods as their schedulers would, roughly:
// default-scheduler's spread over every node in turn, then
// rebalancer-scheduler's (MostAllocated) packed onto the fewest nodes, each
// filled to packCeiling; a pod goes to the next node it fits. It fails
// when a pod fits nowhere.
func placeFor(deps []deployment, nodes int) (placement, error) {
	type room struct{ cpu, mem, pods int }
	free := make([]room, nodes)
	for i := range free {
		free[i] = room{cpu: nodeCPUMilli, mem: nodeCPUMilli * 4, pods: 110} // memory in MiB: 32 GiB
	}
	out := make(placement, len(deps))
	fits := func(n int, cpu, mem int, limit float64) bool {
		r := free[n]
		return float64(nodeCPUMilli-r.cpu+cpu) <= limit*nodeCPUMilli &&
			float64(nodeCPUMilli*4-r.mem+mem) <= limit*nodeCPUMilli*4 && float64(110-r.pods+1) <= limit*110
	}
	place := func(di int, start int, limit float64) (int, error) {
		d := deps[di]
		cpu, mem := d.MilliCPU, 2*d.MilliCPU
		for k := range nodes {
			n := (start + k) % nodes
			if fits(n, cpu, mem, limit) {
				free[n].cpu -= cpu
				free[n].mem -= mem
				free[n].pods--
				return n, nil
			}
		}
		return 0, fmt.Errorf("no room for a pod of %s/%s on %d nodes", d.Namespace, d.Name, nodes)
	}
	next := 0
	for di, d := range deps {
		if d.Scheduler != "default-scheduler" {
			continue
		}
		for range d.Replicas {
			n, err := place(di, next, 1)
			if err != nil {
				return nil, err
			}
			out[di] = append(out[di], n)
			next = n + 1
		}
	}
	first := 0
	for di, d := range deps {
		if d.Scheduler == "default-scheduler" {
			continue
		}
		for range d.Replicas {
			n, err := place(di, first, packCeiling)
			if err != nil {
				return nil, err
			}
			out[di] = append(out[di], n)
			first = n // the nodes before it are full
		}
	}
	return out, nil
}

// createBound creates the Deployments with their pods bound at creation
// to the nodes of placeFor, without the schedulers: the pods first, with
// the labels of the ReplicaSet each Deployment will make (its
// pod-template-hash, from the template as the API server defaults it), then
// the Deployments, whose ReplicaSets adopt them and create none.
// Scheduling 30,000 pods at 2,000 nodes took more than an hour on 2 shared
// cores.
func createBound(ctx context.Context, c kubernetes.Interface, deps []deployment, nodes int, timeout time.Duration) error {
	where, err := placeFor(deps, nodes)
	if err != nil {
		return err
	}
	hashes := make([]string, len(deps))
	err = parallel(ctx, len(deps), 8, func(ctx context.Context, i int) error {
		d := deps[i]
		dry, err := c.AppsV1().Deployments(d.Namespace).Create(ctx, deploymentObject(d), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		if err != nil {
			return err
		}
		hashes[i] = templateHash(&dry.Spec.Template)
		return nil
	})
	if err != nil {
		return fmt.Errorf("the Deployments, dry run: %w", err)
	}
	type job struct{ dep, replica int }
	var jobs []job
	for i, d := range deps {
		for r := range d.Replicas {
			jobs = append(jobs, job{i, r})
		}
	}
	t := time.Now()
	err = parallel(ctx, len(jobs), 32, func(ctx context.Context, k int) error {
		j := jobs[k]
		pod := boundPod(deps[j.dep], hashes[j.dep], j.replica, where[j.dep][j.replica])
		_, err := c.CoreV1().Pods(pod.Namespace).Create(ctx, pod, metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			return nil
		}
		return err
	})
	if err != nil {
		return fmt.Errorf("pods: %w", err)
	}
	log.Printf("%d pods created bound in %s", len(jobs), time.Since(t).Round(time.Second))
	// kube-controller-manager's pod watch has them before the
	// ReplicaSets are made, or they create more.
	time.Sleep(10 * time.Second)
	err = parallel(ctx, len(deps), 8, func(ctx context.Context, i int) error {
		d := deps[i]
		if _, err := c.AppsV1().Deployments(d.Namespace).Create(ctx, deploymentObject(d), metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return err
		}
		return wait.PollUntilContextTimeout(ctx, time.Second, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
			rs, err := c.AppsV1().ReplicaSets(d.Namespace).Get(ctx, d.Name+"-"+hashes[i], metav1.GetOptions{})
			if apierrors.IsNotFound(err) {
				list, lerr := c.AppsV1().ReplicaSets(d.Namespace).List(ctx, metav1.ListOptions{LabelSelector: "app=" + d.Name})
				if lerr == nil && len(list.Items) > 0 && list.Items[0].Name != d.Name+"-"+hashes[i] {
					return false, fmt.Errorf("%s/%s: ReplicaSet %s, not the %s its pods were labelled for", d.Namespace, d.Name, list.Items[0].Name, hashes[i])
				}
				return false, nil
			}
			return err == nil && rs.Status.Replicas > 0, nil
		})
	})
	if err != nil {
		return fmt.Errorf("the Deployments: %w", err)
	}
	return waitRunning(ctx, c, len(jobs), timeout)
}

// boundPod is d's replica-th pod, bound to the node-th node, as its
// ReplicaSet (pod-template-hash hash) would create it.
func boundPod(d deployment, hash string, replica, node int) *v1.Pod {
	tmpl := deploymentObject(d).Spec.Template
	tmpl.Labels[appsv1.DefaultDeploymentUniqueLabelKey] = hash
	tmpl.Spec.NodeName = nodeName(node)
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: d.Namespace, Name: fmt.Sprintf("%s-%s-%05d", d.Name, hash, replica), Labels: tmpl.Labels},
		Spec:       tmpl.Spec,
	}
}

// templateHash is the pod-template-hash the deployment controller gives
// the ReplicaSet of template (ComputeHash in k8s.io/kubernetes/pkg/controller,
// without a collision count).
func templateHash(template *v1.PodTemplateSpec) string {
	h := fnv.New32a()
	fmt.Fprintf(h, "%v", dump.ForHash(*template))
	return rand.SafeEncodeString(fmt.Sprint(h.Sum32()))
}
