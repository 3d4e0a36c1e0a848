package extender

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/rebalancer-dev/rebalancer/internal/serving"
	"github.com/rebalancer-dev/rebalancer/pkg/hint"
)

// Options configure a running extender.
type Options struct {
	Client  kubernetes.Interface
	Serving serving.Options
	// HintTTL is how long a hint steers after its pod is seen leaving (as
	// RebalanceHint's hintTTL).
	HintTTL time.Duration
	// FollowRollouts steers every Deployment's rolling update onto the
	// nodes of the pods it replaces (hint.FollowEveryRollout), not only
	// sticky Deployments'.
	FollowRollouts bool
}

// Run watches pods and serves the prioritize verb, /healthz, /readyz and
// /metrics until ctx ends.
func Run(ctx context.Context, o Options) error {
	logger := klog.FromContext(ctx).WithName("extender")
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var opts []hint.BookOption
	if o.FollowRollouts {
		opts = append(opts, hint.FollowEveryRollout())
	}
	book := hint.NewBook(clock.RealClock{}, o.HintTTL, opts...)
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	m := NewMetrics(reg, book)

	factory := informers.NewSharedInformerFactoryWithOptions(o.Client, 0, informers.WithTransform(strip))
	pods := factory.Core().V1().Pods().Informer()
	arrivals := hint.NewArrivals(hint.ArrivalWait)
	if err := watchPods(logger, pods, book, arrivals, m); err != nil {
		return fmt.Errorf("watching pods: %w", err)
	}
	ext := New(logger, book, arrivals, pods.HasSynced, m)

	mux := http.NewServeMux()
	mux.Handle(PrioritizePath, serving.Limit(ext, budget, maxBody))
	serving.Probes{Ready: ext.Ready, NotReady: "the pod watch has not synced", Metrics: reg}.Register(mux)

	o.Serving.Metrics = reg
	done, err := serving.Serve(ctx, o.Serving, mux)
	if err != nil {
		return err
	}
	factory.Start(ctx.Done())
	defer func() {
		cancel()
		factory.Shutdown() // waits for the informers, which stop with ctx
	}()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return <-done
	}
}
