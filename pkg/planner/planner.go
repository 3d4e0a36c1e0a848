// Package planner runs a DeschedulerPolicy's profiles with the descheduler's
// own plugins over a snapshot, and judges every eviction they ask for by
// simulating the scheduler profile: an eviction enters the plan only if the
// replacement has a node to go to, that node is not the one it left, and
// (for balance plugins) it scores better there by at least a margin. PDBs
// and the policy's limits are spent across the whole plan.
package planner

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/klog/v2"
	"sigs.k8s.io/descheduler/pkg/api"
	"sigs.k8s.io/descheduler/pkg/descheduler/evictions"
	nodeutil "sigs.k8s.io/descheduler/pkg/descheduler/node"
	podutil "sigs.k8s.io/descheduler/pkg/descheduler/pod"
	"sigs.k8s.io/descheduler/pkg/features"
	"sigs.k8s.io/descheduler/pkg/framework/pluginregistry"
	"sigs.k8s.io/descheduler/pkg/framework/plugins/defaultevictor"
	frameworkprofile "sigs.k8s.io/descheduler/pkg/framework/profile"
	frameworktypes "sigs.k8s.io/descheduler/pkg/framework/types"

	"github.com/rebalancer-dev/rebalancer/internal/liblog"
	"github.com/rebalancer-dev/rebalancer/pkg/conflict"
	"github.com/rebalancer-dev/rebalancer/pkg/disruption"
	"github.com/rebalancer-dev/rebalancer/pkg/history"
	"github.com/rebalancer-dev/rebalancer/pkg/plan"
	rbpolicy "github.com/rebalancer-dev/rebalancer/pkg/policy"
	"github.com/rebalancer-dev/rebalancer/pkg/simulator"
	"github.com/rebalancer-dev/rebalancer/pkg/snapshot"
)

// Options tune the judgement of evictions.
type Options struct {
	// ID names the plan; empty means a time-based ID.
	ID string
	// MinScoreGain is how much higher than the source node the target must
	// score for a balance plugin's eviction to be worth it.
	MinScoreGain int64
	// MaxPerWorkload caps the moves of one owner (ReplicaSet, StatefulSet,
	// ...) within History's cooldown, the moves of this plan included, so a
	// workload is never disrupted all at once: a number of pods, or a
	// percentage of the owner's pods in the cluster, rounded up. 0 means no
	// cap beyond the policy's own limits.
	MaxPerWorkload intstr.IntOrString
	// History holds the moves made recently: a pod whose owner had a pod
	// moved onto its node within the cooldown stays (known at plan time,
	// such pods are protected like any other, so an all-or-nothing drain
	// does not count on moving them), and the owner's recent moves count
	// against MaxPerWorkload. nil: no memory.
	History *history.History
	// AllowConflicting plans even when the policy and the scheduler profile
	// pull in opposite directions (the conflicts become warnings).
	AllowConflicting bool
	// Warnings are the caller's, given first among the plan's (e.g. an
	// extender that did not answer).
	Warnings []string
	// HoldEmptyNodes says when to plan as if the nodes empty now carried
	// the drain taint for the plan's cycle, naming them in the plan
	// (Plan.HeldEmpty) for the executor to taint when a move is left to a
	// scheduler that does not follow hints: its replacements then go only
	// to nodes in use. The zero value is HoldAuto.
	HoldEmptyNodes Hold
}

