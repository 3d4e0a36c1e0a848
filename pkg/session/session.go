// Package session is the one planning pipeline that plan, run, simulate's
// rounds and the replica estimator share: it opens the inputs (the files,
// or a live cluster with its usage, its Prometheus answers and probes of
// rebalancer's extender and webhook), resolves once who places each pod's
// replacement, simulates the cluster so and plans on it, then rechecks the
// plan before it is carried out. The command line keeps only its flags and
// its printing.
package session

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"

	"github.com/rebalancer-dev/rebalancer/pkg/extender"
	"github.com/rebalancer-dev/rebalancer/pkg/history"
	"github.com/rebalancer-dev/rebalancer/pkg/inputs"
	"github.com/rebalancer-dev/rebalancer/pkg/live"
	"github.com/rebalancer-dev/rebalancer/pkg/plan"
	"github.com/rebalancer-dev/rebalancer/pkg/planner"
	"github.com/rebalancer-dev/rebalancer/pkg/policy"
	"github.com/rebalancer-dev/rebalancer/pkg/profile"
	"github.com/rebalancer-dev/rebalancer/pkg/simulator"
	"github.com/rebalancer-dev/rebalancer/pkg/snapshot"
	"github.com/rebalancer-dev/rebalancer/pkg/webhook"
)

// Options are what a session plans with.
type Options struct {
	Files inputs.Files
	// Client is the live cluster's; nil offline, on Files.Snapshot.
	Client kubernetes.Interface
	// Planner are the planner's options; each plan sets its History and
	// the warnings of its inputs.
	Planner planner.Options
	// UsageWindow and UsageInterval: how long a node's usage must last to
	// count, and how often a live cluster's usage is sampled over it.
	UsageWindow, UsageInterval time.Duration
	// EveryNode runs every scheduling cycle on every node
	// (simulator.WithEveryNode).
	EveryNode bool
	// OptIn is the label selector of the namespaces rebalancer's webhook
	// opts in (already parsed), named as the user gave it; it overrides
	// WebhookConfiguration. nil: read the webhook's configuration, live.
	OptIn     labels.Selector
	OptInFrom string
	// WebhookConfiguration names the MutatingWebhookConfiguration read on a
	// live cluster for the opt-in; "" reads none.
	WebhookConfiguration string
}

// Session plans with Options, one plan at a time; on a live cluster it
// keeps the usage sampler across plans, so a long-lived daemon samples
// over its whole window.
type Session struct {
	o       Options
	sampler *live.Sampler
}

// New returns a session.
func New(o Options) *Session { return &Session{o: o} }

// Options are the session's options.
func (s *Session) Options() Options { return s.o }

// View reads the live cluster's state to plan on: once (live.Capture), or from
// a view a daemon keeps across cycles.
type View func(ctx context.Context, client kubernetes.Interface) (*snapshot.Snapshot, error)

// Opened is one opening of the inputs: the files checked, the cluster read,
// and who places each pod's replacement resolved.
type Opened struct {
	Inputs *inputs.Inputs
	// Snapshot is the state planned on: the file's, or the live cluster's
	// with its usage and Prometheus answers.
	Snapshot *snapshot.Snapshot
	// Placement models how the cluster's schedulers will place the
	// replacements: rebalancer's extenders that answer, the scheduler the
	// webhook gives opted-in pods, the usage window.
	Placement []simulator.Option
	// Warnings are what the plan must say about them: an extender that does
	// not answer, a webhook that cannot be counted on, usage that cannot
	// be read.
	Warnings []string
}

// Load loads and checks the files alone (the policy, the profiles and, offline,
// the snapshot): a daemon checks them once before anything starts.
func (s *Session) Load(ctx context.Context) (*inputs.Inputs, error) {
	return inputs.Load(ctx, s.o.Files, s.o.Client)
}

// Open loads and checks every input before anything is planned (bad input
// of any kind ends here), reads the cluster through view when planning
// live, and resolves who places the replacements.
func (s *Session) Open(ctx context.Context, view View) (*Opened, error) {
	in, err := s.Load(ctx)
	if err != nil {
		return nil, err
	}
	return s.OpenLoaded(ctx, in, view)
}

// OpenLoaded opens inputs already loaded (by Load, or built in memory) as
// Open opens the files: it reads the cluster through view when in has no
// snapshot, and resolves who places the replacements. in is not modified,
// so a daemon can open the same inputs at every read.
func (s *Session) OpenLoaded(ctx context.Context, in *inputs.Inputs, view View) (*Opened, error) {
	copied := *in
	in = &copied
	o := &Opened{Inputs: in, Snapshot: in.Snapshot}
	if o.Snapshot == nil {
		var usageWarnings []string
		var err error
		if o.Snapshot, usageWarnings, err = s.readCluster(ctx, view, in); err != nil {
			return nil, err
		}
		o.Warnings = append(answering(ctx, in), usageWarnings...)
	}
	o.Warnings = append(o.Warnings, s.optInto(ctx, in)...)
	o.Placement = s.placement(in)
	return o, nil
}

