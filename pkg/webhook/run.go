package webhook

import (
	"context"
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"k8s.io/klog/v2"

	"github.com/rebalancer-dev/rebalancer/internal/serving"
)

// Options configure a running webhook.
type Options struct {
	Serving serving.Options
	// Scheduler is the schedulerName given to opted-in pods.
	Scheduler string
}

// Run serves the webhook, /healthz, /readyz and /metrics until ctx ends.
// It needs no access to the API server: the API server sends it only the
// pods of opted-in namespaces.
func Run(ctx context.Context, o Options) error {
	logger := klog.FromContext(ctx).WithName("webhook")
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	mux := http.NewServeMux()
	mux.Handle(MutatePath, serving.Limit(newMutator(logger, o.Scheduler, newMetrics(reg)), budget, maxBody))
	serving.Probes{Metrics: reg}.Register(mux)
	o.Serving.Metrics = reg
	done, err := serving.Serve(ctx, o.Serving, mux)
	if err != nil {
		return err
	}
	return <-done
}
