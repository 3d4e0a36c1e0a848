//go:build e2e

// Package e2e tests rebalancer against a real control plane: etcd,
// kube-apiserver, kube-controller-manager and KWOK started by
// hack/local-cluster.sh, and the real binaries from _output/bin.
//
//	make test-e2e                  # starts and stops the control plane itself
//	go test -tags e2e ./test/e2e/  # against a cluster that is already up
package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

var (
	// repoRoot is the module root, found from this file's location.
	repoRoot string
	// binDir holds rebalancer-scheduler and kubectl.
	binDir string
	// kubeconfig is the admin kubeconfig of the control plane under test.
	kubeconfig string
	client     kubernetes.Interface
)

func TestMain(m *testing.M) {
	// go test runs in the package's directory.
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		fmt.Fprintf(os.Stderr, "e2e: %v\n", err)
		os.Exit(1)
	}
	repoRoot = root
	binDir = envOr("BIN_DIR", filepath.Join(repoRoot, "_output", "bin"))
	kubeconfig = envOr("KUBECONFIG", filepath.Join(repoRoot, "_output", "local-cluster", "admin.kubeconfig"))
	if err := setup(); err != nil {
		// No skipping: the e2e suite exists to run against a real cluster.
		fmt.Fprintf(os.Stderr, "e2e: %v\nstart the control plane with `hack/local-cluster.sh up` or run `make test-e2e`\n", err)
		os.Exit(1)
	}
	code := m.Run()
	stopScheduler()
	os.Exit(code)
}

func setup() error {
	for _, b := range []string{"rebalancer-scheduler", "kubectl"} {
		if _, err := os.Stat(filepath.Join(binDir, b)); err != nil {
			return fmt.Errorf("binary %s not built: %w", b, err)
		}
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return fmt.Errorf("kubeconfig %s: %w", kubeconfig, err)
	}
	cfg.QPS, cfg.Burst = 100, 200
	if client, err = kubernetes.NewForConfig(cfg); err != nil {
		return err
	}
	if _, err := client.Discovery().ServerVersion(); err != nil {
		return fmt.Errorf("no apiserver at %s: %w", cfg.Host, err)
	}
	// rebalancer-scheduler keeps its leader lease in the namespace the
	// manifests create.
	ns := &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "rebalancer-system"}}
	if _, err := client.CoreV1().Namespaces().Create(context.Background(), ns, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	return nil
}

func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}
