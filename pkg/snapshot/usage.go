package snapshot

import (
	"context"
	"encoding/json"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/kubernetes"
	metricsv1beta1 "k8s.io/metrics/pkg/apis/metrics/v1beta1"
)

// Paths of the usage metrics.k8s.io serves, as `kubectl get --raw` reads them.
const (
	NodeMetricsPath = "/apis/metrics.k8s.io/v1beta1/nodes"
	PodMetricsPath  = "/apis/metrics.k8s.io/v1beta1/pods"
)

// ReadUsage adds to s the nodes' and pods' usage as metrics.k8s.io
// (metrics-server) serves it now: one list of each, as `kubectl get --raw`
// returns them. Usage of a node or pod s does not hold (one created or
// deleted between the reads) is left out; a node or pod without usage is
// simply missing, for the planner to judge.
func ReadUsage(ctx context.Context, client kubernetes.Interface, s *Snapshot) error {
	var nodes metricsv1beta1.NodeMetricsList
	if err := getRaw(ctx, client, NodeMetricsPath, &nodes); err != nil {
		return err
	}
	var pods metricsv1beta1.PodMetricsList
	if err := getRaw(ctx, client, PodMetricsPath, &pods); err != nil {
		return err
	}
	known := make(map[string]bool, len(s.Nodes)+len(s.Pods))
	for _, n := range s.Nodes {
		known[n.Name] = true
	}
	for _, p := range s.Pods {
		known[p.Namespace+"/"+p.Name] = true
	}
	s.NodeMetrics, s.PodMetrics = nil, nil
	for i := range nodes.Items {
		if m := &nodes.Items[i]; known[m.Name] {
			s.NodeMetrics = append(s.NodeMetrics, m)
		}
	}
	for i := range pods.Items {
		if m := &pods.Items[i]; known[m.Namespace+"/"+m.Name] {
			s.PodMetrics = append(s.PodMetrics, m)
		}
	}
	return nil
}

func getRaw(ctx context.Context, client kubernetes.Interface, path string, into any) error {
	data, err := client.Discovery().RESTClient().Get().AbsPath(path).DoRaw(ctx)
	switch {
	case apierrors.IsNotFound(err):
		return fmt.Errorf("reading usage from %s: metrics.k8s.io is not served; install metrics-server: %w", path, err)
	case apierrors.IsServiceUnavailable(err):
		return fmt.Errorf("reading usage from %s: metrics-server does not answer: %w", path, err)
	case err != nil:
		return fmt.Errorf("reading usage from %s: %w", path, err)
	}
	if err := json.Unmarshal(data, into); err != nil {
		return fmt.Errorf("reading usage from %s: %w", path, err)
	}
	return nil
}
