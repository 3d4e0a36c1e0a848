package cycle

import (
	"context"
	"fmt"
	"os"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"

	"github.com/rebalancer-dev/rebalancer/pkg/daemon"
	"github.com/rebalancer-dev/rebalancer/pkg/live"
	"github.com/rebalancer-dev/rebalancer/pkg/snapshot"
)

// daemon is the long-lived mode: it checks the inputs once before anything
// starts, then keeps one view of the cluster (one LIST per kind, then
// WATCH) for every cycle, which daemon.Run runs on the schedule, serving
// reg's metrics.
func (r *runner) daemon(ctx context.Context, reg *prometheus.Registry) error {
	logger := klog.FromContext(ctx)
	o := r.o
	in, err := o.Session.Load(ctx)
	if err != nil {
		return err
	}
	if in.ReadsUsage() {
		o.Session.StartSampling(ctx)
	}
	cluster := live.NewCluster(o.Client)
	defer cluster.Stop()
	var synced atomic.Bool
	if err := cluster.Start(ctx); err != nil {
		return fmt.Errorf("reading the cluster: %w", err)
	}
	synced.Store(true)
	view := func(ctx context.Context, _ kubernetes.Interface) (*snapshot.Snapshot, error) {
		return cluster.Current(ctx)
	}
	sched, err := daemon.ParseSchedule(o.Interval, o.Schedule)
	if err != nil {
		return err
	}
	opts := daemon.Options{
		Schedule:    sched,
		RunAtStart:  o.Interval > 0,
		Window:      o.Window,
		Cycle:       func(ctx context.Context) error { return r.cycle(ctx, view, true) },
		Ready:       synced.Load,
		BindAddress: o.BindAddress,
		Registry:    reg,
	}
	if !o.DryRun {
		// A new leader lifts the drains its predecessor left at once, not
		// at the schedule's first cycle.
		opts.Lead = func(ctx context.Context) error {
			_, err := r.ex.CleanupDrainTaints(ctx)
			return err
		}
	}
	if o.LeaderElect {
		host, _ := os.Hostname()
		opts.LeaderElection = &daemon.LeaderElection{
			Client: o.Client, Namespace: o.LeaseNamespace, Name: o.LeaseName, Identity: host + "_" + string(uuid.NewUUID()),
			LeaseDuration: 15 * time.Second, RenewDeadline: 10 * time.Second, RetryPeriod: 2 * time.Second,
		}
	}
	logger.Info("Running", "interval", o.Interval, "schedule", o.Schedule, "window", o.Window.String(), "leaderElect", o.LeaderElect)
	return daemon.Run(ctx, opts)
}
