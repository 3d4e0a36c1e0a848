package cli

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/schollz/progressbar/v3"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"golang.org/x/term"
	"k8s.io/klog/v2"

	"github.com/rebalancer-dev/rebalancer/pkg/plan"
	"github.com/rebalancer-dev/rebalancer/pkg/report"
	"github.com/rebalancer-dev/rebalancer/pkg/rounds"
	"github.com/rebalancer-dev/rebalancer/pkg/rounds/result"
	"github.com/rebalancer-dev/rebalancer/pkg/version"
)

type simulateOptions struct {
	planOptions
	rounds   int
	replays  int
	arrivals int
	baseline string
	report   string
	interval time.Duration
	quiet    bool
}

func newSimulateCommand() *cobra.Command {
	o := &simulateOptions{}
	cmd := &cobra.Command{
		Use:   "simulate",
		Short: "Run rebalancing rounds on a snapshot in memory and measure the cluster after each",
		Long: `simulate repeats, on a snapshot and in memory: plan, evict the planned pods,
let the scheduler profile re-place them as their owners recreate them (in
scheduling-queue order, following rebalancer's hints), and measure nodes in
use, utilization, unschedulable pods, pending pods placed and ping-pong
(a pod's line evicted again within --cooldown). With --arrivals, the
snapshot's pending pods come in a few per round instead of all at once
(see snapshot openb --queue-from). --baseline upstream runs
the same policy the way the upstream descheduler does (its plugins, its
evictor, every eviction it asks for) with the same scheduler profile
re-placing pods, for comparison.`,
		Example: `  rebalancer simulate --snapshot cluster.yaml --policy policies/binpacking-policy.yaml \
    --scheduler-config policies/binpacking-scheduler.yaml --rounds 10 --baseline upstream --report report.html`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := o.validate(cmd.Flags()); err != nil {
				return err
			}
			return o.run(cmd)
		},
	}
	f := cmd.Flags()
	o.addFlags(f, "")
	// simulate is offline only: validate refuses these.
	for _, name := range liveOnly {
		if err := f.MarkHidden(name); err != nil {
			panic(err) // the flag is registered just above
		}
	}
	f.StringVar(&o.snapshot, "snapshot", "", "snapshot file to simulate on")
	f.IntVar(&o.rounds, "rounds", 10, "rounds to simulate")
	f.IntVar(&o.arrivals, "arrivals", 0, "hold the snapshot's pending pods back and let this many in per round, oldest first, before its plan (0: all pending from round 0)")
	f.IntVar(&o.replays, "replays", 0, "also carry each round's plan out this many times with the schedulers' random choices (ties, node sampling) drawn anew, and count those that held")
	f.StringVar(&o.baseline, "baseline", "", `also simulate a baseline: "upstream" (the descheduler's own plugins and evictor)`)
	f.StringVar(&o.report, "report", "", "write a self-contained HTML report to this file")
	f.DurationVar(&o.interval, "interval", 10*time.Minute, "time between rounds, as run's --interval")
	f.BoolVarP(&o.quiet, "quiet", "q", false, "print no progress on stderr (a line per phase and per round)")
	return cmd
}

// liveOnly are the flags of plan that simulate, offline only, refuses.
var liveOnly = []string{"kubeconfig", "context", "kube-api-qps", "kube-api-burst", "history-configmap", "webhook-configuration"}

