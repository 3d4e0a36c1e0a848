package cli

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/pflag"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/rebalancer-dev/rebalancer/pkg/version"
)

// reachTimeout bounds the first request to the API server.
const reachTimeout = 10 * time.Second

// clientFlags are how a command reaches the API server, with the flags kube
// components use for them.
type clientFlags struct {
	kubeconfig string
	context    string
	qps        float32
	burst      int
}

// addClientFlags registers the client flags; kubeconfigHelp says what the
// kubeconfig is for.
func (c *clientFlags) addFlags(f *pflag.FlagSet, kubeconfigHelp string) {
	f.StringVar(&c.kubeconfig, "kubeconfig", "", kubeconfigHelp)
	f.StringVar(&c.context, "context", "", "kubeconfig context to use")
	f.Float32Var(&c.qps, "kube-api-qps", 50, "queries per second to the API server (client-side rate limit)")
	f.IntVar(&c.burst, "kube-api-burst", 100, "burst of queries to the API server above --kube-api-qps")
}

func (c *clientFlags) errors() []error {
	var errs []error
	if !(c.qps > 0) { // NaN too
		errs = append(errs, fmt.Errorf("--kube-api-qps %g: must be positive", c.qps))
	}
	if c.burst < 1 {
		errs = append(errs, fmt.Errorf("--kube-api-burst %d: must be at least 1", c.burst))
	}
	return errs
}

// newClient builds a clientset from a kubeconfig file and optional context,
// identified as rebalancer in the API server's audit log, and checks that
// the API server answers: a wrong or dead server is reported at once, with
// its address, rather than after informers have retried for minutes.
func (c *clientFlags) newClient(ctx context.Context) (kubernetes.Interface, error) {
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(
		&clientcmd.ClientConfigLoadingRules{ExplicitPath: c.kubeconfig},
		&clientcmd.ConfigOverrides{CurrentContext: c.context},
	).ClientConfig()
	if err != nil {
		if c.context != "" {
			return nil, fmt.Errorf("--kubeconfig %s --context %s: %w", c.kubeconfig, c.context, err)
		}
		return nil, fmt.Errorf("--kubeconfig %s: %w", c.kubeconfig, err)
	}
	cfg.UserAgent = "rebalancer/" + version.Version
	cfg.QPS, cfg.Burst = c.qps, c.burst
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