// Plan computes the plan for a policy over the simulated cluster, judging
// every eviction with the simulator's scheduler profile. The plan's moves
// are made in a fork of the simulation that is reverted before Plan
// returns: the simulator is left as it was found.
func Plan(ctx context.Context, sim *simulator.Simulator, policy *api.DeschedulerPolicy, opts Options) (*plan.Plan, error) {
	p := &planner{
		logger:       klog.FromContext(ctx).WithName("planner"),
		opts:         opts,
		policy:       policy,
		sim:          sim,
		moved:        sets.New[types.UID](),
		replacements: sets.New[types.UID](),
		arriving:     sets.New[types.UID](),
		arrivingOn:   sets.New[string](),
		perNode:      map[string]uint{},
		perNamespace: map[string]uint{},
		perOwner:     map[types.UID]int{},
		sources:      map[string]int{},
		targets:      map[string]int{},
		drained:      map[string]int{},
		drainedNodes: sets.New[string](),
		conflicting:  map[string]sets.Set[string]{},
		unsteered:    map[string]int{},
		out:          &plan.Plan{ID: opts.ID},
	}
	if p.out.ID == "" {
		p.out.ID = "plan-" + time.Now().UTC().Format("20060102-150405")
	}
	state := sim.State()
	used := p.schedulersInUse(state)
	if err := p.checkConflicts(used); err != nil {
		return nil, err
	}
	p.budgets = disruption.New(state.PodDisruptionBudgets)
	if policy.MaxNoOfPodsToEvictPerNamespace != nil {
		p.podsByNamespace = map[string][]*v1.Pod{}
		for _, pod := range state.Pods {
			p.podsByNamespace[pod.Namespace] = append(p.podsByNamespace[pod.Namespace], pod)
		}
	}
	p.ownerPods = countOwnerPods(state)
	inFlight := p.countInFlight(state)
	before, err := sim.Usage()
	if err == nil {
		err = interrupted(ctx) // the passes above take seconds at 150,000 pods
	}
	if err != nil {
		return nil, err
	}
	p.emptyBefore = sets.New[string]()
	for _, u := range before {
		if !u.InUse {
			p.emptyBefore.Insert(u.Node)
		}
	}
	held, err := p.holdEmpty(before, used)
	if err == nil {
		err = interrupted(ctx)
	}
	if err != nil {
		return nil, err
	}
	defer sim.Hold(nil)
	fork := sim.Fork()
	err = p.run(ctx, state)
	if err != nil && ctx.Err() != nil {
		// A plugin failed because the plan was interrupted (the
		// descheduler's status keeps only the message): say so.
		err = interrupted(ctx)
	}
	if rerr := sim.Revert(fork); rerr != nil && err == nil {
		err = rerr
	}
	if err == nil {
		err = interrupted(ctx)
	}
	var after []simulator.NodeUsage
	if err == nil {
		after, err = p.replay(ctx, before)
	}
	if err == nil {
		err = interrupted(ctx)
	}
	if err != nil {
		return nil, err
	}
	p.publishHeld(held)
	p.warnFull()
	p.warnUnsteered()
	for _, w := range p.out.Warnings {
		p.logger.Info("Warning: " + w)
	}
	p.out.Summary = summarize(state, before, after, p.out.Moves)
	p.out.Summary.EvictionsInFlight = inFlight
	for _, n := range slices.Sorted(maps.Keys(p.pinned)) {
		p.out.Summary.Pinned = append(p.out.Summary.Pinned, p.pinned[n])
	}
	p.out.Summary.Consolidation = p.consolidationOutcomes()
	p.prometheus.annotate(&p.out.Summary)
	bound, err := sim.ClassBound()
	if err != nil {
		return nil, err
	}
	p.out.Summary.NodesLowerBound, p.out.Summary.NodesClassLowerBound = bound.PerResource, bound.Nodes
	p.out.Finish()
	return p.out, nil
}