// Plan opens the inputs and plans on them; moves is the move history (nil:
// none). It returns what it opened too, for the recheck.
func (s *Session) Plan(ctx context.Context, view View, moves *history.History) (*plan.Plan, *Opened, error) {
	// A line a phase: a plan of thousands of nodes takes seconds to
	// minutes, and a silent command looks stuck.
	start, logger := time.Now(), klog.FromContext(ctx)
	from := s.o.Files.Snapshot
	if from == "" {
		from = "the API server"
	}
	logger.Info("Reading the cluster", "from", from)
	o, err := s.Open(ctx, view)
	if err != nil {
		return nil, nil, err
	}
	logger.Info("Building the simulation", "cluster", o.Snapshot.String())
	opts := s.o.Planner
	opts.History = moves
	// The simulation's informers run until the plan is made: a daemon
	// planning every cycle must not accumulate them.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	sim, err := s.Simulate(ctx, o, o.Snapshot)
	if err != nil {
		return nil, nil, err
	}
	logger.Info("Planning", "profiles", len(o.Inputs.Policy.Profiles))
	p, err := s.PlanOn(ctx, o, sim, opts)
	if err == nil {
		logger.Info("Planned", "moves", len(p.Moves), "skipped", len(p.Skipped), "took", time.Since(start).Round(10*time.Millisecond).String())
	}
	return p, o, err
}

// Simulate returns a simulation of snap (o's, or one read or derived from
// it) modelled as o: its schedulers, the extenders that answer, the
// webhook's opt-in and the usage window (o.Placement), then extra (a
// simulated clock). Its informers run until ctx ends. A caller may carry
// it forward and plan on it again (PlanOn).
func (s *Session) Simulate(ctx context.Context, o *Opened, snap *snapshot.Snapshot, extra ...simulator.Option) (*simulator.Simulator, error) {
	return simulator.New(ctx, o.Inputs.Schedulers, snap, append(slices.Clone(o.Placement), extra...)...)
}

// PlanOn plans o's policy on sim, a simulation Simulate opened for o, as it
// is now: opts are the planner's options (the session's, Options().Planner,
// with the caller's ID and History), to whose warnings o's are added, and
// how many pods the simulation plans as opted in by the webhook. sim is
// left as it was found.
func (s *Session) PlanOn(ctx context.Context, o *Opened, sim *simulator.Simulator, opts planner.Options) (*plan.Plan, error) {
	opts.Warnings = append(append(slices.Clone(opts.Warnings), o.Warnings...), optInNote(sim, o.Snapshot, o.Inputs.OptIn)...)
	return planner.Plan(ctx, sim, o.Inputs.Policy, opts)
}

// Recheck reads the live cluster again through view and returns the
// recheck of p's moves on it, modelled as o was; its simulation runs
// until ctx ends.
func (s *Session) Recheck(ctx context.Context, view View, o *Opened, p *plan.Plan) (*planner.Recheck, error) {
	snap, _, err := s.readCluster(ctx, view, o.Inputs)
	if err != nil {
		return nil, fmt.Errorf("reading the cluster again before executing: %w", err)
	}
	sim, err := s.Simulate(ctx, o, snap)
	if err != nil {
		return nil, err
	}
	return planner.NewRecheck(sim, p, s.o.Planner.MinScoreGain), nil
}

// Capture reads the live cluster through view for a snapshot file (snapshot
// capture), as a plan reads it, so that it can be planned on offline: with
// the answers to the Prometheus queries of the policy of Files.Policy, if
// one is given (no scheduler configuration is needed), and the usage,
// sampled from metrics.k8s.io over the usage window whatever the policy
// reads. Usage that cannot be read is logged, not an error: the snapshot
// then holds none.
func (s *Session) Capture(ctx context.Context, view View) (*snapshot.Snapshot, error) {
	var metrics policy.Metrics
	if file := s.o.Files.Policy; file != "" {
		pol, err := policy.Load(file, s.o.Client, policy.Registry())
		if err != nil {
			return nil, err
		}
		if metrics, err = policy.MetricsOf(pol); err != nil {
			return nil, fmt.Errorf("%s: %w", file, err)
		}
	}
	snap, err := view(ctx, s.o.Client)
	if err != nil {
		return nil, err
	}
	if err := live.ReadPrometheus(ctx, s.o.Client, prometheusQueries(metrics), snap); err != nil {
		return nil, fmt.Errorf("%s: %w", s.o.Files.Policy, err)
	}
	// A sampler of its own, for this capture alone: it stops on return.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	sampler := live.NewSampler(s.o.Client, s.o.UsageInterval, s.o.UsageWindow)
	go sampler.Run(ctx)
	if err := sampler.Fill(ctx, snap); err != nil {
		klog.FromContext(ctx).Info("The snapshot holds no usage: policies that read metrics.k8s.io cannot be planned on it", "reason", err.Error())
	}
	return snap, nil
}

