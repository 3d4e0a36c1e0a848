package estimator

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"

	"github.com/rebalancer-dev/rebalancer/internal/serving"
	"github.com/rebalancer-dev/rebalancer/pkg/live"
	"github.com/rebalancer-dev/rebalancer/pkg/session"
	"github.com/rebalancer-dev/rebalancer/pkg/snapshot"
)

// RunOptions configure a running estimator.
type RunOptions struct {
	// Client reads the live cluster; nil with Snapshot.
	Client kubernetes.Interface
	// Snapshot is the cluster, offline: read once.
	Snapshot *snapshot.Snapshot
	// Resync is how often the live cluster is simulated afresh.
	Resync time.Duration
	// Budget bounds each answer.
	Budget time.Duration
	// ClusterName is the member cluster's name in Karmada: questions about
	// another are refused. "": every question is answered.
	ClusterName string
	GRPC        GRPCOptions
	// Serving serves /healthz, /readyz and /metrics.
	Serving serving.Options
}

// Run serves est until ctx ends: the estimator service over gRPC, probes
// and metrics over HTTP, and the cluster simulated afresh every Resync.
func Run(ctx context.Context, est *Estimator, o RunOptions) error {
	if err := est.o.Validate(est.in.Schedulers); err != nil {
		return err
	}
	if err := o.GRPC.Validate(); err != nil {
		return err
	}
	logger := klog.FromContext(ctx).WithName("estimator")
	if o.ClusterName == "" {
		logger.Info("No --cluster-name: questions about any cluster are answered, a Service routed to the wrong member included")
	}
	if est.o.Karmada == nil {
		logger.Info("No --karmada-kubeconfig: a new workload, one the member does not have yet, is estimated from its requests alone (resources, node claim, priority), without its pod affinities, anti-affinities and topology spread constraints")
	}
	ctx, cancel := context.WithCancel(ctx)
	// The workloads' templates are read from the start; readiness waits
	// for them. Their informers end with ctx.
	est.Start(ctx)
	defer func() {
		cancel()
		est.Shutdown()
	}()
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	lastRead := prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "rebalancer_estimator_cluster_read_timestamp_seconds",
		Help: "When the cluster the replica estimator answers from was read (Unix time).",
	})
	reg.MustRegister(lastRead)

	mux := http.NewServeMux()
	serving.Probes{Ready: est.Ready, NotReady: "the cluster, or the workloads' templates, have not been read yet", Metrics: reg}.Register(mux)
	o.Serving.Metrics = reg
	httpDone, err := serving.Serve(ctx, o.Serving, mux)
	if err != nil {
		return err
	}
	grpcDone, setServing, err := serveGRPC(ctx, o.GRPC, NewServer(logger, est, o.Budget, o.ClusterName, reg))
	if err != nil {
		cancel()
		return errors.Join(err, <-httpDone)
	}
	// read simulates snap, or the live cluster view shows when snap is nil.
	read := func(snap *snapshot.Snapshot, view session.View) error {
		start := time.Now()
		snap, err := est.open(ctx, snap, view)
		if err != nil {
			return err
		}
		lastRead.SetToCurrentTime()
		setServing()
		logger.V(2).Info("Simulating the cluster afresh", "objects", snap.String(), "elapsed", time.Since(start))
		return nil
	}
	var reading chan error // nil offline: the snapshot is read once, here
	if o.Snapshot != nil {
		if err := read(o.Snapshot, nil); err != nil {
			cancel()
			return errors.Join(err, <-httpDone, <-grpcDone)
		}
	} else {
		reading = make(chan error, 1)
		go func() { reading <- follow(ctx, logger, o.Client, o.Resync, read) }()
	}
	var first error
	select {
	case first = <-reading:
		reading = nil
	case first = <-httpDone:
		httpDone = nil
	case first = <-grpcDone:
		grpcDone = nil
	case <-ctx.Done():
	}
	cancel()
	errs := []error{first}
	for _, done := range []<-chan error{reading, httpDone, grpcDone} {
		if done != nil {
			errs = append(errs, <-done)
		}
	}
	return errors.Join(errs...)
}

// follow reads the live cluster through informers and gives read a view of
// its state every resync until ctx ends. A failed read is logged and
// retried at the next resync; the last good simulation answers meanwhile.
func follow(ctx context.Context, logger klog.Logger, client kubernetes.Interface, resync time.Duration, read func(*snapshot.Snapshot, session.View) error) error {
	cluster := live.NewCluster(client)
	if err := cluster.Start(ctx); err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
	defer cluster.Stop()
	tick := time.NewTicker(resync)
	defer tick.Stop()
	current := func(ctx context.Context, _ kubernetes.Interface) (*snapshot.Snapshot, error) {
		return cluster.Current(ctx)
	}
	for {
		if err := read(nil, current); err != nil && ctx.Err() == nil {
			logger.Error(err, "Reading the cluster; answering from the last read", "retryIn", resync)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
	}
}