func (o *simulateOptions) validate(flags *pflag.FlagSet) error {
	errs := o.flagErrors()
	if o.snapshot == "" {
		errs = append(errs, errors.New("--snapshot is required"))
	}
	for _, name := range liveOnly {
		if flags.Changed(name) {
			errs = append(errs, fmt.Errorf("--%s: simulate works on snapshots only (write one with `rebalancer snapshot capture`)", name))
		}
	}
	if o.rounds < 1 || o.rounds > 1000 {
		errs = append(errs, fmt.Errorf("--rounds %d: must be between 1 and 1000", o.rounds))
	}
	if o.arrivals < 0 {
		errs = append(errs, fmt.Errorf("--arrivals %d: must not be negative", o.arrivals))
	}
	if o.replays < 0 || o.replays > 1000 {
		errs = append(errs, fmt.Errorf("--replays %d: must be between 0 and 1000", o.replays))
	}
	if o.baseline != "" && o.baseline != rounds.Upstream {
		errs = append(errs, fmt.Errorf("--baseline %q: the only baseline is %q", o.baseline, rounds.Upstream))
	}
	if o.interval <= 0 {
		errs = append(errs, fmt.Errorf("--interval %s: must be positive", o.interval))
	}
	if o.report != "" && !strings.HasSuffix(o.report, ".html") {
		errs = append(errs, fmt.Errorf("--report %s: want an .html file", o.report))
	} else if o.report != "" {
		if err := checkWritable(o.report); err != nil {
			errs = append(errs, fmt.Errorf("--report %w", err))
		}
	}
	return errors.Join(errs...)
}

func (o *simulateOptions) run(cmd *cobra.Command) error {
	ctx := cmd.Context()
	total := o.rounds
	if o.baseline != "" {
		total *= 2
	}
	progress, round, done := o.progress(cmd.ErrOrStderr(), total)
	defer done()
	progress("reading %s and building the simulation", o.snapshot)
	sess := o.session(nil)
	opened, err := sess.Open(ctx, nil)
	if err != nil {
		return err
	}
	in := opened.Inputs
	if len(in.Metrics.Queries) > 0 && o.rounds > 1 {
		// Nothing says how a query's value follows a pod (see planner).
		klog.FromContext(ctx).Info("Warning: the snapshot's Prometheus answers do not follow the simulated moves; every round reads them as captured, so nodes hot by a query stay hot",
			"queries", len(in.Metrics.Queries))
	}
	opts := rounds.Options{
		Strategy: rounds.Rebalancer, Rounds: o.rounds, Replays: o.replays, Arrivals: o.arrivals,
		Interval: o.interval, Cooldown: o.cooldown,
		Progress: func(strategy string, i int, r result.Round) {
			if i == 0 {
				progress("%s: round 0 (the snapshot): %d nodes in use, lower bound %d (by node class %d)", strategy, r.NodesInUse, r.LowerBound, r.ClassLowerBound)
				return
			}
			skips := ""
			if strategy == rounds.Rebalancer { // the baseline does not say why
				skips = "; top skips: " + r.TopSkips(3)
			}
			round(fmt.Sprintf("%s: %d nodes in use (lower bound %d, by node class %d)", strategy, r.NodesInUse, r.LowerBound, r.ClassLowerBound),
				fmt.Sprintf("%s: round %d of %d: %d evictions, %d nodes in use (lower bound %d, by node class %d)%s",
					strategy, i, o.rounds, r.Evictions, r.NodesInUse, r.LowerBound, r.ClassLowerBound, skips))
		},
	}
	var c result.Comparison
	c.Rebalancer, err = rounds.Run(ctx, sess, opened, opts)
	if err == nil && o.baseline != "" {
		opts.Strategy = o.baseline
		if c.Baseline, err = rounds.Run(ctx, sess, opened, opts); err != nil && ctx.Err() == nil {
			return fmt.Errorf("baseline %s: %w", o.baseline, err)
		}
	}
	if err != nil && (ctx.Err() == nil || c.Rebalancer == nil) {
		return err // a failure, or stopped before the first round
	}
	// Finished, or interrupted: the rounds finished are printed either way,
	// an interrupted simulation marked so and ending with an error.
	if o.report != "" {
		meta := report.Meta{
			Title:   fmt.Sprintf("%s · %s · %s", filepath.Base(o.snapshot), filepath.Base(o.policy), baseNames(o.schedulerConfig)),
			Version: version.String(), Date: time.Now(), Command: commandLine(),
		}
		if werr := writeAtomically(o.report, func(w io.Writer) error { return report.Write(w, meta, &c) }, nil); werr != nil {
			return werr
		}
	}
	if perr := c.Print(cmd.OutOrStdout(), o.output); perr != nil {
		return perr
	}
	if err != nil {
		return fmt.Errorf("interrupted; the rounds finished are printed: %w", err)
	}
	if hint := nothingPlanned(c.Rebalancer); hint != "" {
		klog.FromContext(ctx).Info(hint)
	}
	return nil
}

