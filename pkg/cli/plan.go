package cli

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/rebalancer-dev/rebalancer/pkg/history"
	"github.com/rebalancer-dev/rebalancer/pkg/inputs"
	"github.com/rebalancer-dev/rebalancer/pkg/live"
	"github.com/rebalancer-dev/rebalancer/pkg/plan"
	"github.com/rebalancer-dev/rebalancer/pkg/planner"
	"github.com/rebalancer-dev/rebalancer/pkg/session"
	"github.com/rebalancer-dev/rebalancer/pkg/webhook"
	"github.com/rebalancer-dev/rebalancer/pkg/wellknown"
)

type planOptions struct {
	policy          string
	schedulerConfig []string
	schedulerName   string
	snapshot        string
	clientFlags
	output         string
	minScoreGain   int64
	maxPerWorkload string
	cooldown       time.Duration
	history        string
	allowConflicts bool
	holdEmpty      string
	everyNode      bool
	optIn          string
	webhookConfig  string
	usageWindow    time.Duration
	usageInterval  time.Duration
}

func newPlanCommand() *cobra.Command {
	o := &planOptions{}
	cmd := &cobra.Command{
		Use:   "plan",
		Short: "Print the evictions a policy would make, each judged by simulating the scheduler profile (dry-run, no writes)",
		Long: `plan runs the DeschedulerPolicy over a cluster snapshot and prints the moves it
would make: every eviction a policy plugin asks for is simulated against the
scheduler profile and kept only if the replacement has a better node to go to.
It never writes to the cluster.`,
		Example: `  rebalancer plan --policy policies/binpacking-policy.yaml \
    --scheduler-config policies/binpacking-scheduler.yaml --snapshot cluster.yaml`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := o.validate(); err != nil {
				return err
			}
			p, err := o.run(cmd.Context())
			if err != nil {
				return err
			}
			return p.Print(cmd.OutOrStdout(), o.output)
		},
	}
	o.addFlags(cmd.Flags(), "plan against the live cluster of this kubeconfig, unless --snapshot is given "+kubeconfigDefaults)
	cmd.Flags().StringVar(&o.snapshot, "snapshot", "", "plan offline against this snapshot file (a v1 List of nodes, pods, PDBs, ...)")
	return cmd
}

// addFlags registers the flags plan and run share.
func (o *planOptions) addFlags(f *pflag.FlagSet, kubeconfigHelp string) {
	f.StringVar(&o.policy, "policy", "", "DeschedulerPolicy (descheduler/v1alpha2) file")
	f.StringArrayVar(&o.schedulerConfig, "scheduler-config", nil, "KubeSchedulerConfiguration file of a scheduler of the cluster; repeat it for each (default-scheduler is modelled with kube-scheduler's defaults unless a file configures it)")
	f.StringVar(&o.schedulerName, "scheduler-name", "", "model only the profile of this schedulerName; pods of other schedulers are not moved (default: every profile)")
	o.clientFlags.addFlags(f, kubeconfigHelp) // o.addFlags is planOptions's own
	f.StringVarP(&o.output, "output", "o", "table", "output format: "+strings.Join(plan.Formats, ", "))
	f.Int64Var(&o.minScoreGain, "min-score-gain", 1, "how much higher than its current node a balance move's target must score")
	f.StringVar(&o.maxPerWorkload, "max-per-workload", "0", "most pods of one workload (owner) moved within the cooldown, this plan's included: a number, or a percentage of the workload's pods such as 10% (rounded up); 0 for no limit")
	f.DurationVar(&o.cooldown, "cooldown", 30*time.Minute, "leave a workload's pods on a node alone for this long after moving one of its pods there")
	f.StringVar(&o.history, "history-configmap", "rebalancer-system/rebalancer-history", `namespace/name of the ConfigMap that keeps the moves made, so the cooldown holds across runs and replicas and a dry-run shows it; "" keeps moves in memory only (live cluster only)`)
	f.BoolVar(&o.allowConflicts, "allow-conflicting-profiles", false, "plan even if the policy and the scheduler profile pull in opposite directions")
	f.BoolVar(&o.everyNode, "every-node", false, everyNodeHelp)
	f.StringVar(&o.holdEmpty, "hold-empty-nodes", "auto", "keep empty nodes off limits (drain taint) until the plan's replacements are bound, for schedulers that ignore hints: --hold-empty-nodes=true (or alone), =false, or =auto (when the policy packs)")
	f.Lookup("hold-empty-nodes").NoOptDefVal = "true"
	f.StringVar(&o.optIn, "opt-in-namespaces", "", "label selector of the namespaces whose pods rebalancer's webhook gives rebalancer-scheduler, e.g. "+wellknown.SchedulerLabel+"="+webhook.Enabled+" (offline; live, it overrides --webhook-configuration)")
	f.DurationVar(&o.usageWindow, "usage-window", time.Minute, "how long a node's usage must last to count, for policies and profiles that read usage (a node is as hot as its coolest sample); 0: the newest sample")
	f.DurationVar(&o.usageInterval, "usage-interval", 15*time.Second, "how often a live cluster's usage is sampled over --usage-window (metrics-server samples every 15s by default)")
	f.StringVar(&o.webhookConfig, "webhook-configuration", webhook.DefaultConfiguration, `MutatingWebhookConfiguration of rebalancer's webhook, read live: the pods it gives rebalancer-scheduler are planned as that scheduler's; "" reads none`)
}

