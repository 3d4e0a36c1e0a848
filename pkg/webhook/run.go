package webhook

import (
	"context"
	"fmt"
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
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
	mux.Handle(MutatePath, New(logger, o.Scheduler, NewMetrics(reg)))
	ok := func(w http.ResponseWriter, _ *http.Request) { _, _ = fmt.Fprint(w, "ok") }
	mux.HandleFunc("/healthz", ok)
	mux.HandleFunc("/readyz", ok)
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	done, err := serving.Serve(ctx, o.Serving, mux)
	if err != nil {
		return err
	}
	return <-done
}
