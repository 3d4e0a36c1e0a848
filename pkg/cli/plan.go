package cli

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/rebalancer-dev/rebalancer/pkg/plan"
	"github.com/rebalancer-dev/rebalancer/pkg/planner"
	"github.com/rebalancer-dev/rebalancer/pkg/policy"
	"github.com/rebalancer-dev/rebalancer/pkg/profile"
	"github.com/rebalancer-dev/rebalancer/pkg/snapshot"
)

type planOptions struct {
	policy          string
	schedulerConfig string
	schedulerName   string
	snapshot        string
	kubeconfig      string
	context         string
	output          string
	minScoreGain    int64
	maxPerWorkload  int
	allowConflicts  bool
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
		Args: cobra.NoArgs,
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
	f := cmd.Flags()
	f.StringVar(&o.policy, "policy", "", "DeschedulerPolicy (descheduler/v1alpha2) file")
	f.StringVar(&o.schedulerConfig, "scheduler-config", "", "KubeSchedulerConfiguration file of rebalancer-scheduler")
	f.StringVar(&o.schedulerName, "scheduler-name", "", "profile of the scheduler config to simulate (default: its only profile)")
	f.StringVar(&o.snapshot, "snapshot", "", "plan offline against this snapshot file (a v1 List of nodes, pods, PDBs, ...)")
	f.StringVar(&o.kubeconfig, "kubeconfig", "", "plan against the live cluster of this kubeconfig")
	f.StringVar(&o.context, "context", "", "kubeconfig context to use")
	f.StringVarP(&o.output, "output", "o", "table", "output format: "+strings.Join(plan.Formats, ", "))
	f.Int64Var(&o.minScoreGain, "min-score-gain", 1, "how much higher than its current node a balance move's target must score")
	f.IntVar(&o.maxPerWorkload, "max-per-workload", 0, "most moves of one workload (owner) per plan; 0 for no limit")
	f.BoolVar(&o.allowConflicts, "allow-conflicting-profiles", false, "plan even if the policy and the scheduler profile pull in opposite directions")
	return cmd
}

func (o *planOptions) validate() error {
	var errs []error
	if o.policy == "" {
		errs = append(errs, errors.New("--policy is required"))
	}
	if o.schedulerConfig == "" {
		errs = append(errs, errors.New("--scheduler-config is required"))
	}
	if (o.snapshot == "") == (o.kubeconfig == "") {
		errs = append(errs, errors.New("give exactly one of --snapshot and --kubeconfig"))
	}
	if o.context != "" && o.kubeconfig == "" {
		errs = append(errs, errors.New("--context needs --kubeconfig"))
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
	return errors.Join(errs...)
}

func (o *planOptions) run(ctx context.Context) (*plan.Plan, error) {
	if o.kubeconfig != "" {
		return nil, errors.New("--kubeconfig: planning against a live cluster is not available in this build; capture a snapshot with `kubectl get nodes,pods,pdb,ns,priorityclasses -A -o yaml` and use --snapshot")
	}
	// Everything is loaded and checked before anything is planned: bad input
	// of any kind ends here, with nothing planned.
	_, prof, err := profile.Load(o.schedulerConfig, o.schedulerName)
	if err != nil {
		return nil, err
	}
	snap, err := snapshot.Load(o.snapshot)
	if err != nil {
		return nil, err
	}
	registry := planner.Registry()
	var objs []runtime.Object
	for _, pc := range snap.PriorityClasses {
		objs = append(objs, pc)
	}
	pol, err := policy.Load(o.policy, fake.NewClientset(objs...), registry)
	if err != nil {
		return nil, err
	}
	if field, ok := policy.RequiresMetrics(pol); ok {
		return nil, fmt.Errorf("%s: %s needs live utilization metrics, which a snapshot does not have; plan it against the cluster or use requests-based thresholds", o.policy, field)
	}
	return planner.Plan(ctx, pol, prof, snap, registry, planner.Options{
		MinScoreGain: o.minScoreGain, MaxPerWorkload: o.maxPerWorkload, AllowConflicting: o.allowConflicts,
	})
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}
