// Package daemon runs rebalancer's cycles in a long-lived process: on an
// interval or a cron schedule, optionally only inside a daily time window,
// never overlapping, only while it holds a coordination.k8s.io Lease when
// leader election is on, and with /healthz, /readyz and /metrics served.
package daemon

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rebalancer-dev/rebalancer/internal/serving"
	"github.com/robfig/cron/v3"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
)

// Options configure Run.
type Options struct {
	// Schedule says when cycles run (see ParseSchedule).
	Schedule cron.Schedule
	// RunAtStart runs a first cycle as soon as the daemon leads, before the
	// schedule's first tick (an interval's first tick is an interval away).
	RunAtStart bool
	// Window, when set, lets cycles start only inside it.
	Window *Window
	// Cycle runs one cycle. Its context ends when the daemon stops or loses
	// the lease: the cycle must start no eviction after that.
	Cycle func(ctx context.Context) error
	// Lead, if set, runs each time the daemon starts to lead (at the start
	// without leader election), before its first cycle, whatever the
	// schedule and the window: e.g. to lift what a leader that died
	// mid-cycle left behind. An error is logged; the cycles run anyway.
	Lead func(ctx context.Context) error
	// Ready reports readiness for /readyz (e.g. the cluster view has synced).
	Ready func() bool
	// LeaderElection, when set, runs cycles only while holding the lease.
	LeaderElection *LeaderElection
	// BindAddress serves /healthz, /readyz and /metrics; "" serves nothing.
	BindAddress string
	// Registry holds the metrics /metrics serves; the daemon adds its own.
	Registry *prometheus.Registry
	// Clock times the schedule; nil is the real clock.
	Clock clock.WithTicker
}

// LeaderElection configures the Lease that elects the one replica that evicts.
type LeaderElection struct {
	Client        kubernetes.Interface
	Namespace     string
	Name          string
	Identity      string
	LeaseDuration time.Duration
	RenewDeadline time.Duration
	RetryPeriod   time.Duration
}

// ErrLostLease is returned when the lease is lost while the daemon runs:
// the process should exit so a fresh start competes for it again.
var ErrLostLease = errors.New("lost the leader lease")

// Run runs cycles until ctx ends (then it returns nil, having released the
// lease) or the lease is lost (ErrLostLease).
func Run(ctx context.Context, o Options) error {
	logger := klog.FromContext(ctx)
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	var reg prometheus.Registerer // stays nil, not a nil *Registry, without a registry
	if o.Registry != nil {
		reg = o.Registry
	}
	m := newMetrics(reg)
	var watchdog *leaderelection.HealthzAdaptor
	if o.LeaderElection != nil {
		watchdog = leaderelection.NewLeaderHealthzAdaptor(20 * time.Second)
	}
	stopServing, err := serve(ctx, o, watchdog)
	if err != nil {
		return err
	}
	defer stopServing()

	if o.LeaderElection == nil {
		m.leader.Set(1)
		loop(ctx, o, m)
		return nil
	}
	le := o.LeaderElection
	lock := &resourcelock.LeaseLock{
		LeaseMeta:  metav1.ObjectMeta{Namespace: le.Namespace, Name: le.Name},
		Client:     le.Client.CoordinationV1(),
		LockConfig: resourcelock.ResourceLockConfig{Identity: le.Identity},
	}
	// client-go's elector runs OnStartedLeading in a goroutine it does not
	// wait for, and releases the lease as soon as its context ends. A
	// shutdown must instead stop the cycles first (a cycle being cut short
	// still records its moves and removes its drain taints) and only then
	// release the lease, so the next leader never runs beside a cycle and
	// the process never exits in the middle of one. So the elector's
	// context ends only after the loop has returned.
	electorCtx, stopElector := context.WithCancel(context.WithoutCancel(ctx))
	defer stopElector()
	var (
		mu       sync.Mutex
		leading  bool
		loopDone = make(chan struct{})
	)
	waitLoop := func() {
		mu.Lock()
		l := leading
		mu.Unlock()
		if l {
			<-loopDone
		}
	}
	stopWatching := context.AfterFunc(ctx, func() { waitLoop(); stopElector() })
	defer stopWatching()
	lost := false
	elector, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock:            lock,
		LeaseDuration:   le.LeaseDuration,
		RenewDeadline:   le.RenewDeadline,
		RetryPeriod:     le.RetryPeriod,
		ReleaseOnCancel: true,
		WatchDog:        watchdog,
		Name:            le.Name,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(leaderCtx context.Context) {
				mu.Lock()
				if ctx.Err() != nil {
					mu.Unlock()
					return
				}
				leading = true
				mu.Unlock()
				defer close(loopDone)
				// Cycles stop when the lease is lost or the daemon stops.
				cycleCtx, cancel := context.WithCancel(leaderCtx)
				defer cancel()
				defer context.AfterFunc(ctx, cancel)()
				logger.Info("Leading: cycles start", "lease", le.Namespace+"/"+le.Name, "identity", le.Identity)
				m.leader.Set(1)
				loop(cycleCtx, o, m)
			},
			OnStoppedLeading: func() {
				m.leader.Set(0)
				if ctx.Err() == nil {
					lost = true
					logger.Info("Lost the lease: no further evictions", "lease", le.Namespace+"/"+le.Name)
				}
			},
		},
	})
	if err != nil {
		return fmt.Errorf("leader election: %w", err)
	}
	elector.Run(electorCtx)
	// A lost lease ends the elector before the loop: its cycle is stopping.
	waitLoop()
	if lost {
		return ErrLostLease
	}
	return nil
}

