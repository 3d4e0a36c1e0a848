package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"sort"
	"strings"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/spf13/cobra"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"

	"github.com/rebalancer-dev/rebalancer/internal/output"
	"github.com/rebalancer-dev/rebalancer/internal/serving"
	"github.com/rebalancer-dev/rebalancer/pkg/daemon"
	"github.com/rebalancer-dev/rebalancer/pkg/executor"
	"github.com/rebalancer-dev/rebalancer/pkg/history"
	"github.com/rebalancer-dev/rebalancer/pkg/live"
	"github.com/rebalancer-dev/rebalancer/pkg/plan"
	"github.com/rebalancer-dev/rebalancer/pkg/planner"
	"github.com/rebalancer-dev/rebalancer/pkg/session"
	"github.com/rebalancer-dev/rebalancer/pkg/snapshot"
	"github.com/rebalancer-dev/rebalancer/pkg/wellknown"
)

type runOptions struct {
	planOptions
	recheck      recheck // the running cycle's recheck of each move
	once         bool
	dryRun       bool
	interval     time.Duration
	schedule     string
	window       string
	leaderElect  bool
	leaseNS      string
	leaseName    string
	bindAddress  string
	drainTimeout time.Duration
	evictionRate float64
}

func newRunCommand() *cobra.Command {
	o := &runOptions{}
	cmd := &cobra.Command{
		Use:   "run",
		Short: "Plan and carry out the moves: evict through the Eviction API, with hints for rebalancer-scheduler",
		Long: `run plans as 'rebalancer plan' does, on the live cluster, and carries the plan
out: each move is re-checked against the live pod, its node is kept free of new
pods while it is being emptied, the pod is annotated with where its replacement
should go, and it is evicted through the Eviction API (PodDisruptionBudgets are
honoured, with retries). --once runs one cycle, for a Job or CronJob; with
--interval or --schedule it runs as a long-lived Deployment: cycles never
overlap, only the replica holding the Lease evicts, and /healthz, /readyz and
/metrics are served on --bind-address.`,
		Example: `  rebalancer run --once --policy /etc/rebalancer/binpacking-policy.yaml \
    --scheduler-config /etc/rebalancer/binpacking-scheduler.yaml`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := o.validate(); err != nil {
				return err
			}
			return o.run(cmd.Context(), cmd)
		},
	}
	f := cmd.Flags()
	f.BoolVar(&o.once, "once", false, "run one cycle and exit (Job, CronJob); the exit status says whether it failed")
	f.DurationVar(&o.interval, "interval", 0, "run a cycle now and then every interval (long-lived mode)")
	f.StringVar(&o.schedule, "schedule", "", `run cycles on a cron schedule: 5 fields, @hourly and the like, optional "CRON_TZ=Zone " prefix (long-lived mode)`)
	f.StringVar(&o.window, "window", "", `evict only between these times of day, e.g. "22:00-06:00" (local time of the process)`)
	f.BoolVar(&o.leaderElect, "leader-elect", true, "long-lived mode: evict only while holding the Lease, so one of several replicas acts")
	f.StringVar(&o.leaseNS, "leader-elect-resource-namespace", "rebalancer-system", "namespace of the leader Lease")
	f.StringVar(&o.leaseName, "leader-elect-resource-name", "rebalancer", "name of the leader Lease")
	f.StringVar(&o.bindAddress, "bind-address", ":10258", "long-lived mode: address of /healthz, /readyz and /metrics")
	f.Float64Var(&o.evictionRate, "max-evictions-per-second", 0, "pace the evictions of a cycle; 0 for no limit (the API client's --kube-api-qps still applies)")
	f.DurationVar(&o.drainTimeout, "drain-timeout", executor.DefaultDrainTimeout, "how long drained nodes keep their drain taint after the cycle's last eviction while replacements of the cycle are pending")
	f.BoolVar(&o.dryRun, "dry-run", false, "evict nothing: plan on the live cluster, print the plan as 'rebalancer plan' does, and record a RebalancePlanned Event on each pod it would move (the only write)")
	o.addFlags(f, kubeconfigHelp)
	return cmd
}