// readCluster returns the live cluster as view shows it, with its usage,
// sampled from metrics.k8s.io over the usage window, when the policy or a
// scheduler profile works by it, and the Prometheus answers to the
// policy's queries. Usage the policy needs and cannot have is an error:
// nothing is planned, nothing evicted. A profile that places by usage
// without it falls back to its pods' estimates, in the simulation as in
// rebalancer-scheduler: a warning.
func (s *Session) readCluster(ctx context.Context, view View, in *inputs.Inputs) (*snapshot.Snapshot, []string, error) {
	snap, err := view(ctx, s.o.Client)
	if err != nil {
		return nil, nil, err
	}
	if err := live.ReadPrometheus(ctx, s.o.Client, prometheusQueries(in.Metrics), snap); err != nil {
		return nil, nil, err
	}
	if !in.ReadsUsage() {
		return snap, nil, nil
	}
	s.StartSampling(ctx)
	err = s.sampler.Fill(ctx, snap)
	switch {
	case err != nil && in.Metrics.Kubernetes != "":
		return nil, nil, fmt.Errorf("the policy's %s: %w", in.Metrics.Kubernetes, err)
	case err != nil:
		return snap, []string{fmt.Sprintf("scheduler profile(s) %s place pods by usage, which cannot be read, so they are simulated with their pods' estimates (requests), as they then schedule: %v",
			strings.Join(in.PlacesByUsage(), ", "), err)}, nil
	}
	return snap, nil, nil
}

// StartSampling starts sampling the live cluster's usage over the usage
// window, unless a sampler runs already: the long-lived mode starts it
// with the process, so its first cycle has the window.
func (s *Session) StartSampling(ctx context.Context) {
	if s.sampler != nil && !s.sampler.Stopped() {
		return
	}
	s.sampler = live.NewSampler(s.o.Client, s.o.UsageInterval, s.o.UsageWindow)
	go s.sampler.Run(ctx)
	klog.FromContext(ctx).Info("Sampling the cluster's usage", "window", s.o.UsageWindow, "interval", s.o.UsageInterval)
}

// placement models how the cluster's schedulers will follow the plan:
// rebalancer's extenders, the scheduler the webhook gives the pods of
// opted-in namespaces, and how long usage must last.
func (s *Session) placement(in *inputs.Inputs) []simulator.Option {
	opts := []simulator.Option{simulator.WithExtenders(profile.ExtenderWeights(in.Extenders)), simulator.WithUsageWindow(s.o.UsageWindow)}
	if in.OptIn != nil {
		opts = append(opts, simulator.WithOptIn(in.OptIn.SchedulerFor))
	}
	if s.o.EveryNode {
		opts = append(opts, simulator.WithEveryNode())
	}
	return opts
}

// optInto sets in.OptIn: from Options.OptIn, else, on a live cluster, from
// the webhook's configuration if its webhook answers. It returns what the
// plan should say when the webhook cannot be counted on.
func (s *Session) optInto(ctx context.Context, in *inputs.Inputs) []string {
	switch {
	case s.o.OptIn != nil:
		in.OptIn = webhook.DefaultOptIn(s.o.OptIn, s.o.OptInFrom)
	case in.Snapshot == nil && s.o.WebhookConfiguration != "":
		optIn, err := webhook.Live(ctx, s.o.Client, s.o.WebhookConfiguration)
		if err != nil {
			return []string{fmt.Sprintf("rebalancer's webhook cannot be counted on, so the pods of opted-in namespaces are planned as their own scheduler's: %v", err)}
		}
		in.OptIn = optIn
	}
	return nil
}

// optInNote says how many pods the simulation plans as the scheduler the
// webhook gives them rather than the one they name.
func optInNote(sim *simulator.Simulator, snap *snapshot.Snapshot, optIn *webhook.OptIn) []string {
	if optIn == nil {
		return nil
	}
	pods, opted := 0, map[string]bool{}
	for _, pod := range snap.Pods {
		if sim.SchedulerOf(pod) != simulator.SchedulerName(pod) {
			pods++
			opted[pod.Namespace] = true
		}
	}
	if pods == 0 {
		return nil
	}
	return []string{fmt.Sprintf("%d pod(s) naming default-scheduler in %d namespace(s) opted in (%s) are planned as %s's: the webhook gives their replacements that scheduler",
		pods, len(opted), optIn.From, optIn.Scheduler)}
}

// answering keeps the extenders of in that answer now: a plan counts on an
// extender only if it steers the replacements. The pods of the schedulers
// of one that does not are planned as unsteered, and the plan says why.
func answering(ctx context.Context, in *inputs.Inputs) (warnings []string) {
	up := in.Extenders[:0:0]
	for _, e := range in.Extenders {
		if err := extender.Probe(ctx, e.Extender); err != nil {
			warnings = append(warnings, fmt.Sprintf("%s does not answer, so it steers nothing this cycle and the pods of %s are planned as unsteered: %v",
				e, strings.Join(e.Schedulers, ", "), err))
			continue
		}
		up = append(up, e)
	}
	in.Extenders = up
	return warnings
}
