package main

import (
	"context"
	"fmt"
	"log"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/rebalancer-dev/rebalancer/hack/internal/harness"
)

const (
	// nodeLabel marks the run's KWOK nodes; its pods select them.
	nodeLabel = "soak.rebalancer.dev/node"
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

// prepare creates the namespaces and n Ready KWOK nodes.
func prepare(ctx context.Context, c kubernetes.Interface, n int) error {
	for _, ns := range append([]string{"rebalancer-system"}, namespaces...) {
		_, err := c.CoreV1().Namespaces().Create(ctx, &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			return err
		}
	}
	for i := range n {
		node := harness.KWOKNode(fmt.Sprintf("soak-%03d", i), nodeLabel, nodeCPUMilli, nodeMemory)
		if _, err := c.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return err
		}
	}
	return harness.WaitNodesReady(ctx, c, nodeLabel, n, time.Second, 3*time.Minute)
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
