package cli

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/kubernetes"
	"k8s.io/kubernetes/pkg/scheduler/apis/config"

	"github.com/rebalancer-dev/rebalancer/internal/serving"
	"github.com/rebalancer-dev/rebalancer/pkg/estimator"
	"github.com/rebalancer-dev/rebalancer/pkg/fakeapi"
	"github.com/rebalancer-dev/rebalancer/pkg/inputs"
	"github.com/rebalancer-dev/rebalancer/pkg/policy"
	"github.com/rebalancer-dev/rebalancer/pkg/profile"
	"github.com/rebalancer-dev/rebalancer/pkg/session"
	"github.com/rebalancer-dev/rebalancer/pkg/snapshot"
	"github.com/rebalancer-dev/rebalancer/pkg/webhook"
	"github.com/rebalancer-dev/rebalancer/pkg/wellknown"
)

type estimatorOptions struct {
	clientFlags
	policy                     string
	schedulerConfig            []string
	schedulerName              string
	snapshot                   string
	maxReplicas                int32
	workers                    int
	clusterName                string
	karmadaKubeconfig          string
	budget, resync             time.Duration
	optIn, webhookConfig       string
	usageWindow, usageInterval time.Duration
	grpc                       estimator.GRPCOptions
	serving                    serving.Options
}