// loop runs cycles on the schedule until ctx ends. Cycles run one after
// another, so they never overlap; a tick missed while a cycle ran is not
// made up.
func loop(ctx context.Context, o Options, m *metrics) {
	logger := klog.FromContext(ctx)
	if o.Lead != nil && ctx.Err() == nil {
		if err := o.Lead(ctx); err != nil {
			logger.Error(err, "Starting to lead")
		}
	}
	first := o.RunAtStart
	for {
		if !first {
			next := o.Schedule.Next(o.Clock.Now())
			timer := o.Clock.NewTimer(next.Sub(o.Clock.Now()))
			select {
			case <-ctx.Done():
				timer.Stop()
				return
			case <-timer.C():
			}
		}
		first = false
		if ctx.Err() != nil {
			return
		}
		if now := o.Clock.Now(); !o.Window.Contains(now) {
			logger.V(2).Info("Outside the eviction window: cycle skipped", "window", o.Window.String())
			m.cycles.WithLabelValues("outside-window").Inc()
			continue
		}
		start := o.Clock.Now()
		err := o.Cycle(ctx)
		m.duration.Observe(o.Clock.Since(start).Seconds())
		if err != nil {
			m.cycles.WithLabelValues("error").Inc()
			logger.Error(err, "Cycle failed")
			continue
		}
		m.cycles.WithLabelValues("ok").Inc()
	}
}

// serve starts the health and metrics endpoints; stop shuts them down.
func serve(ctx context.Context, o Options, watchdog *leaderelection.HealthzAdaptor) (stop func(), err error) {
	if o.BindAddress == "" {
		return func() {}, nil
	}
	probes := serving.Probes{Ready: o.Ready, NotReady: "the cluster view has not synced"}
	if watchdog != nil {
		probes.Healthy = watchdog.Check
	}
	if o.Registry != nil {
		probes.Metrics = o.Registry
	}
	mux := http.NewServeMux()
	probes.Register(mux)
	ctx, cancel := context.WithCancel(ctx)
	done, err := serving.Serve(ctx, serving.Options{Address: o.BindAddress}, mux)
	if err != nil {
		cancel()
		return nil, err
	}
	stopped := make(chan struct{})
	go func() {
		if err := <-done; err != nil {
			klog.FromContext(ctx).Error(err, "Health and metrics server stopped")
		}
		close(stopped)
	}()
	return func() {
		cancel()
		<-stopped
	}, nil
}

type metrics struct {
	cycles   *prometheus.CounterVec
	duration prometheus.Histogram
	leader   prometheus.Gauge
}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		cycles: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "rebalancer_cycles_total", Help: "Cycles by result: ok, error, outside-window.",
		}, []string{"result"}),
		duration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "rebalancer_cycle_duration_seconds", Help: "Duration of a cycle: plan and execution.",
			Buckets: prometheus.ExponentialBuckets(0.1, 2, 14),
		}),
		leader: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "rebalancer_leader", Help: "1 while this replica runs cycles (holds the lease, or no election).",
		}),
	}
	if reg != nil {
		reg.MustRegister(m.cycles, m.duration, m.leader)
	}
	return m
}