// checkConflicts compares the policy with the profile of every scheduler
// that places pods of the cluster. A scheduler that follows hints and pulls
// against the policy would undo the plan: that is an error unless
// AllowConflicting. One that does not follow hints is not steered anyway:
// the conflicting plugins' moves of its pods are skipped.
func (p *planner) checkConflicts(used map[string]bool) error {
	schedulers := p.sim.Schedulers()
	targeting := map[string]bool{}
	for _, sc := range schedulers {
		if used[sc.Profile.SchedulerName] && sc.TargetsBy != "" {
			targeting[sc.TargetsBy] = true // its scoring picks targets
		}
	}
	var conflicts, warnings []string
	for _, sc := range schedulers {
		name := sc.Profile.SchedulerName
		if !used[name] && !targeting[name] {
			continue // no pod of it to move
		}
		check := conflict.Check(p.policy, sc.Profile, sc.ScoreWeights)
		warnings = append(warnings, check.Warnings...)
		switch {
		case len(check.Conflicts) == 0:
		case sc.TargetsBy != "":
			// The replacements of the pods moved go where the extender
			// steers them, onto targets the other profile picks; only the
			// scheduler's own new pods go its way.
			warnings = append(warnings, fmt.Sprintf("scheduler %q pulls against %s with the new pods it places; the replacements of the pods rebalancer moves are steered by rebalancer's extender to targets scored by %q, and with the extender's --follow-rollouts so are rolling updates, onto the nodes of the pods they replace",
				name, strings.Join(check.Plugins, ", "), sc.TargetsBy))
		case sc.Extender:
			for _, c := range check.Conflicts {
				conflicts = append(conflicts, c+"; or give rebalancer-scheduler's profile with --scheduler-config as well: it picks the targets of the pods rebalancer's extender steers")
			}
		case sc.Steered:
			conflicts = append(conflicts, check.Conflicts...)
		default:
			p.conflicting[name] = sets.New(check.Plugins...)
			warnings = append(warnings, fmt.Sprintf("scheduler %q does not follow rebalance hints and pulls against %s: the pods it places are not moved by them",
				name, strings.Join(check.Plugins, ", ")))
		}
	}
	if len(conflicts) > 0 && !p.opts.AllowConflicting {
		return fmt.Errorf("the policy and the scheduler profile conflict (override with --allow-conflicting-profiles): %s", strings.Join(conflicts, "; "))
	}
	p.out.Warnings = append(append(slices.Clone(p.opts.Warnings), conflicts...), warnings...)
	return nil
}

// schedulersInUse are the schedulers that place pods of the cluster.
func (p *planner) schedulersInUse(state *snapshot.Snapshot) map[string]bool {
	used := map[string]bool{}
	for _, pod := range state.Pods {
		used[p.sim.SchedulerOf(pod)] = true
	}
	return used
}

// warnUnsteered says how many moves a scheduler that followed hints would
// have allowed.
func (p *planner) warnUnsteered() {
	names := make([]string, 0, len(p.unsteered))
	for name := range p.unsteered {
		names = append(names, name)
	}
	slices.Sort(names)
	hold := ""
	if !p.holding {
		hold = "; where its choices include empty nodes, --hold-empty-nodes keeps them off limits for the cycle"
	}
	for _, name := range names {
		p.out.Warnings = append(p.out.Warnings, fmt.Sprintf(
			"%d move(s) of pods of scheduler %q skipped as unsteered: it does not follow rebalance hints, so it may place their replacements elsewhere; "+
				"a profile with the RebalanceHint plugin, or rebalancer's extender in its configuration (see policies/README.md), would let rebalancer plan them%s", p.unsteered[name], name, hold))
	}
}

