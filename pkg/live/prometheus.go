package live

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"time"

	promapi "github.com/prometheus/client_golang/api"
	promv1 "github.com/prometheus/client_golang/api/prometheus/v1"
	promconfig "github.com/prometheus/common/config"
	"github.com/prometheus/common/model"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"
	"sigs.k8s.io/descheduler/pkg/api"
	deschedulerclient "sigs.k8s.io/descheduler/pkg/descheduler/client"

	"github.com/rebalancer-dev/rebalancer/pkg/snapshot"
)

// prometheusTimeout bounds each query to the cluster's Prometheus.
const prometheusTimeout = 30 * time.Second

// PrometheusQueries is what ReadPrometheus asks, as plain data its caller
// takes from the policy: the Prometheus server a metricsProvider
// configures and the queries the policy's plugins read from it.
type PrometheusQueries struct {
	// Provider is the field of the provider that configures Server
	// (metricsProviders[i]), for errors.
	Provider string
	Server   *api.Prometheus
	// Queries are asked in this order.
	Queries []Query
}

// Query is a PromQL query and the policy field that asks it, for errors.
type Query struct {
	Field, PromQL string
}

// ReadPrometheus adds to snap the answers of m's Prometheus to m's
// queries, asked now (a snapshot's usage is read once, a query's own range
// says how long a value must last). A query that fails or that the
// descheduler could not read is an error naming the policy's field and the
// server.
func ReadPrometheus(ctx context.Context, client kubernetes.Interface, m PrometheusQueries, snap *snapshot.Snapshot) error {
	if len(m.Queries) == 0 {
		return nil
	}
	prom, err := prometheusClient(ctx, client, m.Server, m.Provider)
	if err != nil {
		return fmt.Errorf("the policy's %w", err)
	}
	if c, ok := prom.(promapi.CloseIdler); ok {
		defer c.CloseIdleConnections() // a new client each cycle: the token may have rotated
	}
	now := time.Now()
	for _, q := range m.Queries {
		ctx, cancel := context.WithTimeout(ctx, prometheusTimeout)
		answer, err := queryPrometheus(ctx, prom, q.PromQL, now)
		cancel()
		if err != nil {
			return fmt.Errorf("the policy's %s, from the Prometheus of %s (%s): %w", q.Field, m.Provider, m.Server.URL, err)
		}
		snap.PrometheusQueries = append(snap.PrometheusQueries, answer)
	}
	return nil
}

// queryPrometheus asks client's Prometheus the instant query now, and
// returns the answer as a snapshot records it. An answer the descheduler
// cannot read (not a vector, a sample without an instance label, a value
// outside [0, 1]) is an error naming the query and the sample.
func queryPrometheus(ctx context.Context, client promapi.Client, query string, now time.Time) (*snapshot.PrometheusQuery, error) {
	value, warnings, err := promv1.NewAPI(client).Query(ctx, query, now)
	if err != nil {
		return nil, fmt.Errorf("query %q: %w", query, err)
	}
	if len(warnings) > 0 {
		klog.FromContext(ctx).Info("Prometheus warns about the query", "query", query, "warnings", warnings)
	}
	vector, ok := value.(model.Vector)
	if !ok {
		return nil, fmt.Errorf("query %q: answered a %s, want a vector with one sample per node", query, value.Type())
	}
	q, err := snapshot.NewPrometheusQuery(query, now, vector)
	if err != nil {
		return nil, fmt.Errorf("query %q: %w", query, err)
	}
	return q, nil
}

// PrometheusAuthTokenKey is the key of the token in the Secret a
// Prometheus provider's authToken.secretReference names, as the
// descheduler reads it.
const PrometheusAuthTokenKey = "prometheusAuthToken"

// prometheusClient is a client of the Prometheus server a policy's
// metricsProviders configure, authenticated as the descheduler does: with
// the token in the Secret authToken.secretReference names, else, inside a
// pod, with the pod's ServiceAccount token. Inside a pod the client is the
// descheduler's own (it trusts the cluster's CA); outside, as when `plan`
// runs from a workstation, it trusts the system's CAs. field names the
// provider in errors.
func prometheusClient(ctx context.Context, kube kubernetes.Interface, cfg *api.Prometheus, field string) (promapi.Client, error) {
	if cfg == nil || cfg.URL == "" {
		return nil, fmt.Errorf("%s.prometheus.url: required", field)
	}
	if _, err := url.Parse(cfg.URL); err != nil {
		return nil, fmt.Errorf("%s.prometheus.url: %w", field, err)
	}
	token := ""
	if cfg.AuthToken != nil && cfg.AuthToken.SecretReference != nil {
		ref := cfg.AuthToken.SecretReference
		where := fmt.Sprintf("%s.prometheus.authToken.secretReference: Secret %s/%s", field, ref.Namespace, ref.Name)
		secret, err := kube.CoreV1().Secrets(ref.Namespace).Get(ctx, ref.Name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			return nil, fmt.Errorf("%s: not found", where)
		case apierrors.IsForbidden(err):
			return nil, fmt.Errorf("%s: not readable, grant rebalancer get on it (manifests/rebalancer/prometheus-token-rbac.yaml): %w", where, err)
		case err != nil:
			return nil, fmt.Errorf("%s: %w", where, err)
		}
		if token = string(secret.Data[PrometheusAuthTokenKey]); token == "" {
			return nil, fmt.Errorf("%s: no %q in its data, or it is empty", where, PrometheusAuthTokenKey)
		}
	}
	if _, err := os.Stat(deschedulerclient.K8sPodCAFilePath); err == nil {
		if token == "" {
			data, err := os.ReadFile(serviceAccountTokenPath)
			if err != nil && !errors.Is(err, os.ErrNotExist) {
				return nil, fmt.Errorf("%s: reading the pod's ServiceAccount token: %w", field, err)
			}
			token = string(data)
		}
		c, _, err := deschedulerclient.CreatePrometheusClient(cfg.URL, token)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", field, err)
		}
		return c, nil
	}
	rt := http.RoundTripper(http.DefaultTransport)
	if token != "" {
		rt = promconfig.NewAuthorizationCredentialsRoundTripper("Bearer", promconfig.NewInlineSecret(token), rt)
	}
	c, err := promapi.NewClient(promapi.Config{Address: cfg.URL, RoundTripper: rt})
	if err != nil {
		return nil, fmt.Errorf("%s.prometheus.url: %w", field, err)
	}
	return c, nil
}

// serviceAccountTokenPath is where a pod's ServiceAccount token is mounted.
const serviceAccountTokenPath = "/var/run/secrets/kubernetes.io/serviceaccount/token"