func newEstimatorCommand() *cobra.Command {
	o := &estimatorOptions{}
	cmd := &cobra.Command{
		Use:   "estimator",
		Short: "Serve Karmada's replica estimator API for this cluster, answered by simulating its scheduler",
		Long: `estimator answers the questions Karmada's scheduler asks each member
cluster's karmada-scheduler-estimator (gRPC service Estimator, port 10352):
how many more replicas of a workload fit (MaxAvailableReplicas), how many
whole sets of a multi-component workload fit (MaxAvailableComponentSets),
and how many of a workload's pods stay unschedulable
(GetUnschedulableReplicas; with --policy, the pods the cluster's rebalancer
makes room for are not counted). It answers by placing copies of the workload's
pod one by one with the cluster's own scheduler profile, in a fork of the
simulated cluster, so inter-pod anti-affinity, topology spread, taints,
affinity and DRA devices count; copies that meet only through the nodes'
resources are counted node by node in one pass, to the same answer. When Karmada names a workload this
cluster has, the copies are its pod template, or offline its newest pod;
a workload the cluster does not have yet is copied from its resource
template on Karmada's control plane (--karmada-kubeconfig); otherwise the
copies are built from the request. Templates are read through informers:
an answer makes no request. Trouble, or an answer not found within --answer-timeout, is
answered -1 (no opinion). The cluster is read through informers and
simulated afresh every --resync, or read once from --snapshot, as
` + "`rebalancer plan`" + ` reads and simulates it: with rebalancer's extenders that
the scheduler configurations list and that answer, the scheduler
rebalancer's webhook gives the pods of opted-in namespaces, and the usage
over --usage-window. /healthz, /readyz and /metrics are served on
--bind-address.`,
		Example: `  rebalancer estimator --scheduler-config /etc/kubernetes/scheduler.yaml
  rebalancer estimator --snapshot cluster.yaml --grpc-bind-address 127.0.0.1:10352`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := o.validate(); err != nil {
				return err
			}
			in, err := o.inputs()
			if err != nil {
				return err
			}
			profiles := in.Schedulers
			run := estimator.RunOptions{Resync: o.resync, Budget: o.budget, ClusterName: o.clusterName, GRPC: o.grpc, Serving: o.serving}
			opts := estimator.Options{MaxReplicas: o.maxReplicas, SchedulerName: o.schedulerName, Workers: o.workers}
			if err := opts.Validate(profiles); err != nil {
				if len(o.schedulerConfig) == 0 {
					return fmt.Errorf("%w (kube-scheduler's default profile: no --scheduler-config is given); give the --scheduler-config that configures it", err)
				}
				return fmt.Errorf("%w (--scheduler-config %s)", err, strings.Join(o.schedulerConfig, ", "))
			}
			var classes kubernetes.Interface // the policy's PriorityClass names resolve against it
			if o.snapshot != "" {
				if run.Snapshot, err = snapshot.Load(o.snapshot); err != nil {
					return err
				}
				if classes, err = fakeapi.Clientset(&snapshot.Snapshot{PriorityClasses: run.Snapshot.PriorityClasses}); err != nil {
					return err
				}
			} else {
				if run.Client, err = o.newClient(cmd.Context()); err != nil {
					return err
				}
				opts.Templates = estimator.NewTemplates(run.Client)
				classes = run.Client
			}
			if o.karmadaKubeconfig != "" {
				karmada := clientFlags{kubeconfig: o.karmadaKubeconfig, flag: "karmada-kubeconfig", qps: o.qps, burst: o.burst}
				client, err := karmada.newClient(cmd.Context()) // its errors name the flag
				if err != nil {
					return err
				}
				opts.Karmada = estimator.NewTemplates(client).ReadThrough()
			}
			if o.policy != "" {
				if in.Policy, err = policy.Load(o.policy, classes, policy.Registry()); err != nil {
					return err
				}
				if in.Metrics, err = policy.MetricsOf(in.Policy); err != nil {
					return fmt.Errorf("%s: %w", o.policy, err)
				}
			}
			est := estimator.New(opts, o.session(run.Client), in)
			return estimator.Run(cmd.Context(), est, run)
		},
	}
	f := cmd.Flags()
	f.StringArrayVar(&o.schedulerConfig, "scheduler-config", nil, "KubeSchedulerConfiguration file of a scheduler of the cluster; repeat it for each (default-scheduler is modelled with kube-scheduler's defaults unless a file configures it)")
	f.StringVar(&o.policy, "policy", "", "the DeschedulerPolicy the cluster's rebalancer runs: a pending pod its plan makes room for (MakeRoom) is not counted unschedulable (default: none)")
	f.StringVar(&o.schedulerName, "scheduler-name", v1.DefaultSchedulerName, "the scheduler of replicas built from a request (a workload this cluster has no pod of yet)")
	f.StringVar(&o.snapshot, "snapshot", "", "answer for this snapshot file, read once, instead of the live cluster")
	f.StringVar(&o.clusterName, "cluster-name", "", "this member cluster's name in Karmada: questions about another cluster are refused, as Karmada's own estimator refuses them (default: answer every question)")
	f.StringVar(&o.karmadaKubeconfig, "karmada-kubeconfig", "", "kubeconfig file of Karmada's control plane (karmada-apiserver): a workload this cluster does not have yet is estimated from its resource template there (default: from its requests alone)")
	f.Int32Var(&o.maxReplicas, "max-replicas", 1000, "the largest answer: copies placed per question (an answer of this many means at least this many)")
	f.IntVar(&o.workers, "workers", 1, "questions answered at once, each on a simulation of its own of every read of the cluster (each costs the memory of one simulation)")
	f.DurationVar(&o.budget, "answer-timeout", estimator.DefaultBudget, "longest time an answer may take; past it the answer is -1 (Karmada's scheduler waits 3s)")
	f.DurationVar(&o.resync, "resync", 30*time.Second, "how often the live cluster is simulated afresh")
	f.StringVar(&o.optIn, "opt-in-namespaces", "", "label selector of the namespaces whose pods rebalancer's webhook gives rebalancer-scheduler, e.g. "+wellknown.SchedulerLabel+"="+webhook.Enabled+" (offline; live, it overrides --webhook-configuration)")
	f.StringVar(&o.webhookConfig, "webhook-configuration", webhook.DefaultConfiguration, `MutatingWebhookConfiguration of rebalancer's webhook, read live: the pods it gives rebalancer-scheduler are simulated as that scheduler's; "" reads none`)
	f.DurationVar(&o.usageWindow, "usage-window", time.Minute, "how long a node's usage must last to count, for policies and profiles that read usage (a node is as hot as its coolest sample); 0: the newest sample")
	f.DurationVar(&o.usageInterval, "usage-interval", 15*time.Second, "how often a live cluster's usage is sampled over --usage-window, for policies and profiles that read usage")
	f.StringVar(&o.grpc.Address, "grpc-bind-address", ":10352", "address of the estimator's gRPC service")
	f.StringVar(&o.grpc.CertFile, "grpc-tls-cert-file", "", "serve gRPC over TLS with this certificate (PEM); with --grpc-tls-private-key-file")
	f.StringVar(&o.grpc.KeyFile, "grpc-tls-private-key-file", "", "private key of --grpc-tls-cert-file (PEM)")
	f.StringVar(&o.serving.Address, "bind-address", ":10351", "address of /healthz, /readyz and /metrics")
	o.addFlags(f, "kubeconfig file of the cluster to answer for "+kubeconfigDefaults)
	return cmd
}