// progress returns simulate's progress printers on stderr (stdout holds
// only the result): say for a phase, round for a finished round (short for
// a bar, long for a line), done at the end. On a terminal, a bar of the
// rounds; elsewhere (a CronJob's log, a pipe), a plain line each; nothing
// with --quiet.
func (o *simulateOptions) progress(w io.Writer, rounds int) (say func(format string, args ...any), round func(short, long string), done func()) {
	if o.quiet {
		return func(string, ...any) {}, func(string, string) {}, func() {}
	}
	if f, ok := w.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		bar := progressbar.NewOptions(rounds, progressbar.OptionSetWriter(w), progressbar.OptionShowCount(),
			progressbar.OptionSetElapsedTime(true), progressbar.OptionSetWidth(30), progressbar.OptionSetPredictTime(false),
			progressbar.OptionSetDescription("simulate"), progressbar.OptionOnCompletion(func() { fmt.Fprintln(w) }))
		say = func(format string, args ...any) { bar.Describe(fmt.Sprintf(format, args...)) }
		round = func(short, _ string) {
			bar.Describe(short)
			_ = bar.Add(1)
		}
		return say, round, func() { _ = bar.Exit() }
	}
	start := time.Now()
	say = func(format string, args ...any) {
		fmt.Fprintf(w, "simulate [%4.0fs] %s\n", time.Since(start).Seconds(), fmt.Sprintf(format, args...))
	}
	return say, func(_, long string) { say("%s", long) }, func() {}
}

// nothingPlanned explains, once, a simulation in which no round evicted
// anything because no scheduler of the pods could be steered or modelled:
// what to do about it, rather than a warning each round.
func nothingPlanned(res *result.Result) string {
	unsteered := 0
	for _, r := range res.Rounds {
		if r.Evictions > 0 {
			return ""
		}
		unsteered = max(unsteered, r.Skipped[plan.ReasonUnsteered]+r.Skipped[plan.ReasonUnknownScheduler]+r.Skipped[plan.ReasonConflict])
	}
	if unsteered == 0 {
		return ""
	}
	return fmt.Sprintf("No round moved a pod: up to %d moves a round were skipped because their pods' scheduler does not follow rebalance hints, pulls against the policy, or is not modelled (skips %s, %s, %s). Give the scheduler that places them with --scheduler-config (for example policies/binpacking-scheduler.yaml for pods that name rebalancer-scheduler; snapshot openb --pod-scheduler-name writes them so), or steer default-scheduler with the extender or the namespace webhook: see docs/schedulers.md",
		unsteered, plan.ReasonUnsteered, plan.ReasonConflict, plan.ReasonUnknownScheduler)
}

// commandLine is the process's command line, each argument quoted where
// the shell would need it.
func commandLine() string {
	args := make([]string, len(os.Args))
	for i, a := range os.Args {
		args[i] = a
		if a == "" || strings.ContainsAny(a, " \t\"'$`\\*?[]{}()<>|&;#~") {
			args[i] = strconv.Quote(a)
		}
	}
	args[0] = filepath.Base(args[0])
	return strings.Join(args, " ")
}

func baseNames(paths []string) string {
	out := make([]string, len(paths))
	for i, p := range paths {
		out[i] = filepath.Base(p)
	}
	return strings.Join(out, ", ")
}
