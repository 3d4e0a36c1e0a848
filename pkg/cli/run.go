package cli

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/rebalancer-dev/rebalancer/internal/serving"
	"github.com/rebalancer-dev/rebalancer/pkg/cycle"
	"github.com/rebalancer-dev/rebalancer/pkg/daemon"
	"github.com/rebalancer-dev/rebalancer/pkg/executor"
)

type runOptions struct {
	planOptions
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

// run hands the flags to pkg/cycle, which runs the cycles.
func (o *runOptions) run(ctx context.Context, cmd *cobra.Command) error {
	client, err := o.newClient(ctx)
	if err != nil {
		return err
	}
	window, _ := daemon.ParseWindow(o.window) // validated
	return cycle.Run(ctx, cycle.Options{
		Client:                client,
		Session:               o.session(client),
		History:               o.newHistory(client),
		HistoryConfigMap:      o.history,
		ReadHistory:           o.loadHistory,
		DryRun:                o.dryRun,
		Output:                o.output,
		Out:                   cmd.OutOrStdout(),
		DrainTimeout:          o.drainTimeout,
		MaxEvictionsPerSecond: o.evictionRate,
		Window:                window,
		Once:                  o.once,
		Interval:              o.interval,
		Schedule:              o.schedule,
		LeaderElect:           o.leaderElect,
		LeaseNamespace:        o.leaseNS,
		LeaseName:             o.leaseName,
		BindAddress:           o.bindAddress,
	})
}