// planner is the state of one planning run.
type planner struct {
	logger klog.Logger
	opts   Options
	policy *api.DeschedulerPolicy
	sim    *simulator.Simulator
	out    *plan.Plan
	// balancing is true while balance plugins run (the score-gain rule applies).
	balancing bool
	// holding: the plan is made with the empty nodes held (holdEmpty).
	holding bool
	// pinned are the nodes a packing plugin cannot empty (Summary.Pinned).
	pinned map[string]plan.PinnedNode
	// considered is what Consolidation did with each node it could empty
	// (Summary.Consolidation); dropped, the reason the replay dropped a
	// move off a node.
	considered, dropped map[string]string
	// emptyBefore are the nodes no pod kept in use when the plan began.
	emptyBefore sets.Set[string]

	moved        sets.Set[types.UID] // pods the plan moves
	replacements sets.Set[types.UID] // their simulated replacements
	// arriving are the pending pods MakeRoom placed in the simulation: like
	// replacements, they do not run yet and are offered for no eviction.
	arriving sets.Set[types.UID]
	// arrivingOn are the nodes MakeRoom placed them on (only added to:
	// podsOnNode looks up the pods of these nodes in arriving).
	arrivingOn   sets.Set[string]
	total        uint
	perNode      map[string]uint
	perNamespace map[string]uint
	perOwner     map[types.UID]int
	// left are History.Left's answers, asked once a plan per workload
	// (notBack): the history does not change while the plan is made.
	left map[workloadKey][]string
	// ownerPods counts each owner's pods in the cluster, the base of a
	// percentage MaxPerWorkload.
	ownerPods map[types.UID]int
	budgets   *disruption.Budgets
	// sources counts the plan's moves off each node: no move goes onto a
	// node the plan moves pods off, so a plan never undoes itself.
	sources map[string]int
	// targets counts the plan's moves onto each node.
	targets map[string]int
	// drained counts the plan's drain moves off each node: the executor
	// taints those nodes, drainedNodes.
	drained      map[string]int
	drainedNodes sets.Set[string]
	// conflicting are, per scheduler that does not follow hints, the
	// policy's balance plugins its profile pulls against.
	conflicting map[string]sets.Set[string]
	// unsteered counts the moves skipped as unsteered, per scheduler.
	unsteered map[string]int
	// notRun are the plugins not run because the plan was full (whileRoom).
	notRun []notRun
	// podsByNamespace are the cluster's pods by namespace, when the policy
	// limits the moves per namespace (whileRoom).
	podsByNamespace map[string][]*v1.Pod
	// usage serves the plugins the nodes' and pods' usage; nil when the
	// policy reads none.
	usage *usageSource
	// prometheus answers the plugins' Prometheus queries; nil when the
	// policy asks none.
	prometheus *prometheusSource
	// applied are the plan's moves as the bookkeeping above counted them,
	// so that reverting a fork takes them back out.
	applied []applied
	// gangs are the simulation's pods by gang (gangMembers), built at the
	// first gang's move; group is the gang being moved whole, if any.
	gangs map[string][]*v1.Pod
	group *gangMove
	// stayers memoizes gangMustStay per gang, valid while spent (the
	// budget spendings and refunds counted) is unchanged.
	stayers map[string]gangStayer
	spent   uint64
	// refusedGangs remembers gangs refused whole (refuseGang) while
	// version, counting every move entering or leaving the plan, stands.
	refusedGangs map[string]gangRefused
	version      uint64
	// survey, while a tie-broken plugin surveys its waiting sources
	// (ties), records what judge would do rather than doing it.
	survey *surveyRecord
}

type profileRunner struct {
	name       string
	deschedule func(context.Context, []*v1.Node) *frameworktypes.Status
	balance    func(context.Context, []*v1.Node) *frameworktypes.Status
}

// run builds every profile of the policy on a sandbox holding the
// simulation's state, then runs all deschedule plugins and after them all
// balance plugins, as the descheduler does.
func (p *planner) run(ctx context.Context, state *snapshot.Snapshot) error {
	client, factory, err := simulator.Sandbox(state)
	if err == nil {
		err = interrupted(ctx)
	}
	if err != nil {
		return err
	}
	// Required by the descheduler's profile, never called: every eviction
	// goes through judge instead.
	unused, err := evictions.NewPodEvictor(ctx, client, nil, factory.Core().V1().Pods().Informer(),
		features.DefaultMutableFeatureGate, evictions.NewOptions().WithDryRun(true))
	if err != nil {
		return err
	}
	// Plugins take their logger from the context when they are built.
	ctx = klog.NewContext(ctx, liblog.Quiet(klog.FromContext(ctx)))
	var runners []profileRunner
	for i, prof := range p.policy.Profiles {
		prof := withoutNodeFit(prof)
		pr, err := frameworkprofile.NewProfile(ctx, prof, p.judgingRegistry(rbpolicy.Registry(), prof, state.Pods),
			frameworkprofile.WithClientSet(client),
			frameworkprofile.WithSharedInformerFactory(factory),
			frameworkprofile.WithPodEvictor(unused),
			frameworkprofile.WithGetPodsAssignedToNodeFnc(p.podsOnNode),
			frameworkprofile.WithProfileInstanceID(fmt.Sprintf("%d", i)),
		)
		if err != nil {
			return fmt.Errorf("profile %q: %w", prof.Name, err)
		}
		runners = append(runners, profileRunner{prof.Name, pr.RunDeschedulePlugins, pr.RunBalancePlugins})
	}

	selector := ""
	if p.policy.NodeSelector != nil {
		selector = *p.policy.NodeSelector
	}
	nodes, err := nodeutil.ReadyNodes(ctx, client, factory.Core().V1().Nodes().Lister(), selector)
	if err != nil {
		return fmt.Errorf("listing ready nodes (nodeSelector %q): %w", selector, err)
	}
	// The lister lists in map order; plugins walk nodes in the order given
	// and break ties by it, so the same cluster must give the same order.
	slices.SortFunc(nodes, func(a, b *v1.Node) int { return strings.Compare(a.Name, b.Name) })
	if len(nodes) < 2 {
		return fmt.Errorf("%d ready node(s) match the policy's nodeSelector %q; rebalancing needs at least 2", len(nodes), selector)
	}
	metrics, err := rbpolicy.MetricsOf(p.policy)
	if err != nil {
		return err
	}
	if metrics.Kubernetes != "" {
		if p.usage, err = newUsageSource(p.sim, factory.Core().V1().Nodes().Lister(), selector); err != nil {
			return err
		}
		if err := p.usage.check(nodes, metrics.Kubernetes); err != nil {
			return err
		}
	}
	if len(metrics.Queries) > 0 {
		p.prometheus = newPrometheusSource(state, metrics.Queries)
		if err := p.prometheus.check(nodes, metrics.Queries); err != nil {
			return err
		}
	}
	for _, r := range runners {
		if st := r.deschedule(ctx, nodes); st != nil && st.Err != nil {
			return fmt.Errorf("profile %q: %w", r.name, st.Err)
		}
	}
	p.balancing = true
	for _, r := range runners {
		if st := r.balance(ctx, nodes); st != nil && st.Err != nil {
			return fmt.Errorf("profile %q: %w", r.name, st.Err)
		}
	}
	return nil
}

