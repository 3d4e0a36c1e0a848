package main

import (
	"context"
	"fmt"
	"log"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

const (
	// nodeLabel marks the run's KWOK nodes; its pods select them.
	nodeLabel = "soak.rebalancer.dev/node"
	kwokTaint = "kwok.x-k8s.io/node"
	// The run's nodes: 8 CPUs, 32 GiB, 110 pods, as a common VM.
	nodeCPUMilli = 8000
	nodeMemory   = "32Gi"
)

// namespaces are the teams of the run: the policy's per-namespace limit
// applies to each, as on a shared cluster.
var namespaces = []string{"soak-team-a", "soak-team-b", "soak-team-c", "soak-team-d"}

// localCluster runs hack/local-cluster.sh.
func localCluster(root, verb string) error {
	cmd := exec.Command(filepath.Join(root, "hack", "local-cluster.sh"), verb)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	return cmd.Run()
}

// connect returns a client of the cluster at kubeconfig, or an error when
// no apiserver answers there.
func connect(kubeconfig string) (kubernetes.Interface, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return nil, err
	}
	cfg.QPS, cfg.Burst = 100, 200
	c, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	if _, err := c.Discovery().ServerVersion(); err != nil {
		return nil, err
	}
	return c, nil
}

// prepare creates the namespaces and n Ready KWOK nodes.
func prepare(ctx context.Context, c kubernetes.Interface, n int) error {
	for _, ns := range append([]string{"rebalancer-system"}, namespaces...) {
		_, err := c.CoreV1().Namespaces().Create(ctx, &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			return err
		}
	}
	for i := range n {
		name := fmt.Sprintf("soak-%03d", i)
		capacity := v1.ResourceList{
			v1.ResourceCPU:    *resource.NewMilliQuantity(nodeCPUMilli, resource.DecimalSI),
			v1.ResourceMemory: resource.MustParse(nodeMemory),
			v1.ResourcePods:   resource.MustParse("110"),
		}
		node := &v1.Node{
			ObjectMeta: metav1.ObjectMeta{
				Name:        name,
				Annotations: map[string]string{"kwok.x-k8s.io/node": "fake", "node.alpha.kubernetes.io/ttl": "0"},
				Labels:      map[string]string{"kubernetes.io/hostname": name, "kubernetes.io/os": "linux", "type": "kwok", nodeLabel: "true"},
			},
			Spec:   v1.NodeSpec{Taints: []v1.Taint{{Key: kwokTaint, Value: "fake", Effect: v1.TaintEffectNoSchedule}}},
			Status: v1.NodeStatus{Capacity: capacity, Allocatable: capacity},
		}
		if _, err := c.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return err
		}
	}
	// Ready, and without the not-ready taints of the node lifecycle
	// controller.
	return wait.PollUntilContextTimeout(ctx, time.Second, 3*time.Minute, true, func(ctx context.Context) (bool, error) {
		list, err := c.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: nodeLabel})
		if err != nil {
			return false, nil
		}
		ready := 0
		for _, node := range list.Items {
			ok := false
			for _, cond := range node.Status.Conditions {
				ok = ok || (cond.Type == v1.NodeReady && cond.Status == v1.ConditionTrue)
			}
			for _, t := range node.Spec.Taints {
				ok = ok && !strings.HasPrefix(t.Key, "node.kubernetes.io/")
			}
			if ok {
				ready++
			}
		}
		return ready >= n, nil
	})
}

// cleanup removes what prepare made from a cluster the run did not start.
func cleanup(c kubernetes.Interface) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, ns := range namespaces {
		if err := c.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			log.Printf("cleanup: %v", err)
		}
	}
	if err := c.CoreV1().Nodes().DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{LabelSelector: nodeLabel}); err != nil {
		log.Printf("cleanup: %v", err)
	}
}

func runOutput(bin string, args ...string) (string, error) {
	out, err := exec.Command(bin, args...).Output()
	return string(out), err
}
