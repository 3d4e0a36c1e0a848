package cli

import (
	"context"
	"fmt"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"

	"github.com/rebalancer-dev/rebalancer/pkg/snapshot"
	"github.com/rebalancer-dev/rebalancer/pkg/version"
)

// reachTimeout bounds the first request to the API server; syncTimeout the
// wait for the first full view of the cluster after it.
const (
	reachTimeout = 10 * time.Second
	syncTimeout  = 2 * time.Minute
)

// newClient builds a clientset from a kubeconfig file and optional context,
// identified as rebalancer in the API server's audit log, and checks that
// the API server answers: a wrong or dead server is reported at once, with
// its address, rather than after informers have retried for minutes.
func newClient(ctx context.Context, kubeconfig, kubeContext string) (kubernetes.Interface, error) {
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(
		&clientcmd.ClientConfigLoadingRules{ExplicitPath: kubeconfig},
		&clientcmd.ConfigOverrides{CurrentContext: kubeContext},
	).ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("--kubeconfig %s: %w", kubeconfig, err)
	}
	cfg.UserAgent = "rebalancer/" + version.Version
	cfg.QPS, cfg.Burst = 50, 100
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("API server %s: %w", cfg.Host, err)
	}
	reachCtx, cancel := context.WithTimeout(ctx, reachTimeout)
	defer cancel()
	if err := client.Discovery().RESTClient().Get().AbsPath("/version").Do(reachCtx).Error(); err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err() // stopped: not the server's fault
		}
		return nil, fmt.Errorf("cannot reach the API server %s: %w", cfg.Host, err)
	}
	return client, nil
}

// capture waits for every informer to sync, then takes one snapshot: a plan
// never starts on a half-filled cache.
func capture(ctx context.Context, client kubernetes.Interface) (*snapshot.Snapshot, error) {
	live := snapshot.NewLive(client)
	defer live.Stop()
	timer := time.AfterFunc(syncTimeout, live.Stop)
	err := live.Start(ctx)
	timer.Stop()
	if err != nil {
		return nil, fmt.Errorf("reading the cluster: %w", err)
	}
	snap, unknown, err := live.Snapshot()
	if err != nil {
		return nil, err
	}
	if unknown > 0 {
		klog.FromContext(ctx).Info("Left out pods bound to nodes not seen yet", "pods", unknown)
	}
	return snap, nil
}
