package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/klog/v2"
	"sigs.k8s.io/yaml"

	"github.com/rebalancer-dev/rebalancer/pkg/executor"
	"github.com/rebalancer-dev/rebalancer/pkg/plan"
)

type runOptions struct {
	planOptions
	once     bool
	dryRun   bool
	cooldown time.Duration
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
honoured, with retries). --once runs one cycle, for a Job or CronJob.`,
		Example: `  rebalancer run --once --policy /etc/rebalancer/binpacking-policy.yaml \
    --scheduler-config /etc/rebalancer/binpacking-scheduler.yaml`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := o.validate(); err != nil {
				return err
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGTERM, os.Interrupt)
			defer stop()
			return o.run(ctx, cmd)
		},
	}
	f := cmd.Flags()
	f.BoolVar(&o.once, "once", false, "run one cycle and exit (Job, CronJob); the exit status says whether it failed")
	f.BoolVar(&o.dryRun, "dry-run", false, "plan on the live cluster and print the plan, as 'rebalancer plan', writing nothing")
	f.DurationVar(&o.cooldown, "cooldown", 30*time.Minute, "do not disturb a workload again within this time of moving one of its pods")
	f.StringVar(&o.policy, "policy", "", "DeschedulerPolicy (descheduler/v1alpha2) file")
	f.StringVar(&o.schedulerConfig, "scheduler-config", "", "KubeSchedulerConfiguration file of rebalancer-scheduler")
	f.StringVar(&o.schedulerName, "scheduler-name", "", "profile of the scheduler config to simulate (default: its only profile)")
	f.StringVar(&o.kubeconfig, "kubeconfig", "", "kubeconfig file (default: $KUBECONFIG, ~/.kube/config, or in-cluster)")
	f.StringVar(&o.context, "context", "", "kubeconfig context to use")
	f.StringVarP(&o.output, "output", "o", "table", "output format: "+strings.Join(plan.Formats, ", "))
	f.Int64Var(&o.minScoreGain, "min-score-gain", 1, "how much higher than its current node a balance move's target must score")
	f.IntVar(&o.maxPerWorkload, "max-per-workload", 0, "most moves of one workload (owner) per plan; 0 for no limit")
	f.BoolVar(&o.allowConflicts, "allow-conflicting-profiles", false, "run even if the policy and the scheduler profile pull in opposite directions")
	return cmd
}

func (o *runOptions) validate() error {
	var errs []error
	if !o.once {
		errs = append(errs, errors.New("--once is required: this build runs one cycle per invocation (use a CronJob for a schedule)"))
	}
	if o.policy == "" {
		errs = append(errs, errors.New("--policy is required"))
	}
	if o.schedulerConfig == "" {
		errs = append(errs, errors.New("--scheduler-config is required"))
	}
	if !contains(plan.Formats, o.output) {
		errs = append(errs, fmt.Errorf("--output %q: want one of %s", o.output, strings.Join(plan.Formats, ", ")))
	}
	if o.minScoreGain < 0 {
		errs = append(errs, fmt.Errorf("--min-score-gain %d: must not be negative", o.minScoreGain))
	}
	if o.maxPerWorkload < 0 {
		errs = append(errs, fmt.Errorf("--max-per-workload %d: must not be negative", o.maxPerWorkload))
	}
	if o.cooldown < 0 {
		errs = append(errs, fmt.Errorf("--cooldown %s: must not be negative", o.cooldown))
	}
	return errors.Join(errs...)
}

// cycleResult is what one cycle prints with -o json or yaml.
type cycleResult struct {
	Plan   *plan.Plan       `json:"plan"`
	Result *executor.Result `json:"result,omitempty"`
}

func (o *runOptions) run(ctx context.Context, cmd *cobra.Command) error {
	logger := klog.FromContext(ctx)
	client, err := newClient(o.kubeconfig, o.context)
	if err != nil {
		return err
	}
	p, err := o.planOptions.planWith(ctx, client)
	if err != nil {
		return err
	}
	out := cmd.OutOrStdout()
	if o.dryRun {
		return p.Print(out, o.output)
	}
	ex := executor.New(executor.Options{
		Client:   client,
		Recorder: executor.NewEventRecorder(client, logger),
		Cooldown: o.cooldown,
		Stop:     ctx.Done(),
	})
	if err := ex.CleanupDrainTaints(ctx); err != nil {
		return fmt.Errorf("removing drain taints left by an earlier run: %w", err)
	}
	res := ex.Execute(ctx, p)
	logger.Info("Cycle done", "plan", p.ID, "moves", len(p.Moves), "evicted", len(res.Evicted), "skipped", len(res.Skipped), "errors", res.Errors)
	if err := printCycle(out, o.output, p, &res); err != nil {
		return err
	}
	if res.Errors > 0 {
		return fmt.Errorf("%d of %d moves failed with API errors", res.Errors, len(p.Moves))
	}
	return nil
}

func printCycle(w io.Writer, format string, p *plan.Plan, res *executor.Result) error {
	switch format {
	case "json":
		b, err := json.MarshalIndent(cycleResult{Plan: p, Result: res}, "", "  ")
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(w, "%s\n", b)
		return err
	case "yaml":
		b, err := yaml.Marshal(cycleResult{Plan: p, Result: res})
		if err != nil {
			return err
		}
		_, err = w.Write(b)
		return err
	}
	if err := p.Print(w, "table"); err != nil {
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
	_, err := fmt.Fprintf(w, "Evicted %d of %d; not carried out %d (%s); API errors %d.\n",
		len(res.Evicted), len(p.Moves), len(res.Skipped), strings.Join(parts, ", "), res.Errors)
	return err
}