// flagErrors checks the flags plan and run share.
func (o *planOptions) flagErrors() []error {
	errs := o.errors()
	if o.policy == "" {
		errs = append(errs, errors.New("--policy is required"))
	}
	if o.policy == "-" {
		errs = append(errs, errors.New("--policy -: standard input is read for --snapshot only; give the policy's file"))
	}
	for _, f := range o.schedulerConfig {
		if f == "-" {
			errs = append(errs, errors.New("--scheduler-config -: standard input is read for --snapshot only; give the configuration's file"))
		}
	}
	if len(o.schedulerConfig) == 0 {
		errs = append(errs, errors.New("--scheduler-config is required"))
	}
	errs = append(errs, checkReadable("policy", o.policy), checkReadable("snapshot", o.snapshot))
	for _, f := range o.schedulerConfig {
		errs = append(errs, checkReadable("scheduler-config", f))
	}
	if o.schedulerName != "" {
		for _, msg := range validation.IsDNS1123Subdomain(o.schedulerName) {
			errs = append(errs, fmt.Errorf("--scheduler-name %q: %s", o.schedulerName, msg))
		}
	}
	if _, err := parseHold(o.holdEmpty); err != nil {
		errs = append(errs, fmt.Errorf("--hold-empty-nodes %q: %w", o.holdEmpty, err))
	}
	if o.webhookConfig != "" {
		for _, msg := range validation.IsDNS1123Subdomain(o.webhookConfig) {
			errs = append(errs, fmt.Errorf("--webhook-configuration %q: %s", o.webhookConfig, msg))
		}
	}
	if !slices.Contains(plan.Formats, o.output) {
		errs = append(errs, fmt.Errorf("--output %q: want one of %s", o.output, strings.Join(plan.Formats, ", ")))
	}
	if o.minScoreGain < 0 {
		errs = append(errs, fmt.Errorf("--min-score-gain %d: must not be negative", o.minScoreGain))
	}
	if _, err := labels.Parse(o.optIn); err != nil {
		errs = append(errs, fmt.Errorf("--opt-in-namespaces %q: %w", o.optIn, err))
	}
	if _, err := parseWorkloadLimit(o.maxPerWorkload); err != nil {
		errs = append(errs, fmt.Errorf("--max-per-workload %q: %w", o.maxPerWorkload, err))
	}
	if o.cooldown < 0 {
		errs = append(errs, fmt.Errorf("--cooldown %s: must not be negative", o.cooldown))
	}
	if o.usageWindow < 0 || o.usageWindow > time.Hour {
		errs = append(errs, fmt.Errorf("--usage-window %s: want 0 to 1h", o.usageWindow))
	}
	if o.usageInterval < time.Second || o.usageInterval > 10*time.Minute {
		errs = append(errs, fmt.Errorf("--usage-interval %s: want 1s to 10m", o.usageInterval))
	}
	if o.history != "" {
		ns, name, ok := strings.Cut(o.history, "/")
		msgs := append(validation.IsDNS1123Label(ns), validation.IsDNS1123Subdomain(name)...)
		if !ok || len(msgs) > 0 {
			errs = append(errs, fmt.Errorf("--history-configmap %q: want namespace/name: %s", o.history, strings.Join(msgs, "; ")))
		}
	}
	return errs
}

