// Package upstream runs the upstream descheduler, unmodified, for one
// descheduling cycle over a snapshot and reports which pods it evicted.
//
// It is the baseline rebalancer's planner is compared against: the same
// policy run by sigs.k8s.io/descheduler exactly as its binary would run it
// (its own informers, PodEvictor, limits and plugins), except that the
// Kubernetes API is a fake clientset seeded with the snapshot. The fake's
// eviction endpoint spends PodDisruptionBudgets as kube-apiserver does but
// deletes nothing: within a cycle upstream's plugins work on their informer
// view anyway, and applying the evictions is the caller's business.
package upstream

import (
	"context"
	"fmt"
	"strings"

	"k8s.io/klog/v2"
	"sigs.k8s.io/descheduler/cmd/descheduler/app/options"
	"sigs.k8s.io/descheduler/pkg/api"
	"sigs.k8s.io/descheduler/pkg/descheduler"
	"sigs.k8s.io/descheduler/pkg/features"

	"github.com/rebalancer-dev/rebalancer/internal/liblog"
	"github.com/rebalancer-dev/rebalancer/pkg/fakeapi"
	rbpolicy "github.com/rebalancer-dev/rebalancer/pkg/policy"
	"github.com/rebalancer-dev/rebalancer/pkg/snapshot"
)

// evictionGroupVersion is what the descheduler binary finds by discovery on
// any supported cluster (eutils.SupportEviction); RunDeschedulerStrategies
// takes it as given and never asks discovery itself.
const evictionGroupVersion = "policy/v1"

// Result is what one upstream descheduling cycle did.
type Result struct {
	// Evicted are the evictions the API accepted, in the order upstream
	// requested them; each pod appears at most once. Requests the API
	// refused (PDB exhausted) are not in it: upstream logs them and moves on.
	Evicted []Eviction
}

// Eviction is one pod upstream evicted.
type Eviction struct {
	Namespace, Name string
	UID             string
	// Node is the node the pod ran on.
	Node string
	// Profile and Strategy (the plugin) that asked for the eviction, read
	// from the reason annotation upstream puts on the Eviction object; empty
	// if it cannot be matched to a profile and plugin of the policy.
	Profile, Strategy string
}

// Run runs one descheduling cycle of the upstream descheduler with policy
// over snap. The policy must be loaded as the descheduler loads it (defaults
// applied and a DefaultEvictor configured, e.g. by pkg/policy.Load); it is
// not modified. Run may be called any number of times in one process, but
// not concurrently with code that replaces the descheduler's global plugin
// registry (descheduler.SetupPlugins).
//
// Errors are those of setting the descheduler up (an unknown plugin, bad
// args), a policy that needs live metrics, and ctx ending before the cycle
// did. Errors of a plugin during the cycle are only logged by upstream
// (descheduler.go runProfiles) and cannot be seen here.
func Run(ctx context.Context, policy *api.DeschedulerPolicy, snap *snapshot.Snapshot) (*Result, error) {
	// A snapshot has no live usage. Upstream would also reach out for it: to
	// a Prometheus from inside a cluster, and a cycle that fails to do so
	// is retried at once, forever, when the interval is 0.
	if field, ok := rbpolicy.RequiresMetrics(policy); ok {
		return nil, fmt.Errorf("the policy needs live utilization metrics (%s), which a snapshot does not have", field)
	}
	rbpolicy.Registry() // the global registry RunDeschedulerStrategies builds profiles from

	client, err := fakeapi.Clientset(snap)
	if err != nil {
		return nil, err
	}
	endpoint := newEvictionEndpoint(snap)
	// Prepended so it runs before the tracker's reactor, which would
	// otherwise store the Eviction as if it were a pod.
	client.PrependReactor("create", "pods", endpoint.react)

	rs, err := options.NewDeschedulerServer()
	if err != nil {
		return nil, err
	}
	rs.Client = client
	rs.EventClient = client
	// Off: with DryRun upstream evicts on a copy of the cluster made by its
	// kubeClientSandbox, and our eviction endpoint would never be called.
	rs.DryRun = false
	// 0 ends RunDeschedulerStrategies after one cycle.
	rs.DeschedulingInterval = 0
	// RunDeschedulerStrategies does not do leader election (only Run does),
	// but leave no doubt.
	rs.LeaderElection.LeaderElect = false
	// NewDeschedulerServer leaves the gates nil and Apply, which sets them,
	// also sets up the metrics server; NewPodEvictor dereferences them. These
	// are the binary's gates with no --feature-gates: EvictionsInBackground
	// off, so every eviction is a plain call to the eviction API.
	rs.DefaultFeatureGates = features.DefaultMutableFeatureGate
	// The descheduler binary registers its metrics (pods_evicted_total...)
	// in component-base's legacyregistry; RunDeschedulerStrategies does not,
	// so they are no-ops unless something in this process registered them,
	// in which case simulated evictions must not be counted as real ones.
	rs.DisableMetrics = true

	// RunDeschedulerStrategies cancels its own context when the cycle ends,
	// which stops its informers; this covers an early error return.
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	// The descheduler logs each step it takes; below rebalancer's own lines.
	runCtx = klog.NewContext(runCtx, liblog.Quiet(klog.FromContext(runCtx)))
	// Upstream's plugins do not watch ctx within a cycle, which takes
	// minutes on a large cluster: when ctx ends, Run returns at once and
	// leaves the cycle to end by itself on the fake clientset it owns.
	done := make(chan error, 1)
	// On a copy: rebalancer's drain taint is no violation here either (a
	// policy from rbpolicy.Load has it so already).
	run := policy.DeepCopy()
	rbpolicy.ExcludeDrainTaint(run)
	go func() { done <- runCycle(runCtx, rs, run, evictionGroupVersion) }()
	select {
	case err := <-done:
		if err != nil {
			return nil, fmt.Errorf("upstream descheduler: %w", err)
		}
	case <-ctx.Done():
	}
	// Upstream returns nil also when ctx ended before or during the cycle
	// (its wait loop simply stops), with informers maybe not synced: what it
	// evicted then is no answer.
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("upstream descheduler: %w", err)
	}
	return &Result{Evicted: endpoint.evictions(policy)}, nil
}

// runCycle is the descheduler's cycle; a test stands in for it.
var runCycle = descheduler.RunDeschedulerStrategies

// strategyOf reads the profile and plugin from the reason annotation that
// PodEvictor.evictPod puts on the Eviction object:
// "triggered by <profile>/<plugin>: <reason>". Profile names may contain
// "/" and reasons ": ", so the prefix is matched against the policy's own
// profiles and plugins rather than split.
func strategyOf(policy *api.DeschedulerPolicy, reason string) (profile, strategy string) {
	rest, ok := strings.CutPrefix(reason, "triggered by ")
	if !ok {
		return "", ""
	}
	for _, p := range policy.Profiles {
		for _, pl := range append(append([]string{}, p.Plugins.Deschedule.Enabled...), p.Plugins.Balance.Enabled...) {
			// Longest profile name wins should one be a prefix of another.
			if strings.HasPrefix(rest, p.Name+"/"+pl+": ") && len(p.Name) >= len(profile) {
				profile, strategy = p.Name, pl
			}
		}
	}
	return profile, strategy
}
