// Package inputs turns the command line's files into the checked triple
// every command starts from: the DeschedulerPolicy, the scheduler profiles
// and, offline, the cluster snapshot. plan, run, simulate and the
// benchmarks load through it, so a bad input is refused the same way
// everywhere, before anything is planned.
package inputs

import (
	"context"
	"fmt"
	"slices"

	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"
	"k8s.io/kubernetes/pkg/scheduler/apis/config"
	"sigs.k8s.io/descheduler/pkg/api"

	"github.com/rebalancer-dev/rebalancer/pkg/fakeapi"
	"github.com/rebalancer-dev/rebalancer/pkg/policy"
	"github.com/rebalancer-dev/rebalancer/pkg/profile"
	"github.com/rebalancer-dev/rebalancer/pkg/scheduler/loadaware"
	"github.com/rebalancer-dev/rebalancer/pkg/snapshot"
	"github.com/rebalancer-dev/rebalancer/pkg/webhook"
)

// Files names the inputs.
type Files struct {
	// Policy is the DeschedulerPolicy file; required.
	Policy string
	// SchedulerConfigs are the KubeSchedulerConfiguration files of the
	// cluster's schedulers; at least one. SchedulerName, when set, keeps
	// only the profile of that name (see profile.Schedulers).
	SchedulerConfigs []string
	SchedulerName    string
	// Snapshot is the cluster snapshot file; "" for a live cluster.
	Snapshot string
	// Cluster is a snapshot already in memory (a generated cluster), planned
	// on in place of a file.
	Cluster *snapshot.Snapshot
}

// Inputs are the loaded, checked inputs.
type Inputs struct {
	Policy *api.DeschedulerPolicy
	// Metrics is the live usage the policy reads: a live plan reads it
	// along with the cluster, an offline plan finds it in the snapshot.
	Metrics policy.Metrics
	// Schedulers are the profiles of the cluster's schedulers, default-scheduler
	// included (kube-scheduler's defaults unless a file configures it).
	Schedulers []*config.KubeSchedulerProfile
	// Extenders are rebalancer's extenders the scheduler configurations
	// list: they steer the pods of the schedulers they name.
	Extenders []profile.Extender
	// OptIn is the rule of rebalancer's webhook, when the caller counts on
	// it (a flag, or the webhook found answering): not read from files.
	OptIn *webhook.OptIn
	// Snapshot is nil when Files.Snapshot is empty: the caller reads the
	// live cluster.
	Snapshot *snapshot.Snapshot
}

// Load reads and checks every input; any problem is an error naming the
// file and the field. The policy's PriorityClass names resolve against the
// snapshot, or against client when there is none (a live cluster; nil: no
// PriorityClasses at all).
func Load(ctx context.Context, f Files, client kubernetes.Interface) (*Inputs, error) {
	in := &Inputs{}
	classes := &snapshot.Snapshot{}    // the PriorityClasses policy names resolve against, offline
	source := "snapshot " + f.Snapshot // what errors name
	switch {
	case f.Cluster != nil:
		in.Snapshot, source = f.Cluster, "the cluster given in memory"
	case f.Snapshot != "":
		snap, err := snapshot.LoadContext(ctx, f.Snapshot)
		if err != nil {
			return nil, err
		}
		if len(snap.Ignored) > 0 {
			klog.FromContext(ctx).Info("Snapshot holds kinds the planner does not use; they are ignored", "file", f.Snapshot, "snapshot", snap.String())
		}
		in.Snapshot = snap
	}
	if in.Snapshot != nil {
		classes.PriorityClasses = in.Snapshot.PriorityClasses
	}
	var err error
	if in.Snapshot != nil || client == nil {
		if client, err = fakeapi.Clientset(classes); err != nil {
			return nil, err
		}
	}
	if in.Schedulers, in.Extenders, err = profile.Schedulers(f.SchedulerConfigs, f.SchedulerName); err != nil {
		return nil, err
	}
	if in.Policy, err = policy.Load(f.Policy, client, policy.Registry()); err != nil {
		return nil, err
	}
	if in.Metrics, err = policy.MetricsOf(in.Policy); err != nil {
		return nil, fmt.Errorf("%s: %w", f.Policy, err)
	}
	if in.Snapshot != nil && in.Metrics.Kubernetes != "" && !in.Snapshot.HasUsage() {
		return nil, fmt.Errorf("%s: %s reads the nodes' usage from metrics.k8s.io, and %s holds none (no NodeMetrics): capture one with `rebalancer snapshot capture` from a cluster that runs metrics-server",
			f.Policy, in.Metrics.Kubernetes, source)
	}
	for _, q := range in.Metrics.Queries {
		if in.Snapshot != nil && in.Snapshot.PrometheusQuery(q.PromQL) == nil {
			return nil, fmt.Errorf("%s: %s asks Prometheus %q, and %s holds no answer to it (no PrometheusQuery of that query): capture one with `rebalancer snapshot capture --policy %s`",
				f.Policy, q.Field, q.PromQL, source, f.Policy)
		}
	}
	return in, nil
}

// ReadsUsage says whether the policy or a scheduler profile works by the
// cluster's usage.
func (in *Inputs) ReadsUsage() bool {
	return in.Metrics.Kubernetes != "" || len(in.PlacesByUsage()) > 0
}

// PlacesByUsage names the scheduler profiles that place pods by the
// nodes' usage (LoadAware): their simulation needs the usage too.
func (in *Inputs) PlacesByUsage() []string {
	var out []string
	for _, prof := range in.Schedulers {
		for _, set := range []config.PluginSet{prof.Plugins.MultiPoint, prof.Plugins.Score, prof.Plugins.Filter} {
			if slices.ContainsFunc(set.Enabled, func(p config.Plugin) bool { return p.Name == loadaware.Name }) {
				out = append(out, prof.SchedulerName)
				break
			}
		}
	}
	return out
}