// parseWorkloadLimit reads --max-per-workload: a count, or a percentage of
// the workload's pods.
func parseWorkloadLimit(s string) (intstr.IntOrString, error) {
	if pct, ok := strings.CutSuffix(s, "%"); ok {
		n, err := strconv.Atoi(pct)
		if err != nil || n < 1 || n > 100 {
			return intstr.IntOrString{}, errors.New("want a percentage from 1% to 100%")
		}
		return intstr.FromString(s), nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 {
		return intstr.IntOrString{}, errors.New("want a number of pods (0 for no limit) or a percentage such as 10%")
	}
	return intstr.FromInt(n), nil
}

// parseHold reads --hold-empty-nodes.
func parseHold(s string) (planner.Hold, error) {
	switch strings.ToLower(s) {
	case "auto":
		return planner.HoldAuto, nil
	case "true":
		return planner.HoldAlways, nil
	case "false":
		return planner.HoldNever, nil
	}
	return "", errors.New("want true, false or auto")
}

// newHistory returns the move history: kept in the --history-configmap of
// the live cluster of client, or in memory (no client, or no ConfigMap).
func (o *planOptions) newHistory(client kubernetes.Interface) *history.History {
	if client == nil || o.history == "" {
		return history.New(clock.RealClock{}, o.cooldown)
	}
	ns, name, _ := strings.Cut(o.history, "/") // validated
	return history.NewStored(clock.RealClock{}, o.cooldown, history.NewStore(client, ns, name))
}

func (o *planOptions) validate() error {
	errs := o.flagErrors()
	if o.snapshot != "" && o.kubeconfig != "" {
		errs = append(errs, errors.New("give one of --snapshot (offline) and --kubeconfig (a live cluster), not both"))
	}
	if o.snapshot != "" && o.context != "" {
		errs = append(errs, errors.New("--context picks a live cluster: it takes no --snapshot"))
	}
	return errors.Join(errs...)
}

func (o *planOptions) run(ctx context.Context) (*plan.Plan, error) {
	var client kubernetes.Interface
	if o.snapshot == "" {
		var err error
		if client, err = o.newClient(ctx); errors.Is(err, errNoCluster) {
			return nil, fmt.Errorf("%w; to plan offline, give --snapshot FILE (rebalancer snapshot capture writes one)", err)
		} else if err != nil {
			return nil, err
		}
	}
	moves, err := o.loadHistory(ctx, o.newHistory(client))
	if err != nil {
		return nil, err
	}
	p, _, err := o.session(client).Plan(ctx, live.Capture, moves)
	return p, err
}

// loadHistory reads the move history for a plan that evicts nothing (plan,
// run --dry-run): it shows the cooldown skips run would make. A user who
// may read pods and nodes but not the history's ConfigMap still gets a
// plan, with a warning that it may list moves the cooldown would skip; any
// other failure stops the plan.
func (o *planOptions) loadHistory(ctx context.Context, moves *history.History) (*history.History, error) {
	err := moves.Load(ctx)
	if err == nil {
		return moves, nil
	}
	if apierrors.IsForbidden(err) {
		klog.FromContext(ctx).Info("Warning: cannot read the move history, so cooldowns are not known: the plan may list moves that run would skip", "historyConfigMap", o.history, "err", err.Error())
		return history.New(clock.RealClock{}, o.cooldown), nil
	}
	return nil, fmt.Errorf("%w (plan reads the move history to show the cooldown skips run would make; --history-configmap \"\" plans without it)", err)
}

// session is the planning session the flags set up, on the live cluster of
// client, or offline on --snapshot when client is nil.
func (o *planOptions) session(client kubernetes.Interface) *session.Session {
	limit, _ := parseWorkloadLimit(o.maxPerWorkload) // validated
	hold, _ := parseHold(o.holdEmpty)                // validated
	opts := session.Options{
		Files:  inputs.Files{Policy: o.policy, SchedulerConfigs: o.schedulerConfig, SchedulerName: o.schedulerName, Snapshot: o.snapshot},
		Client: client,
		Planner: planner.Options{
			MinScoreGain: o.minScoreGain, MaxPerWorkload: limit, AllowConflicting: o.allowConflicts, HoldEmptyNodes: hold,
		},
		UsageWindow: o.usageWindow, UsageInterval: o.usageInterval, EveryNode: o.everyNode,
		WebhookConfiguration: o.webhookConfig,
	}
	if o.optIn != "" {
		opts.OptIn, _ = labels.Parse(o.optIn) // validated with the flags
		opts.OptInFrom = "--opt-in-namespaces " + o.optIn
	}
	return session.New(opts)
}

const everyNodeHelp = "plan through kube-scheduler's framework on every node, without rebalancer's node classes and plugin memo: the same answers, slower (to check them)"