// interrupted is the error of a plan whose context ended while it was
// made. The plugins and the simulation stop early when it does, and the
// descheduler's plugins log a failed eviction and go on: what they leave is
// not a plan (a replay cut short reads as one in which nothing fits), so a
// plan made under an ended context is never returned.
func interrupted(ctx context.Context) error {
	if ctx.Err() != nil {
		return fmt.Errorf("planning interrupted: %w", context.Cause(ctx))
	}
	return nil
}

// withoutNodeFit returns the profile with the DefaultEvictor's nodeFit off.
// Every eviction is judged by simulating the whole scheduler profile, whose
// Filter plugins check all that nodeFit checks and more, so nodeFit changes
// no move of the plan; its pods simply show up as no-fit skips instead of
// being passed over silently. It is also costly: for every candidate pod it
// sums the requests of every pod on every node, quadratic in cluster size.
func withoutNodeFit(prof api.DeschedulerProfile) api.DeschedulerProfile {
	out := *prof.DeepCopy()
	for i, pc := range out.PluginConfigs {
		if args, ok := pc.Args.(*defaultevictor.DefaultEvictorArgs); ok && args.NodeFit {
			args.NodeFit = false
			out.PluginConfigs[i].Args = args
		}
	}
	return out
}

// podsOnNode serves the plugins the simulation's current view, so each
// plugin sees the moves already in the plan. Replacements are not real pods
// yet and are not offered for eviction.
func (p *planner) podsOnNode(node string, filter podutil.FilterFunc) ([]*v1.Pod, error) {
	pods, err := p.sim.PodsOn(node)
	if err != nil {
		return nil, err
	}
	// A replacement runs on its move's target (count adds it to targets)
	// and a placed pending pod on a node of arrivingOn: the pods of other
	// nodes need not be looked up.
	screen := p.targets[node] > 0 || p.arrivingOn.Has(node)
	out := pods[:0]
	for _, pod := range pods {
		if screen && (p.replacements.Has(pod.UID) || p.arriving.Has(pod.UID)) {
			continue
		}
		if filter == nil || filter(pod) {
			out = append(out, pod)
		}
	}
	return out, nil
}

