package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/spf13/pflag"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"

	"github.com/rebalancer-dev/rebalancer/pkg/version"
)

// reachTimeout bounds the first request to the API server.
const reachTimeout = 10 * time.Second

// kubeconfigDefaults says where a command looks without --kubeconfig (the
// order restConfig follows); kubeconfigHelp is the flag's usual help.
const (
	kubeconfigDefaults = "(default: $KUBECONFIG, in-cluster config, ~/.kube/config)"
	kubeconfigHelp     = "kubeconfig file " + kubeconfigDefaults
)

// clientFlags are how a command reaches the API server, with the flags kube
// components use for them.
type clientFlags struct {
	kubeconfig string
	// flag names the kubeconfig's flag in logs and errors; "" is
	// kubeconfig.
	flag    string
	context string
	qps     float32
	burst   int
}

// addFlags registers the client flags; kubeconfigHelp says what the
// kubeconfig is for.
func (c *clientFlags) addFlags(f *pflag.FlagSet, kubeconfigHelp string) {
	f.StringVar(&c.kubeconfig, "kubeconfig", "", kubeconfigHelp)
	f.StringVar(&c.context, "context", "", "kubeconfig context to use (default: the kubeconfig's current context)")
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

// errNoCluster is restConfig's error when nothing names a cluster.
var errNoCluster = errors.New("no cluster to connect to")

// inClusterConfig is rest.InClusterConfig; tests replace it, as its token
// and CA are read from fixed paths.
var inClusterConfig = rest.InClusterConfig

// restConfig finds the cluster as controller-runtime and most operators do,
// kubectl's rules with a pod's own service account before the home file:
// --kubeconfig, else the files of $KUBECONFIG (merged, as kubectl merges
// them), else the in-cluster config of a pod, else ~/.kube/config; --context
// picks a context of the kubeconfig. source says which was used, for logs
// and errors.
func (c *clientFlags) restConfig() (cfg *rest.Config, source string, err error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = c.kubeconfig
	env := os.Getenv(clientcmd.RecommendedConfigPathEnvVar)
	switch {
	case c.kubeconfig != "":
		source = "--" + c.flagName() + " " + c.kubeconfig
	case env != "":
		source = clientcmd.RecommendedConfigPathEnvVar + "=" + env
	case c.context == "":
		cfg, err := inClusterConfig()
		if err == nil {
			return cfg, "in-cluster config", nil
		}
		if !errors.Is(err, rest.ErrNotInCluster) {
			return nil, "", fmt.Errorf("in-cluster config: %w", err)
		}
		fallthrough
	default:
		source = clientcmd.RecommendedHomeFile
	}
	if c.context != "" {
		source += " --context " + c.context
	}
	cfg, err = clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules,
		&clientcmd.ConfigOverrides{CurrentContext: c.context}).ClientConfig()
	if clientcmd.IsEmptyConfig(err) {
		return nil, "", fmt.Errorf("%w: %s", errNoCluster, c.triedSources(env))
	}
	if err != nil {
		return nil, "", fmt.Errorf("%s: %w", source, err)
	}
	return cfg, source, nil
}

func (c *clientFlags) flagName() string {
	if c.flag == "" {
		return "kubeconfig"
	}
	return c.flag
}

// triedSources says where restConfig looked, when it found nothing.
func (c *clientFlags) triedSources(env string) string {
	tried := []string{"--kubeconfig not given"}
	if env != "" {
		tried = append(tried, fmt.Sprintf("%s=%s holds no cluster", clientcmd.RecommendedConfigPathEnvVar, env))
	} else {
		tried = append(tried, clientcmd.RecommendedConfigPathEnvVar+" not set")
		if c.context == "" {
			tried = append(tried, "not in a pod (KUBERNETES_SERVICE_HOST not set)")
		}
		tried = append(tried, "no "+clientcmd.RecommendedHomeFile)
	}
	return strings.Join(tried, ", ")
}

// newClient builds a clientset for the cluster restConfig finds, identified
// as rebalancer in the API server's audit log, and checks that the API
// server answers: a wrong or dead server is reported at once, with its
// address, rather than after informers have retried for minutes.
func (c *clientFlags) newClient(ctx context.Context) (kubernetes.Interface, error) {
	cfg, source, err := c.restConfig()
	if err != nil {
		return nil, err
	}
	klog.FromContext(ctx).V(1).Info("Connecting to the API server", "server", cfg.Host, "from", source)
	cfg.UserAgent = "rebalancer/" + version.Version
	cfg.QPS, cfg.Burst = c.qps, c.burst
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("API server %s (from %s): %w", cfg.Host, source, err)
	}
	reachCtx, cancel := context.WithTimeout(ctx, reachTimeout)
	defer cancel()
	if err := client.Discovery().RESTClient().Get().AbsPath("/version").Do(reachCtx).Error(); err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err() // stopped: not the server's fault
		}
		return nil, fmt.Errorf("cannot reach the API server %s (from %s): %w", cfg.Host, source, err)
	}
	return client, nil
}