func (o *runOptions) validate() error {
	errs := o.flagErrors()
	if o.once && (o.interval != 0 || o.schedule != "") {
		errs = append(errs, errors.New("--once runs a single cycle: it takes no --interval or --schedule"))
	}
	if !o.once {
		if _, err := daemon.ParseSchedule(o.interval, o.schedule); err != nil {
			errs = append(errs, err)
		}
	}
	if !(o.evictionRate >= 0) { // NaN too
		errs = append(errs, fmt.Errorf("--max-evictions-per-second %g: must not be negative", o.evictionRate))
	}
	if o.drainTimeout <= 0 {
		errs = append(errs, fmt.Errorf("--drain-timeout %s: must be positive", o.drainTimeout))
	}
	if _, err := daemon.ParseWindow(o.window); err != nil {
		errs = append(errs, err)
	}
	// Checked whether or not this mode uses them: a wrong value is a
	// mistake to report, not to keep for the day the mode changes.
	if err := serving.CheckAddress(o.bindAddress); err != nil {
		errs = append(errs, fmt.Errorf("--bind-address %q: %w", o.bindAddress, err))
	}
	for _, msg := range validation.IsDNS1123Label(o.leaseNS) {
		errs = append(errs, fmt.Errorf("--leader-elect-resource-namespace %q: %s", o.leaseNS, msg))
	}
	for _, msg := range validation.IsDNS1123Subdomain(o.leaseName) {
		errs = append(errs, fmt.Errorf("--leader-elect-resource-name %q: %s", o.leaseName, msg))
	}
	return errors.Join(errs...)
}

