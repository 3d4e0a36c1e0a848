// Package cycle is `rebalancer run`: its cycle, which opens the inputs and
// plans on the live cluster (pkg/session), rechecks the plan on a fresh
// view, carries it out (pkg/executor) and records what became of it (the
// move history, the printed result, the exit status), run once or, in the
// long-lived mode, by pkg/daemon on one view of the cluster kept by
// watches. The command line only turns its flags into Options.
package cycle

import (
	"context"
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"

	"github.com/rebalancer-dev/rebalancer/internal/output"
	"github.com/rebalancer-dev/rebalancer/pkg/daemon"
	"github.com/rebalancer-dev/rebalancer/pkg/executor"
	"github.com/rebalancer-dev/rebalancer/pkg/history"
	"github.com/rebalancer-dev/rebalancer/pkg/live"
	"github.com/rebalancer-dev/rebalancer/pkg/plan"
	"github.com/rebalancer-dev/rebalancer/pkg/session"
	"github.com/rebalancer-dev/rebalancer/pkg/wellknown"
)

// Options configure Run.
type Options struct {
	// Client is the live cluster's. Required.
	Client kubernetes.Interface
	// Session plans each cycle on Client's cluster. Required.
	Session *session.Session
	// History is the move history: read at every cycle (the moves of
	// earlier runs and of an earlier leader count), written before any
	// eviction. Required.
	History *history.History
	// HistoryConfigMap is where History is kept, namespace/name ("" in
	// memory only): Run checks, before anything is evicted, that it can be
	// written there.
	HistoryConfigMap string
	// ReadHistory reads History for a dry-run, which plans on without it
	// as plan does; it may give a history of its own. nil: History.Load,
	// whose error ends the cycle.
	ReadHistory func(ctx context.Context, moves *history.History) (*history.History, error)
	// DryRun evicts nothing: each cycle prints its plan and records a
	// RebalancePlanned Event on each pod it would move.
	DryRun bool
	// Output is the format (internal/output) each cycle prints in to Out.
	Output string
	Out    io.Writer
	// DrainTimeout and MaxEvictionsPerSecond are the executor's
	// (executor.Options).
	DrainTimeout          time.Duration
	MaxEvictionsPerSecond float64
	// Window lets cycles start only inside it; nil: any time.
	Window *daemon.Window

	// Once runs one cycle and returns its error. Otherwise Run is the
	// long-lived mode: the options below apply.
	Once bool
	// Interval and Schedule say when cycles run (daemon.ParseSchedule); an
	// interval runs one at the start too.
	Interval time.Duration
	Schedule string
	// LeaderElect runs cycles only while holding the Lease
	// LeaseNamespace/LeaseName.
	LeaderElect               bool
	LeaseNamespace, LeaseName string
	// BindAddress serves /healthz, /readyz and /metrics.
	BindAddress string
}

// Run checks that the move history can be kept, then runs one cycle
// (Once) or the long-lived mode until ctx ends (see daemon.Run).
func Run(ctx context.Context, o Options) error {
	logger := klog.FromContext(ctx)
	if !o.DryRun {
		if err := checkHistoryWritable(ctx, o.Client, o.HistoryConfigMap); err != nil {
			return err
		}
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	r := &runner{o: o, ex: executor.New(executor.Options{
		Client:                o.Client,
		Recorder:              executor.NewEventRecorder(o.Client, logger),
		Metrics:               executor.NewMetrics(reg),
		History:               o.History,
		DrainTimeout:          o.DrainTimeout,
		MaxEvictionsPerSecond: o.MaxEvictionsPerSecond,
		Stop:                  ctx.Done(),
	})}
	if o.Once {
		if !o.Window.Contains(time.Now()) {
			logger.Info("Outside the eviction window: nothing to do", "window", o.Window.String())
			return nil
		}
		return r.cycle(ctx, live.Capture, false)
	}
	return r.daemon(ctx, reg)
}

// runner runs the cycles of one Run with one executor.
type runner struct {
	o  Options
	ex *executor.Executor
}

// cycle plans on the cluster view and carries the plan out (or prints it,
// with DryRun). It fails when a move failed with an API error. cached says
// the view is kept by watches (the long-lived mode).
func (r *runner) cycle(ctx context.Context, view session.View, cached bool) error {
	o, ex, moves := r.o, r.ex, r.o.History
	// The stored history is read each cycle: the moves of earlier runs and
	// of an earlier leader count. Without it nothing is evicted; a dry-run
	// plans on, as plan does.
	if o.DryRun {
		var err error
		if moves, err = o.readHistory(ctx, moves); err != nil {
			return err
		}
	} else if err := moves.Load(ctx); err != nil {
		return fmt.Errorf("refusing to plan without the move history: %w", err)
	}
	if !o.DryRun {
		// Before planning: a plan made beside a drain left by a run that
		// died mid-plan would count on its taints or evict for them.
		if err := liftStaleDrains(ctx, ex, view, cached); err != nil {
			return err
		}
	}
	p, opened, err := o.Session.Plan(ctx, view, moves)
	if err != nil {
		return err
	}
	if o.DryRun {
		ex.RecordPlanned(p)
		return printCycle(o.Out, o.Output, p, nil)
	}
	// A history that is missing or was corrupt is written now: a run that
	// could not record its moves must find out before it evicts.
	if err := moves.Flush(ctx); err != nil {
		return fmt.Errorf("refusing to evict: %w", err)
	}
	var validate executor.Validate
	if len(p.Moves) > 0 {
		// Every move is judged again on the cluster as it is now, with the
		// moves before it made: the plan's view may be out of date. The
		// recheck's simulation runs until the plan is carried out.
		ctx, cancel := context.WithCancel(ctx)
		defer cancel()
		rc, err := o.Session.Recheck(ctx, view, opened, p)
		if err != nil {
			return err
		}
		validate = rc.Validate
	}
	res := ex.Execute(ctx, p, validate)
	klog.FromContext(ctx).Info("Cycle done", "plan", p.ID, "moves", len(p.Moves), "evicted", len(res.Evicted), "inBackground", len(res.InBackground), "skipped", len(res.Skipped), "errors", res.Errors)
	if err := printCycle(o.Out, o.Output, p, &res); err != nil {
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

// printed is what one cycle prints with -o json or yaml; a dry-run's has
// no result.
type printed struct {
	Plan   *plan.Plan       `json:"plan"`
	Result *executor.Result `json:"result,omitempty"`
}

func printCycle(w io.Writer, format string, p *plan.Plan, res *executor.Result) error {
	return output.Print(w, format, printed{Plan: p, Result: res}, func(w io.Writer) error {
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