func (o *estimatorOptions) validate() error {
	errs := o.errors()
	if o.maxReplicas < 1 {
		errs = append(errs, fmt.Errorf("--max-replicas %d: must be at least 1", o.maxReplicas))
	}
	if o.workers < 1 {
		errs = append(errs, fmt.Errorf("--workers %d: must be at least 1", o.workers))
	}
	if o.budget <= 0 {
		errs = append(errs, fmt.Errorf("--answer-timeout %s: must be positive", o.budget))
	}
	if o.resync < time.Second {
		errs = append(errs, fmt.Errorf("--resync %s: must be at least 1s", o.resync))
	}
	if (o.grpc.CertFile == "") != (o.grpc.KeyFile == "") {
		errs = append(errs, errors.New("--grpc-tls-cert-file and --grpc-tls-private-key-file go together"))
	}
	if err := serving.CheckAddress(o.grpc.Address); err != nil {
		errs = append(errs, fmt.Errorf("--grpc-bind-address: %w", err))
	}
	if err := o.serving.Validate(); err != nil {
		errs = append(errs, err)
	}
	if o.clusterName != "" {
		for _, msg := range validation.IsDNS1123Label(o.clusterName) {
			errs = append(errs, fmt.Errorf("--cluster-name %q: %s", o.clusterName, msg))
		}
	}
	for _, msg := range validation.IsDNS1123Subdomain(o.schedulerName) {
		errs = append(errs, fmt.Errorf("--scheduler-name %q: %s", o.schedulerName, msg))
	}
	if o.webhookConfig != "" {
		for _, msg := range validation.IsDNS1123Subdomain(o.webhookConfig) {
			errs = append(errs, fmt.Errorf("--webhook-configuration %q: %s", o.webhookConfig, msg))
		}
	}
	if _, err := labels.Parse(o.optIn); err != nil {
		errs = append(errs, fmt.Errorf("--opt-in-namespaces %q: %w", o.optIn, err))
	}
	if o.usageWindow < 0 || o.usageWindow > time.Hour {
		errs = append(errs, fmt.Errorf("--usage-window %s: want 0 to 1h", o.usageWindow))
	}
	if o.usageInterval < time.Second || o.usageInterval > 10*time.Minute {
		errs = append(errs, fmt.Errorf("--usage-interval %s: want 1s to 10m", o.usageInterval))
	}
	errs = append(errs, checkReadable("snapshot", o.snapshot), checkReadable("policy", o.policy), checkReadable("karmada-kubeconfig", o.karmadaKubeconfig),
		checkReadable("grpc-tls-cert-file", o.grpc.CertFile), checkReadable("grpc-tls-private-key-file", o.grpc.KeyFile))
	for _, f := range o.schedulerConfig {
		errs = append(errs, checkReadable("scheduler-config", f))
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	// The flags are right: the serving pair is read, and one that has
	// expired or is not valid yet is refused, as the webhook's and the
	// extender's are.
	return o.grpc.Validate()
}

// inputs are the cluster's schedulers: the files' profiles, with the
// extenders they list, and kube-scheduler's default profile for
// default-scheduler unless a file configures it.
func (o *estimatorOptions) inputs() (*inputs.Inputs, error) {
	in := &inputs.Inputs{}
	if len(o.schedulerConfig) > 0 {
		var err error
		in.Schedulers, in.Extenders, err = profile.Schedulers(o.schedulerConfig, "")
		return in, err
	}
	cfg, err := profile.Default()
	if err != nil {
		return nil, err
	}
	in.Schedulers = []*config.KubeSchedulerProfile{&cfg.Profiles[0]}
	return in, nil
}

// session simulates and plans for the estimator as plan does, on the live
// cluster of client (nil: offline, on --snapshot).
func (o *estimatorOptions) session(client kubernetes.Interface) *session.Session {
	opts := session.Options{
		Client: client, UsageWindow: o.usageWindow, UsageInterval: o.usageInterval, WebhookConfiguration: o.webhookConfig,
	}
	if o.optIn != "" {
		opts.OptIn, _ = labels.Parse(o.optIn) // validated with the flags
		opts.OptInFrom = "--opt-in-namespaces " + o.optIn
	}
	return session.New(opts)
}