// checkHistoryWritable makes sure, before anything is evicted, that the
// move history can be kept where --history-configmap says: a history that
// cannot be written after the evictions would let the next run move the
// same pods again. On a fresh cluster the namespace may not exist yet; the
// API server's dry-run of creating the ConfigMap tells, with the rights the
// rebalancer runs with, and writes nothing.
func (o *runOptions) checkHistoryWritable(ctx context.Context, client kubernetes.Interface) error {
	if o.history == "" {
		return nil
	}
	ns, name, _ := strings.Cut(o.history, "/") // validated
	configMaps := client.CoreV1().ConfigMaps(ns)
	if _, err := configMaps.Get(ctx, name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		return nil // there, or unreadable: loading it says so
	}
	cm := &v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	_, err := configMaps.Create(ctx, cm, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
	switch {
	case err == nil:
		return nil
	case apierrors.IsNotFound(err):
		return fmt.Errorf("--history-configmap %s: namespace %q does not exist, so the moves made could not be kept: create it (kubectl create namespace %s; manifests/ and the chart do), name a ConfigMap in a namespace that exists, or give --history-configmap \"\" to keep moves in memory only (the cooldown then does not hold across runs)", o.history, ns, ns)
	case apierrors.IsForbidden(err):
		return fmt.Errorf("--history-configmap %s: the rebalancer may not create its move history there (it needs create, get and update of ConfigMaps in %s, as manifests/rebalancer grants in its own namespace): %w", o.history, ns, err)
	default:
		return fmt.Errorf("--history-configmap %s: %w", o.history, err)
	}
}

// cycleResult is what one cycle prints with -o json or yaml; a dry-run's
// has no result.
type cycleResult struct {
	Plan   *plan.Plan       `json:"plan"`
	Result *executor.Result `json:"result,omitempty"`
}

func (o *runOptions) run(ctx context.Context, cmd *cobra.Command) error {
	logger := klog.FromContext(ctx)
	client, err := o.newClient(ctx)
	if err != nil {
		return err
	}
	if !o.dryRun {
		if err := o.checkHistoryWritable(ctx, client); err != nil {
			return err
		}
	}
	window, _ := daemon.ParseWindow(o.window) // validated
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	moves := o.newHistory(client)
	ex := executor.New(executor.Options{
		Client:                client,
		Recorder:              executor.NewEventRecorder(client, logger),
		Metrics:               executor.NewMetrics(reg),
		History:               moves,
		Validate:              o.recheck.move,
		DrainTimeout:          o.drainTimeout,
		MaxEvictionsPerSecond: o.evictionRate,
		Stop:                  ctx.Done(),
	})
	out := cmd.OutOrStdout()
	sess := o.session(client)
	if o.once {
		if !window.Contains(time.Now()) {
			logger.Info("Outside the eviction window: nothing to do", "window", window.String())
			return nil
		}
		return o.cycle(ctx, sess, ex, moves, live.Capture, out)
	}

	// Long-lived: check the inputs once before anything starts, then keep one
	// view of the cluster (one LIST per kind, then WATCH) for every cycle.
	in, err := sess.Load(ctx)
	if err != nil {
		return err
	}
	if in.ReadsUsage() {
		sess.StartSampling(ctx)
	}
	cluster := live.NewCluster(client)
	defer cluster.Stop()
	var synced atomic.Bool
	if err := cluster.Start(ctx); err != nil {
		return fmt.Errorf("reading the cluster: %w", err)
	}
	synced.Store(true)
	view := func(ctx context.Context, _ kubernetes.Interface) (*snapshot.Snapshot, error) {
		return cluster.Current(ctx)
	}
	sched, _ := daemon.ParseSchedule(o.interval, o.schedule) // validated
	opts := daemon.Options{
		Schedule:    sched,
		RunAtStart:  o.interval > 0,
		Window:      window,
		Cycle:       func(ctx context.Context) error { return o.cycle(ctx, sess, ex, moves, view, out) },
		Ready:       synced.Load,
		BindAddress: o.bindAddress,
		Registry:    reg,
	}
	if !o.dryRun {
		// A new leader lifts the drains its predecessor left at once, not
		// at the schedule's first cycle.
		opts.Lead = func(ctx context.Context) error {
			_, err := ex.CleanupDrainTaints(ctx)
			return err
		}
	}
	if o.leaderElect {
		host, _ := os.Hostname()
		opts.LeaderElection = &daemon.LeaderElection{
			Client: client, Namespace: o.leaseNS, Name: o.leaseName, Identity: host + "_" + string(uuid.NewUUID()),
			LeaseDuration: 15 * time.Second, RenewDeadline: 10 * time.Second, RetryPeriod: 2 * time.Second,
		}
	}
	logger.Info("Running", "interval", o.interval, "schedule", o.schedule, "window", window.String(), "leaderElect", o.leaderElect)
	return daemon.Run(ctx, opts)
}

// cycle plans on the cluster view and carries the plan out (or prints it,
// with --dry-run). It fails when a move failed with an API error.
func (o *runOptions) cycle(ctx context.Context, sess *session.Session, ex *executor.Executor, moves *history.History, view session.View, out io.Writer) error {
	// The stored history is read each cycle: the moves of earlier runs and
	// of an earlier leader count. Without it nothing is evicted; a dry-run
	// plans on, as plan does.
	if o.dryRun {
		var err error
		if moves, err = o.loadHistory(ctx, moves); err != nil {
			return err
		}
	} else if err := moves.Load(ctx); err != nil {
		return fmt.Errorf("refusing to plan without the move history: %w", err)
	}
	if !o.dryRun {
		// Before planning: a plan made beside a drain left by a run that
		// died mid-plan would count on its taints or evict for them.
		if err := liftStaleDrains(ctx, ex, view, !o.once); err != nil {
			return err
		}
	}
	p, opened, err := sess.Plan(ctx, view, moves)
	if err != nil {
		return err
	}
	if o.dryRun {
		ex.RecordPlanned(p)
		return printCycle(out, o.output, p, nil)
	}
	// A history that is missing or was corrupt is written now: a run that
	// could not record its moves must find out before it evicts.
	if err := moves.Flush(ctx); err != nil {
		return fmt.Errorf("refusing to evict: %w", err)
	}
	if len(p.Moves) > 0 {
		// Every move is judged again on the cluster as it is now, with the
		// moves before it made: the plan's view may be out of date.
		ctx, cancel := context.WithCancel(ctx)
		defer cancel()
		rc, err := sess.Recheck(ctx, view, opened, p)
		if err != nil {
			return err
		}
		o.recheck.set(rc)
		defer o.recheck.set(nil)
	}
	res := ex.Execute(ctx, p)
	klog.FromContext(ctx).Info("Cycle done", "plan", p.ID, "moves", len(p.Moves), "evicted", len(res.Evicted), "inBackground", len(res.InBackground), "skipped", len(res.Skipped), "errors", res.Errors)
	if err := printCycle(out, o.output, p, &res); err != nil {
		return err
	}
	if res.HistoryError != "" {
		return fmt.Errorf("the moves made could not be recorded; the next run may move the same workloads again: %s", res.HistoryError)
	}
	if res.Errors > 0 {
		return fmt.Errorf("%d of %d moves failed with API errors", res.Errors, len(p.Moves))
	}
	return nil
}

// liftStaleDrains removes the drain taints an earlier run left (see
// Executor.CleanupDrainTaints). A view kept by watches (cached) may show
// them a moment longer: it waits, briefly, until it does not.
func liftStaleDrains(ctx context.Context, ex *executor.Executor, view session.View, cached bool) error {
	lifted, err := ex.CleanupDrainTaints(ctx)
	if err != nil {
		return fmt.Errorf("removing drain taints left by an earlier run: %w", err)
	}
	if len(lifted) == 0 || !cached {
		return nil
	}
	settled := func(ctx context.Context) (bool, error) {
		snap, err := view(ctx, nil)
		if err != nil {
			return false, nil
		}
		for _, n := range snap.Nodes {
			if slices.Contains(lifted, n.Name) && slices.ContainsFunc(n.Spec.Taints, func(t v1.Taint) bool { return t.Key == wellknown.DrainTaintKey }) {
				return false, nil
			}
		}
		return true, nil
	}
	if err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 10*time.Second, true, settled); err != nil && ctx.Err() == nil {
		klog.FromContext(ctx).Info("The cluster view still shows drain taints just removed; planning anyway", "nodes", lifted)
	}
	return ctx.Err()
}