// judgingRegistry is the plugin registry with every builder handed a handle
// whose evictor is the planner's judge; a plugin that can find nothing to
// evict among the cluster's pods is not run (see idle).
func (p *planner) judgingRegistry(registry pluginregistry.Registry, prof api.DeschedulerProfile, pods []*v1.Pod) pluginregistry.Registry {
	out := make(pluginregistry.Registry, len(registry))
	for name, u := range registry {
		build := u.PluginBuilder
		u.PluginBuilder = func(ctx context.Context, args runtime.Object, h frameworktypes.Handle) (frameworktypes.Plugin, error) {
			j := &judge{Evictor: h.Evictor(), p: p, profile: prof.Name, strategy: name, ties: newTies(name), budget: newDrainBudget(p, name, prof)}
			if j.ties != nil {
				j.ties.full = p.full
				// A node whose pods the policy's limits keep from moving
				// asks for nothing the plan can take: its turn would be
				// refused pod by pod, a whole walk of the plugin for each.
				j.ties.asks = func(node string) bool {
					if left, _ := p.evictionsLeft(node); left == 0 {
						return false
					}
					pods, _ := p.podsOnNode(node, func(pod *v1.Pod) bool {
						return !simulator.NodeBound(pod) && !p.namespaceFull(pod.Namespace) && j.Filter(pod)
					})
					return len(pods) > 0
				}
				if conflict.Packs(name) {
					j.ties.cost = p.drainCost // its sources are emptied: the cheapest first
				}
				j.ties.version = func() uint64 { return p.version }
				j.ties.setSurvey = func(s *surveyRecord) { p.survey = s }
				ctx = klog.NewContext(ctx, j.ties.logger(klog.FromContext(ctx)))
			}
			pl, err := build(ctx, args, &judgingHandle{Handle: h, evictor: j})
			if err != nil {
				return nil, err
			}
			if d, ok := pl.(frameworktypes.DeschedulePlugin); ok && nothingToEvict(name, pods) {
				return idle{d}, nil
			}
			return p.whileRoom(prof.Name, name, inOrder(pl, j), j.Filter), nil
		}
		out[name] = u
	}
	return out
}

// judge keeps the profile's evictor filters and replaces its Evict.
type judge struct {
	frameworktypes.Evictor
	p                 *planner
	profile, strategy string
	// held collects the evictions a deschedule plugin asks for while it
	// runs, to be judged in a canonical order after it (see inOrder).
	held *[]request
	// ties orders the walk of a utilization plugin over tied nodes; nil
	// for other plugins.
	ties *ties
	// budget holds a plugin that empties nodes to maxDrainCostPercent;
	// nil for other plugins, or with no limit.
	budget *drainBudget
}

func (j *judge) Evict(ctx context.Context, pod *v1.Pod, opts evictions.EvictOptions) error {
	if j.held != nil {
		*j.held = append(*j.held, request{pod, opts})
		return nil
	}
	if j.ties != nil {
		if err := j.ties.admit(pod.Spec.NodeName); err != nil {
			return err
		}
	}
	if j.budget != nil {
		if err := j.budget.admit(j.profile, j.strategy, pod.Spec.NodeName); err != nil {
			return err
		}
	}
	var simOpts simulator.PredictOptions
	if conflict.Packs(j.strategy) {
		// Its move holds only if the plan empties the node: refused at
		// the node's first eviction, it goes on to the next node. (The
		// judge refuses every move off a node the plan fills.)
		if node := pod.Spec.NodeName; j.p.sources[node] == 0 && j.p.targets[node] == 0 {
			if why, detail := j.p.cannotEmpty(pod, j.Filter); why != "" {
				j.p.skip(j.profile, j.strategy, pod, why, detail)
				return evictions.NewEvictionNodeLimitError(node)
			}
		}
		// A packing plugin of the descheduler's empties a node for the
		// scheduler to place its pods: onto nodes in use, never onto an
		// empty one, which would take a node into use for the one it frees
		// (a profile scoring by requested share ranks a small empty node
		// above a large one in use).
		simOpts.Exclude = j.p.emptyBefore.Has
	}
	return j.move(ctx, pod, opts, simOpts, "")
}

// move judges an eviction the plugin asked for; a gang's member's as the
// move of its whole gang (moveGang), whose other members must pass the
// profile's evictor filters too.
func (j *judge) move(ctx context.Context, pod *v1.Pod, opts evictions.EvictOptions, simOpts simulator.PredictOptions, room string) error {
	if room == "" && gangKey(pod) != "" {
		if s := j.p.survey; s != nil {
			s.move() // a gang's moves are judged in turn, whatever they would be
			return errSkipped
		}
		return j.p.moveGang(ctx, j.profile, j.strategy, pod, opts, simOpts, func(q *v1.Pod) bool { return j.Filter(q) && j.PreEvictionFilter(q) })
	}
	return j.p.judge(ctx, j.profile, j.strategy, pod, opts, simOpts, room)
}