func printCycle(w io.Writer, format string, p *plan.Plan, res *executor.Result) error {
	return output.Print(w, format, cycleResult{Plan: p, Result: res}, func(w io.Writer) error {
		if err := p.Print(w, "table"); err != nil || res == nil {
			return err
		}
		reasons := map[string]int{}
		for _, s := range res.Skipped {
			reasons[s.Reason]++
		}
		var parts []string
		for r, n := range reasons {
			parts = append(parts, fmt.Sprintf("%s %d", r, n))
		}
		sort.Strings(parts)
		background := ""
		if len(res.InBackground) > 0 {
			background = fmt.Sprintf("; evicted in the background by their owners %d", len(res.InBackground))
		}
		_, err := fmt.Fprintf(w, "Evicted %d of %d%s; not carried out %d (%s); API errors %d.\n",
			len(res.Evicted), len(p.Moves), background, len(res.Skipped), strings.Join(parts, ", "), res.Errors)
		return err
	})
}

// recheck holds the running cycle's planner.Recheck for the executor's
// Validate; cycles run one at a time.
type recheck struct {
	current atomic.Pointer[planner.Recheck]
}

func (r *recheck) set(c *planner.Recheck) { r.current.Store(c) }

func (r *recheck) move(ctx context.Context, m plan.Move, pod *v1.Pod) (bool, string, string) {
	c := r.current.Load()
	if c == nil {
		return true, "", ""
	}
	return c.Move(ctx, m, pod)
}
