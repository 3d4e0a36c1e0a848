// Package simulator is the one in-memory cluster every what-if runs on: a
// snapshot's nodes and pods in kube-scheduler's own cache, with a
// kube-scheduler profile (the same in-tree plugins, arguments and weights
// that the cluster's scheduler runs) to place pods on it. It answers "if
// this pod were recreated now, which node would it get?", applies moves,
// evictions and placements incrementally so later questions see them, and
// forks: a fork's changes are kept (Commit) or undone (Revert) at the cost
// of what they changed. The planner, Consolidation, the multi-round
// simulation and the upstream baseline all work on it; nothing else builds
// a scheduler cache or seeds a fake API from a snapshot.
package simulator

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"sort"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/sets"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/dynamic-resource-allocation/resourceslice/tracker"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/features"
	"k8s.io/kubernetes/pkg/scheduler/apis/config"
	internalcache "k8s.io/kubernetes/pkg/scheduler/backend/cache"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/dynamicresources"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/names"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/nodevolumelimits"
	frameworkruntime "k8s.io/kubernetes/pkg/scheduler/framework/runtime"
	"k8s.io/kubernetes/pkg/scheduler/metrics"
	"k8s.io/kubernetes/pkg/scheduler/util/assumecache"
	"k8s.io/utils/clock"

	"github.com/rebalancer-dev/rebalancer/internal/liblog"
	"github.com/rebalancer-dev/rebalancer/pkg/plan"
	schedulerplugins "github.com/rebalancer-dev/rebalancer/pkg/scheduler"
	"github.com/rebalancer-dev/rebalancer/pkg/scheduler/loadaware"
	"github.com/rebalancer-dev/rebalancer/pkg/scheduler/rebalancehint"
	"github.com/rebalancer-dev/rebalancer/pkg/snapshot"
	"github.com/rebalancer-dev/rebalancer/pkg/wellknown"
)

// Prediction is the outcome of one simulated scheduling cycle.
type Prediction struct {
	// Scheduler names the scheduler that places the pod's replacement.
	Scheduler string
	// Steered says whether that scheduler follows rebalance hints (its
	// profile scores with RebalanceHint), so a plan can choose the node.
	Steered bool
	// Node is where the scheduler would put the pod; "" when no node fits.
	Node string
	// Score is Node's total weighted score.
	Score int64
	// Source is the node the pod runs on now ("" for a pending pod).
	Source string
	// SourceFeasible says whether the pod, taken off Source, still passes
	// every Filter plugin there; SourceScore is then Source's total score.
	SourceFeasible bool
	SourceScore    int64
	// Exhaustive says the scheduler scores every feasible node: it does not
	// sample them by percentageOfNodesToScore.
	Exhaustive bool
	// Certain says the scheduler itself, left to its own scoring, would
	// pick Node and no other: it scores every feasible node (no sampling
	// by percentageOfNodesToScore) and Node's score is strictly the
	// highest (kube-scheduler breaks ties at random). PredictOptions.Exclude does
	// not count: the scheduler does not know it.
	Certain bool
	// Candidates, for a drain's pod (PredictOptions.LeaveSource) whose scheduler
	// does not follow hints, when it is not Certain, are all the nodes it
	// could choose by itself: each node
	// that scores highest, ties included, in some sample of feasible nodes
	// it may score (all of them when it scores every feasible node, else any
	// nodesToScore of them). PredictOptions.Exclude does not narrow them.
	Candidates []string
	// Unschedulable explains an empty Node, from the filters' statuses.
	Unschedulable string
}

// scheduler is one scheduler of the cluster: its profile's framework, over
// the simulation's shared cache.
type scheduler struct {
	profile   *config.KubeSchedulerProfile // as configured, sampling included
	framework framework.Framework
	// hints is the profile's RebalanceHint plugin, nil when the profile
	// does not enable it.
	hints *rebalancehint.Plugin
	// devices is the profile's DynamicResources plugin, nil when DRA is
	// off or the profile does not enable it.
	devices devicePlugin
	// steered: the profile scores with RebalanceHint, or rebalancer's
	// extender steers it (modelled as RebalanceHint, see WithExtenders).
	steered bool
	// extender: rebalancer's extender steers this scheduler, which does not
	// follow hints by a plugin of its own.
	extender bool
	// targets is the scheduler whose scoring picks the targets of an
	// extender-steered scheduler's pods (see WithExtenders); nil: its own.
	targets *scheduler
	// next is where this scheduler's next node search starts, as
	// kube-scheduler's nextStartNodeIndex (Replay with a random source only).
	next int
	// hintDecides: RebalanceHint's lead over every other node, times its
	// weight, is more than all the profile's other scores can add up to,
	// so a hinted target that passes the filters wins (see hinted).
	hintDecides bool
	// filterAll filters every node even where kube-scheduler stops early
	// (tests compare the two).
	filterAll bool
	// classes: cycles may run the framework on one node of each class of
	// alike nodes (see classes.go); filters and scores name the profile's
	// Filter and Score plugins.
	classes         bool
	filters, scores []string
	// run runs the profile's Filter and Score plugins as the framework
	// does, at less cost per node (see runner); nil: the framework does.
	run *runner
	// byClass is scoreByClass's list of scores, one per feasible node,
	// reused from cycle to cycle: a cycle's scores are read before the
	// scheduler's next cycle, and a list for every node of a large
	// cluster is most of what a cycle would allocate.
	byClass []fwk.NodePluginScores
}

// filterer is RunFilterPlugins for pod's cycle of sc over the n nodes of
// the node list: the runner's, with the filters state leaves active, else
// the framework's own. slot is the node's place in the list (-1, and n 0:
// a cycle of one node, which remembers nothing).
func (sc *scheduler) filterer(state fwk.CycleState, pod *v1.Pod, n int) func(ctx context.Context, ni fwk.NodeInfo, slot int) *fwk.Status {
	if sc.run == nil {
		return func(ctx context.Context, ni fwk.NodeInfo, _ int) *fwk.Status {
			return sc.framework.RunFilterPlugins(ctx, state, pod, ni)
		}
	}
	fp := sc.run.filterPass(state, pod, n)
	return func(ctx context.Context, ni fwk.NodeInfo, slot int) *fwk.Status {
		return fp.filter(ctx, state, pod, ni, slot)
	}
}

// runScore is RunScorePlugins of sc: the runner's, else the framework's
// own. slots are the nodes' places in the node list of total nodes (nil:
// not known).
func (sc *scheduler) runScore(ctx context.Context, state fwk.CycleState, pod *v1.Pod, nodes []fwk.NodeInfo, slots []int, total int) ([]fwk.NodePluginScores, *fwk.Status) {
	if sc.run == nil {
		return sc.framework.RunScorePlugins(ctx, state, pod, nodes)
	}
	return sc.run.score(ctx, state, pod, nodes, slots, total)
}

// Simulator is the one simulated cluster: the nodes and pods of a snapshot in
// kube-scheduler's own cache, the schedulers that place pods on it (each
// pod is placed by the profile its spec.schedulerName names), and the
// snapshot's other objects. Every what-if forks it (Fork), changes it (Move,
// Evict, Place) and keeps or reverts the changes (Commit, Revert).
// It is not safe for concurrent use.
type Simulator struct {
	logger     klog.Logger
	clock      clock.PassiveClock
	schedulers map[string]*scheduler
	names      []string // schedulers in configuration order
	cache      internalcache.Cache
	snapshot   *internalcache.Snapshot
	optIn      OptIn
	namespaces map[string]*v1.Namespace
	loads      loads
	// held are nodes every placement treats as carrying the drain taint
	// (see Hold).
	held sets.Set[string]
	// keepCodes: the next cycle keeps its filters' status codes (Resolvable).
	keepCodes bool
	// nodeClasses remembers the class of each node (see classes.go);
	// byClassCycles counts the cycles filtered and scored by class.
	nodeClasses   classCache
	byClassCycles int
	// cycleLists are schedule's lists of the nodes of a cycle, reused
	// from cycle to cycle (cycles do not nest, and a cycle's lists are
	// not read after it).
	cycleLists struct {
		feasible, fit, reps []fwk.NodeInfo
		reasons             []*fwk.Status
		slots, repSlots     []int
		tainted             []bool
	}
	// places are the nodes' places in the node list, by name, for the
	// list whose first element and length placesOf says (see placeOf).
	places   map[string]int
	placesOf struct {
		first fwk.NodeInfo
		n     int
	}
	// dra is the DRA manager the schedulers read claims through, with the
	// simulation's own changes (see dra.go); nil when DRA is off.
	dra *draManager

	state
}

// Hold makes every placement from now on treat nodes as carrying the drain
// taint, as the executor taints the nodes a plan holds empty for its cycle
// (plan.Plan.HeldEmpty); Hold(nil) lifts it. It is not part of a fork: the
// caller lifts it.
func (s *Simulator) Hold(nodes sets.Set[string]) {
	s.held = nodes
}

// Option tunes a Simulator.
type Option func(*settings)

type settings struct {
	clock       clock.PassiveClock
	extenders   map[string]int64
	optIn       OptIn
	usageWindow time.Duration
	everyNode   bool
}

// WithEveryNode runs every scheduling cycle's plugins on every node, as
// kube-scheduler does, instead of on one node of each class of nodes the
// cycle's plugins cannot tell apart (see classes.go), and through the
// framework's own RunFilterPlugins and RunScorePlugins instead of the
// runner (see runner.go). The answers are the same; only the time differs.
func WithEveryNode() Option {
	return func(s *settings) { s.everyNode = true }
}

// OptIn names the scheduler that will place the replacement of pod, in
// namespace ns (nil when the snapshot lacks it), when an admission webhook
// gives it another than the one the pod names; "" keeps the pod's.
type OptIn func(pod *v1.Pod, ns *v1.Namespace) string

// WithOptIn makes every pod's scheduler the one its replacement will have
// (see OptIn): the planner judges the pod's moves by that scheduler.
func WithOptIn(o OptIn) Option {
	return func(s *settings) { s.optIn = o }
}

// WithExtenders models rebalancer's extender for the named schedulers,
// with the weight their configuration gives it. kube-scheduler adds an
// extender's score, 0 to 10, times its weight times MaxNodeScore /
// MaxExtenderPriority (10) to each node's total; the extender scores a
// hinted replacement's target 10, its source 0 and other nodes 5, so that
// is RebalanceHint (100, 0, 50) at the extender's weight, and the
// simulation adds the plugin to the profile with that weight. Pods without
// a hint score the same on every node either way.
//
// Such a scheduler's own scoring (default-scheduler spreads pods) is not
// what a plan wants of its targets: those are picked with the scoring of
// the first profile that follows hints by itself (rebalancer-scheduler's,
// made for the policy), among the nodes the pod's own scheduler finds
// feasible; without one, by the scheduler's own scoring.
func WithExtenders(weights map[string]int64) Option {
	return func(s *settings) { s.extenders = weights }
}

// WithUsageWindow sets how long a node's or pod's usage must last to
// count: the simulation takes the least of the snapshot's samples within
// the window before each one's newest (default 0: the newest alone).
func WithUsageWindow(d time.Duration) Option {
	return func(s *settings) { s.usageWindow = d }
}

// Now is the simulation's time (WithClock).
func (s *Simulator) Now() time.Time { return s.clock.Now() }

// WithClock sets the clock the profiles' RebalanceHint plugins judge hint
// ages by (default: the real clock); a multi-round simulation passes its
// simulated clock, so hints expire in simulated time.
func WithClock(c clock.PassiveClock) Option {
	return func(s *settings) { s.clock = c }
}

// New builds a framework for each scheduler profile with the plugins of
// rebalancer-scheduler and loads the snapshot into kube-scheduler's cache:
// bound pods on their nodes, pending pods waiting for Place, finished pods
// kept only for State. The snapshot is not modified.
func New(ctx context.Context, profiles []*config.KubeSchedulerProfile, snap *snapshot.Snapshot, opts ...Option) (*Simulator, error) {
	// Everything the simulator logs comes from kube-scheduler's cache,
	// framework and plugins: below rebalancer's own lines.
	logger := liblog.Quiet(klog.FromContext(ctx).WithName("simulator"))
	initMetrics.Do(metrics.InitMetrics)
	set := settings{clock: clock.RealClock{}}
	for _, o := range opts {
		o(&set)
	}
	if len(profiles) == 0 {
		return nil, fmt.Errorf("no scheduler profile to simulate")
	}

	s := &Simulator{
		logger:     logger,
		clock:      set.clock,
		schedulers: map[string]*scheduler{},
		cache:      internalcache.New(ctx, nil, false),
		snapshot:   internalcache.NewEmptySnapshot(),
		optIn:      set.optIn,
		namespaces: make(map[string]*v1.Namespace, len(snap.Namespaces)),
		state:      newState(snap),
		loads:      newLoads(snap, set.usageWindow),
	}
	for _, ns := range snap.Namespaces {
		s.namespaces[ns.Name] = ns
	}
	libCtx := klog.NewContext(ctx, logger)
	// Plugins read volumes, namespaces, CSI nodes and DRA objects through
	// informers over the snapshot's other objects. Pods and nodes are not
	// seeded: plugins see those through the scheduler's snapshot.
	others := *snap
	others.Pods, others.Nodes = nil, nil
	client, err := Clientset(&others)
	if err != nil {
		return nil, err
	}
	factory := informers.NewSharedInformerFactory(client, 0)

	fopts := []frameworkruntime.Option{
		frameworkruntime.WithClientSet(client),
		frameworkruntime.WithInformerFactory(factory),
		frameworkruntime.WithSnapshotSharedLister(s.snapshot),
		frameworkruntime.WithSharedCSIManager(nodevolumelimits.NewCSIManager(factory.Storage().V1().CSINodes().Lister())),
		// One worker per CPU: kube-scheduler's default of 16 only adds
		// goroutine hand-offs when nothing blocks.
		frameworkruntime.WithParallelism(runtime.GOMAXPROCS(0)),
	}
	// Caches fed by informer event handlers: synced only once their
	// handlers have seen every object the informers list.
	var draSynced []cache.InformerSynced
	if utilfeature.DefaultFeatureGate.Enabled(features.DynamicResourceAllocation) {
		// Without a DRA manager the DynamicResources PreFilter panics.
		claims := assumecache.NewAssumeCache(logger, factory.Resource().V1().ResourceClaims().Informer(), "ResourceClaim", "", nil)
		slices, err := tracker.StartTracker(libCtx, tracker.Options{SliceInformer: factory.Resource().V1().ResourceSlices(), KubeClient: client})
		if err != nil {
			return nil, fmt.Errorf("starting the resource slice tracker: %w", err)
		}
		draSynced = append(draSynced, claims.AddEventHandler(cache.ResourceEventHandlerFuncs{}).HasSynced, slices.HasSynced)
		inner := dynamicresources.NewDRAManager(libCtx, claims, slices, factory)
		s.dra = &draManager{SharedDRAManager: inner, claims: &claimsOverlay{
			inner:   inner.ResourceClaims(),
			log:     func(c claimChange) { s.log(change{claim: &c}) },
			changed: map[string]*resourceapi.ResourceClaim{},
		}}
		fopts = append(fopts, frameworkruntime.WithSharedDRAManager(s.dra))
	}
	held := heldRepositories(snap.Nodes)
	backed := draBacked(snap.DeviceClasses)
	for _, prof := range profiles {
		if _, dup := s.schedulers[prof.SchedulerName]; dup {
			return nil, fmt.Errorf("scheduler profile %q is given twice", prof.SchedulerName)
		}
		sc := &scheduler{profile: prof}
		registry, err := schedulerplugins.All(func(ctx context.Context, obj k8sruntime.Object, h fwk.Handle) (fwk.Plugin, error) {
			p, err := rebalancehint.NewWithClock(ctx, obj, h, set.clock)
			if err == nil {
				sc.hints = p
			}
			return p, err
		}, func(_ context.Context, obj k8sruntime.Object, _ fwk.Handle) (fwk.Plugin, error) {
			// Usage as the simulation has moved it.
			return loadaware.NewWithSource(obj, &s.loads)
		})
		if err != nil {
			return nil, err
		}
		if devices, ok := registry[names.DynamicResources]; ok {
			registry[names.DynamicResources] = func(ctx context.Context, obj k8sruntime.Object, h fwk.Handle) (fwk.Plugin, error) {
				p, err := devices(ctx, obj, h)
				if dp, ok := p.(devicePlugin); ok && err == nil {
					sc.devices = dp
				}
				return p, err
			}
		}
		built := plugins{}
		capture(registry, built)
		// The framework scores every feasible node; sampling, where the
		// profile has it, is modelled on top (see Prediction.Certain).
		p := prof.DeepCopy()
		p.PercentageOfNodesToScore = ptrTo[int32](100)
		extWeight := set.extenders[p.SchedulerName]
		if extWeight > 0 {
			addHintWeight(p, int32(extWeight)) // the configuration loader bounds it
		}
		if sc.framework, err = frameworkruntime.NewFramework(libCtx, registry, p, fopts...); err != nil {
			return nil, fmt.Errorf("building scheduler profile %q: %w", p.SchedulerName, err)
		}
		sc.classes = !set.everyNode && alikeToProfile(p)
		if !set.everyNode {
			if sc.run, err = newRunner(sc.framework, built, p, held, backed); err != nil {
				return nil, fmt.Errorf("building scheduler profile %q: %w", p.SchedulerName, err)
			}
		}
		for _, pl := range sc.framework.ListPlugins().Filter.Enabled {
			sc.filters = append(sc.filters, pl.Name)
		}
		var hintWeight, others int64
		for _, pl := range sc.framework.ListPlugins().Score.Enabled {
			sc.scores = append(sc.scores, pl.Name)
			if pl.Name == rebalancehint.Name && pl.Weight > 0 && sc.hints != nil {
				sc.steered = true
				sc.extender = int64(pl.Weight) <= extWeight
				hintWeight = int64(pl.Weight)
			} else {
				others += int64(pl.Weight)
			}
		}
		sc.hintDecides = sc.steered && hintWeight*rebalancehint.Lead() > others*fwk.MaxScore
		s.schedulers[prof.SchedulerName] = sc
		s.names = append(s.names, prof.SchedulerName)
	}
	for _, name := range s.names {
		if sc := s.schedulers[name]; sc.extender {
			sc.targets = s.hintFollower()
		}
	}
	factory.Start(ctx.Done())
	for typ, ok := range factory.WaitForCacheSync(ctx.Done()) {
		if !ok {
			return nil, fmt.Errorf("informer for %v did not sync", typ)
		}
	}
	if !cache.WaitForCacheSync(ctx.Done(), draSynced...) {
		return nil, errors.New("the ResourceClaims and ResourceSlices of the simulation did not sync")
	}

	// The only change to nodes in a simulation: after this, only their
	// pods change (the runner's memos count on it, see memo.go).
	for _, n := range snap.Nodes {
		s.cache.AddNode(logger, n)
	}
	for i, pod := range snap.Pods {
		if i%4096 == 0 && ctx.Err() != nil {
			return nil, context.Cause(ctx) // 150,000 pods take seconds
		}
		if err := s.admit(pod); err != nil {
			return nil, err
		}
	}
	if err := s.sync(); err != nil {
		return nil, err
	}
	return s, nil
}

// addHintWeight adds weight to RebalanceHint's score weight in prof, as
// kube-scheduler resolves it: an entry in plugins.score wins over one in
// multiPoint. Without either, the plugin models the extender: it scores
// and consumes hints (PreScore, Score, Reserve), but holds no room for
// replacements, which an extender without a filter verb cannot.
func addHintWeight(prof *config.KubeSchedulerProfile, weight int32) {
	for _, list := range [][]config.Plugin{prof.Plugins.Score.Enabled, prof.Plugins.MultiPoint.Enabled} {
		for i := range list {
			if list[i].Name == rebalancehint.Name {
				list[i].Weight += weight
				return
			}
		}
	}
	hint := config.Plugin{Name: rebalancehint.Name}
	prof.Plugins.PreScore.Enabled = append(prof.Plugins.PreScore.Enabled, hint)
	prof.Plugins.Reserve.Enabled = append(prof.Plugins.Reserve.Enabled, hint)
	hint.Weight = weight
	prof.Plugins.Score.Enabled = append(prof.Plugins.Score.Enabled, hint)
}

// hintFollower is the first scheduler, in configuration order, that
// follows hints by a plugin of its own; nil if there is none.
func (s *Simulator) hintFollower() *scheduler {
	for _, name := range s.names {
		if sc := s.schedulers[name]; sc.steered && !sc.extender {
			return sc
		}
	}
	return nil
}

// ErrUnknownScheduler is returned for a pod whose scheduler the simulation
// has no profile for: it cannot say where that pod would go.
var ErrUnknownScheduler = errors.New("no profile of this scheduler is modelled")

// SchedulerName is the scheduler that places pod: spec.schedulerName, or
// default-scheduler, as the API server defaults it.
func SchedulerName(pod *v1.Pod) string {
	if pod.Spec.SchedulerName == "" {
		return v1.DefaultSchedulerName
	}
	return pod.Spec.SchedulerName
}

// SchedulerOf is the scheduler that places pod's replacement: the one an
// opt-in gives it (WithOptIn), else the one it names.
func (s *Simulator) SchedulerOf(pod *v1.Pod) string {
	if s.optIn != nil {
		if name := s.optIn(pod, s.namespaces[pod.Namespace]); name != "" {
			return name
		}
	}
	return SchedulerName(pod)
}

func (s *Simulator) schedulerOf(pod *v1.Pod) (*scheduler, error) {
	name := s.SchedulerOf(pod)
	sc, ok := s.schedulers[name]
	if !ok {
		return nil, fmt.Errorf("pod %s, scheduler %q: %w", klog.KObj(pod), name, ErrUnknownScheduler)
	}
	return sc, nil
}

// Scheduler describes one modelled scheduler.
type Scheduler struct {
	Profile *config.KubeSchedulerProfile
	// Steered: the profile follows rebalance hints.
	Steered bool
	// Extender: rebalancer's extender steers it, not a plugin of its own;
	// TargetsBy then names the scheduler whose scoring picks its pods'
	// targets ("" when its own does).
	Extender  bool
	TargetsBy string
	// ScoreWeights is the weight of every Score plugin of the profile, as
	// the framework resolved them from the configuration and its defaults.
	ScoreWeights map[string]int32
}

// Schedulers lists the modelled schedulers in configuration order.
func (s *Simulator) Schedulers() []Scheduler {
	out := make([]Scheduler, 0, len(s.names))
	for _, name := range s.names {
		sc := s.schedulers[name]
		weights := map[string]int32{}
		for _, p := range sc.framework.ListPlugins().Score.Enabled {
			weights[p.Name] = p.Weight
		}
		out = append(out, Scheduler{Profile: sc.profile, Steered: sc.steered, Extender: sc.extender, ScoreWeights: weights})
		if sc.targets != nil {
			out[len(out)-1].TargetsBy = sc.targets.profile.SchedulerName
		}
	}
	return out
}

// initMetrics creates kube-scheduler's metric objects, which the framework
// needs, without registering them: unregistered metrics are no-ops, so the
// simulation neither pays for per-plugin counters in its hot loop nor shows
// its own plugin runs as a scheduler's on rebalancer's /metrics.
var initMetrics sync.Once

func ptrTo[T any](v T) *T { return &v }

// PredictOptions narrow one prediction.
type PredictOptions struct {
	// Exclude rules nodes out as targets after the filters ran (e.g. nodes
	// being drained). It is not asked about the source.
	Exclude func(node string) bool
	// LeaveSource rules the source node out as a target: the pod must go
	// (the executor taints a node it drains, so no scheduler puts the
	// replacement back there).
	LeaveSource bool
	// Prefer, for a steered pod, picks the best of the nodes it holds true
	// for among those the others allow, when there is one: a hint sends
	// the replacement wherever the plan says. An unsteered scheduler makes
	// its own choice, so it is not asked.
	Prefer func(node string) bool
	// PreferElse, when no node Prefer holds for is allowed, picks the best
	// of those it holds true for (a second choice, asked as Prefer is).
	PreferElse func(node string) bool
	// Drained are the nodes that carry the drain taint when the
	// replacement is scheduled (plan.DrainTaint: the executor taints the
	// nodes a plan empties before its first eviction, to the end of the
	// cycle). A replacement that does not tolerate it cannot go there,
	// whatever the scores.
	Drained sets.Set[string]
}

// Predict runs one scheduling cycle for the pod, with its own scheduler's
// profile, as its replacement would see the cluster: the pod is taken off
// its node first, and put back after. Ties between the best nodes go to the
// source node (a move must be strictly better), then to the node name, so
// predictions are repeatable. A pod whose scheduler is not modelled gets
// ErrUnknownScheduler.
func (s *Simulator) Predict(ctx context.Context, pod *v1.Pod, opts PredictOptions) (Prediction, error) {
	pred := Prediction{Source: pod.Spec.NodeName, Scheduler: s.SchedulerOf(pod)}
	sc, err := s.schedulerOf(pod)
	if err != nil {
		return pred, err
	}
	pred.Steered = sc.steered
	if pred.Source != "" {
		e, ok := s.bound[pod.UID]
		if !ok {
			return pred, fmt.Errorf("pod %s (UID %s) is not in the simulation", klog.KObj(pod), pod.UID)
		}
		// Off its node for this cycle only: the state does not change.
		if err := s.cache.RemovePod(s.logger, e.pod); err != nil {
			return pred, fmt.Errorf("removing pod %s from the simulation: %w", klog.KObj(pod), err)
		}
		defer func() {
			// Restoring what was just removed cannot fail unless the cache is broken.
			if err := s.cache.AddPod(s.logger, e.pod); err != nil {
				panic(err)
			}
			if err := s.sync(); err != nil {
				panic(err)
			}
		}()
		if err := s.sync(); err != nil {
			return pred, err
		}
	}
	// The replacement is a new pod of the same template: not bound, no UID
	// of its own, no nominated node.
	candidate := pod.DeepCopy()
	candidate.Spec.NodeName = ""
	candidate.Status = v1.PodStatus{}
	candidate, undo, err := s.claimsForOneCycle(pod, candidate)
	if err != nil {
		return pred, err
	}
	defer undo()

	res, err := s.schedule(ctx, sc, candidate, nil, opts.Drained)
	if err != nil {
		return pred, err
	}
	feasible := len(res.scores)
	if opts.LeaveSource && slices.ContainsFunc(res.scores, func(ns fwk.NodePluginScores) bool { return ns.Name == pred.Source }) {
		feasible-- // the drain taint keeps it off the source
	}
	exhaustive := sc.scoresAll(feasible, res.considered)
	if sc.targets != nil && exhaustive {
		// The extender steers the replacement wherever the plan says;
		// the plan's scoring says where (see WithExtenders).
		if res.scores, err = s.rescore(ctx, sc.targets, candidate, res.scores); err != nil {
			return pred, err
		}
	}
	scores := res.scores
	for _, ns := range scores {
		if ns.Name == pred.Source {
			pred.SourceFeasible, pred.SourceScore = true, ns.TotalScore
		}
	}
	best, top, atTop := -1, int64(0), 0
	preferred, second := -1, -1
	for i, ns := range scores {
		if ns.Name == pred.Source && opts.LeaveSource {
			continue
		}
		// The scheduler's own choice, which Exclude does not narrow.
		switch {
		case atTop == 0 || ns.TotalScore > top:
			top, atTop = ns.TotalScore, 1
		case ns.TotalScore == top:
			atTop++
		}
		// Exclude and Prefer are asked only about a node that would beat
		// the best so far: their callers' rules cost more than a score.
		bestYet := best < 0 || better(ns, scores[best], pred.Source)
		steerable := pred.Steered && ns.Name != pred.Source
		preferredYet := opts.Prefer != nil && steerable && (preferred < 0 || better(ns, scores[preferred], pred.Source))
		secondYet := opts.PreferElse != nil && steerable && preferred < 0 && (second < 0 || better(ns, scores[second], pred.Source))
		if !bestYet && !preferredYet && !secondYet || opts.Exclude != nil && ns.Name != pred.Source && opts.Exclude(ns.Name) {
			continue
		}
		if bestYet {
			best = i
		}
		switch {
		case preferredYet && opts.Prefer(ns.Name):
			preferred = i
		case secondYet && opts.PreferElse(ns.Name):
			second = i
		}
	}
	switch {
	case preferred >= 0:
		best = preferred
	case second >= 0:
		best = second
	}
	if best < 0 {
		pred.Unschedulable = res.diagnosis
		if len(scores) > 0 {
			// Nodes passed the filters, but none the pod may go to.
			pred.Unschedulable = fmt.Sprintf("%d/%d nodes pass the filters, none it may go to", len(scores), res.considered)
			if pred.SourceFeasible && opts.LeaveSource {
				pred.Unschedulable += fmt.Sprintf(": it must leave %s", pred.Source)
				if len(scores) > 1 {
					pred.Unschedulable += ", and the others are ruled out as targets"
				}
			}
		}
		return pred, nil
	}
	pred.Node, pred.Score = scores[best].Name, scores[best].TotalScore
	pred.Exhaustive = exhaustive
	pred.Certain = pred.Exhaustive && atTop == 1 && pred.Score == top
	if !pred.Certain && !pred.Steered && opts.LeaveSource {
		// The drain taint keeps it off its source.
		choice := slices.DeleteFunc(slices.Clone(scores), func(ns fwk.NodePluginScores) bool { return ns.Name == pred.Source })
		pred.Candidates = sc.candidates(choice, exhaustive, res.considered)
	}
	return pred, nil
}

// candidates are the nodes of scores (all feasible nodes) that sc may
// choose by itself: the best, ties included, when it scores them all
// (exhaustive), else each node that is best in some sample of
// nodesToScore(considered) of them. kube-scheduler takes its sample from a
// rotating start in its own node order, which depends on when each node
// joined its cache and is not known here: any sample of that size is
// assumed possible. Scores are taken as scored with every feasible node;
// plugins that normalize over the sample may score a sample a little
// differently.
func (sc *scheduler) candidates(scores []fwk.NodePluginScores, exhaustive bool, considered int) []string {
	sample := len(scores)
	if !exhaustive {
		sample = sc.nodesToScore(considered)
	}
	var out []string
	for _, i := range winners(scores, sample) {
		out = append(out, scores[i].Name)
	}
	return out
}

// winners returns, in order, the indices of the scores that are highest
// (ties included) in some sample of n of them: a score is, when at least
// n-1 others are not above it.
func winners(scores []fwk.NodePluginScores, n int) []int {
	sorted := make([]int64, len(scores))
	for i, s := range scores {
		sorted[i] = s.TotalScore
	}
	slices.Sort(sorted)
	n = min(max(n, 1), len(scores))
	var out []int
	for i, s := range scores {
		// How many scores, this one included, are not above it.
		notAbove, _ := slices.BinarySearch(sorted, s.TotalScore+1)
		if notAbove >= n {
			out = append(out, i)
		}
	}
	return out
}

// scoresAll says whether kube-scheduler, finding feasible of considered
// nodes feasible, scores them all rather than a sample: the condition for
// its choice to be predictable (Prediction.Exhaustive).
func (sc *scheduler) scoresAll(feasible, considered int) bool {
	return feasible <= sc.nodesToScore(considered)
}

// nodesToScore is how many feasible nodes kube-scheduler looks for before
// it stops filtering and scores them, among n nodes (its
// numFeasibleNodesToFind): all below 100 nodes, else the profile's
// percentageOfNodesToScore, adaptive when unset or 0.
func (sc *scheduler) nodesToScore(n int) int {
	const minNodes, minPercentage = 100, 5
	if !sc.framework.HasScorePlugins() {
		return 1 // the first feasible node wins
	}
	if n < minNodes {
		return n
	}
	var pct int32
	if p := sc.profile.PercentageOfNodesToScore; p != nil {
		pct = *p
	}
	if pct >= 100 {
		return n
	}
	if pct == 0 {
		pct = max(int32(50)-int32(n)/125, minPercentage)
	}
	return max(n*int(pct)/100, minNodes)
}

func better(a, b fwk.NodePluginScores, source string) bool {
	if a.TotalScore != b.TotalScore {
		return a.TotalScore > b.TotalScore
	}
	if (a.Name == source) != (b.Name == source) {
		return a.Name == source
	}
	return a.Name < b.Name
}

// cycle is the outcome of one simulated scheduling cycle.
type cycle struct {
	// scores are the feasible nodes' total scores, in node list order.
	scores []fwk.NodePluginScores
	// considered is the number of nodes PreFilter left to filter, and
	// feasible how many of them passed the filters.
	considered, feasible int
	// diagnosis says why no node was feasible.
	diagnosis string
	state     *framework.CycleState
	// hinted: the pod's hint alone decided (see hinted); scores holds its
	// target alone, unscored, and feasible is not counted.
	hinted bool
	// partial: with node sampling, the filters stopped once they had found
	// the nodes to score, as kube-scheduler's do; feasible counts those.
	partial bool
	// codes are the filters' status codes by node (of nodes, the nodes
	// filtered), kept only when Resolvable asks.
	codes []fwk.Code
	nodes []fwk.NodeInfo
}

// claimsForOneCycle gives candidate, the pod a cycle schedules in pod's
// place, its claims for that cycle only: pod's claims made from templates
// are released, candidate's made anew, as for a replacement. undo reverts
// them.
func (s *Simulator) claimsForOneCycle(pod, candidate *v1.Pod) (_ *v1.Pod, undo func(), err error) {
	if s.dra == nil || len(pod.Spec.ResourceClaims) == 0 {
		return candidate, func() {}, nil
	}
	f := s.Fork()
	undo = func() {
		if err := s.Revert(f); err != nil {
			panic(err)
		}
	}
	s.releaseClaims(pod)
	if candidate, err = s.withClaims(candidate); err != nil {
		undo()
		return nil, nil, err
	}
	return candidate, undo, nil
}

// Resolvable runs a scheduling cycle for the pending pod with its own
// scheduler's profile and returns the nodes that rejected it only in a way
// taking pods off them may resolve (status Unschedulable, such as too
// little of a resource; not UnschedulableAndUnresolvable, such as a taint,
// a node selector or affinity), as kube-scheduler's preemption chooses the
// nodes where preemption might help. A node that rejected it for several
// reasons is judged by the first filter that did, as there. fits says the
// pod fits some node as the cluster is: then no node is listed.
func (s *Simulator) Resolvable(ctx context.Context, pod *v1.Pod) (fits bool, nodes []string, err error) {
	sc, err := s.schedulerOf(pod)
	if err != nil {
		return false, nil, err
	}
	pod, undo, err := s.claimsForOneCycle(pod, pod)
	if err != nil {
		return false, nil, err
	}
	defer undo()
	s.keepCodes = true
	c, err := s.schedule(ctx, sc, pod, nil, nil)
	s.keepCodes = false
	if err != nil || len(c.scores) > 0 {
		return len(c.scores) > 0, nil, err
	}
	for i, code := range c.codes {
		if code == fwk.Unschedulable {
			nodes = append(nodes, c.nodes[i].Node().Name)
		}
	}
	return false, nodes, nil
}

// hinted is schedule for a pod whose hint decides its node: when sc's
// RebalanceHint outweighs every other score (hintDecides), sc scores every
// node it considers, and the hinted target passes PreFilter and the
// filters, the target scores highest of all feasible nodes whatever the
// other plugins say, so only the target is filtered and nothing scored.
// ok is false when it cannot tell: schedule then runs the whole cycle.
func (s *Simulator) hinted(ctx context.Context, sc *scheduler, pod *v1.Pod, drained sets.Set[string]) (c cycle, ok bool, err error) {
	if !sc.hintDecides {
		return c, false, nil
	}
	target := sc.hints.Target(pod)
	if target == "" || drained.Has(target) || s.held.Has(target) {
		return c, false, nil
	}
	ni, err := s.snapshot.NodeInfos().Get(target)
	if err != nil {
		return c, false, nil // gone: the whole cycle says where it goes
	}
	c.state = framework.NewCycleState()
	// Only the target is filtered: RebalanceHint needs the room promised
	// there alone, not on every target of the plan.
	c.state.Write(rebalancehint.FilteredKey, rebalancehint.Filtered{target})
	preRes, status, _ := sc.framework.RunPreFilterPlugins(ctx, c.state, pod)
	if !status.IsSuccess() {
		return c, false, nil
	}
	all, err := s.snapshot.NodeInfos().List()
	if err != nil {
		return c, false, err
	}
	c.considered = len(all)
	if !preRes.AllNodes() {
		if !preRes.NodeNames.Has(target) {
			return c, false, nil
		}
		c.considered = len(preRes.NodeNames) // an upper bound: names may include nodes that do not exist
	}
	if sc.nodesToScore(c.considered) < c.considered {
		return c, false, nil // the target may be left out of the sample scored
	}
	if !sc.filterer(c.state, pod, 0)(ctx, ni, -1).IsSuccess() {
		return c, false, nil
	}
	c.scores, c.hinted = []fwk.NodePluginScores{{Name: target}}, true
	return c, true, nil
}

// placeOf is the place of the node named in all, the snapshot's node
// list; false when it is not in it. The places are indexed once per list,
// and again when they no longer match it.
func (s *Simulator) placeOf(all []fwk.NodeInfo, name string) (int, bool) {
	if len(all) == 0 {
		return 0, false
	}
	fresh := s.places == nil || s.placesOf.first != all[0] || s.placesOf.n != len(all)
	if !fresh {
		i, ok := s.places[name]
		switch {
		case ok && all[i].Node().Name == name:
			return i, true
		case !ok:
			if _, err := s.snapshot.NodeInfos().Get(name); err != nil {
				return 0, false // no such node
			}
		}
		// The list changed under the same first node and length.
	}
	s.places = make(map[string]int, len(all))
	for i, ni := range all {
		s.places[ni.Node().Name] = i
	}
	s.placesOf.first, s.placesOf.n = all[0], len(all)
	i, ok := s.places[name]
	return i, ok
}

// schedule mirrors kube-scheduler's schedulePod with sc's profile:
// PreFilter, Filter over the nodes PreFilter allows, then PreScore and Score
// (with normalization) over the feasible nodes: all of them, or with random
// set the sample kube-scheduler would score (see sample). The drained
// nodes carry the drain taint (none when empty).
func (s *Simulator) schedule(ctx context.Context, sc *scheduler, pod *v1.Pod, random *rand.Rand, drained sets.Set[string]) (cycle, error) {
	var c cycle
	c.state = framework.NewCycleState()
	all, err := s.snapshot.NodeInfos().List()
	if err != nil {
		return c, err
	}
	if len(all) == 0 {
		c.diagnosis = "no nodes"
		return c, nil
	}
	fw := sc.framework
	preRes, status, _ := fw.RunPreFilterPlugins(ctx, c.state, pod)
	if !status.IsSuccess() {
		if why, failed := failedCycle(status); failed { // this pod's cycle alone (dra.go)
			c.diagnosis = why
			return c, nil
		}
		if !status.IsRejected() {
			return c, status.AsError()
		}
		c.diagnosis = status.Message()
		return c, nil
	}
	nodes := all
	var slots []int // nodes[i] is all[slots[i]]; nil: nodes is all
	if !preRes.AllNodes() {
		nodes = make([]fwk.NodeInfo, 0, len(preRes.NodeNames))
		for i, ni := range all { // in node list order, as kube-scheduler
			if preRes.NodeNames.Has(ni.Node().Name) {
				nodes = append(nodes, ni)
				slots = append(slots, i)
			}
		}
	}
	slot := func(i int) int {
		if slots == nil {
			return i
		}
		return slots[i]
	}
	c.considered = len(nodes)
	c.nodes = nodes

	feasible := reuse(&s.cycleLists.feasible, len(nodes))
	// Why each node was refused; read only when no node fits.
	reasons := reuse(&s.cycleLists.reasons, len(nodes))
	if s.keepCodes {
		c.codes = make([]fwk.Code, len(nodes))
	}
	var firstErr error
	var errOnce sync.Once
	// The drained and held nodes, by place in nodes (nil: none): read for
	// every node filtered, so a slice, not a map.
	var tainted []bool
	if len(drained) > 0 || len(s.held) > 0 {
		drainTaint := plan.DrainTaint("")
		if !corev1helpers.TolerationsTolerateTaint(s.logger, pod.Spec.Tolerations, &drainTaint, true) {
			tainted = reuse(&s.cycleLists.tainted, len(nodes))
			marked := false
			for _, names := range []sets.Set[string]{drained, s.held} {
				for name := range names {
					i, ok := s.placeOf(all, name)
					if ok && slots != nil {
						j := sort.SearchInts(slots, i) // slots ascend
						i, ok = j, j < len(slots) && slots[j] == i
					}
					if ok {
						tainted[i], marked = true, true
					}
				}
			}
			if !marked {
				tainted = nil
			}
		}
	}
	runFilters := sc.filterer(c.state, pod, len(all))
	filter := func(i int) {
		if tainted != nil && tainted[i] {
			reasons[i] = drainTaintRefusal
			if c.codes != nil {
				c.codes[i] = fwk.UnschedulableAndUnresolvable
			}
			return
		}
		st := runFilters(ctx, nodes[i], slot(i))
		switch {
		case st.IsSuccess():
			feasible[i] = nodes[i]
		case st.IsRejected():
			reasons[i] = st
			if c.codes != nil {
				c.codes[i] = st.Code()
			}
		default:
			reasons[i] = st
			errOnce.Do(func() { firstErr = st.AsError() })
		}
	}
	n, want := len(nodes), sc.nodesToScore(len(nodes))
	var cl *classes
	if random == nil || want >= n || sc.filterAll {
		if random == nil { // a replay's random search lists nodes in its own order
			cl = s.byClass(sc, c.state, pod, nodes, tainted)
		}
		if cl != nil {
			parallel(ctx, len(cl.reps), func(k int) { filter(cl.reps[k]) })
			for i, first := range cl.first {
				switch {
				case first < 0:
					filter(i) // the drain taint decides
				case first != i:
					reasons[i] = reasons[first]
					if c.codes != nil {
						c.codes[i] = c.codes[first]
					}
					if feasible[first] != nil {
						feasible[i] = nodes[i]
					}
				}
			}
		} else {
			parallel(ctx, n, filter)
		}
		for _, ni := range feasible {
			if ni != nil {
				c.feasible++
			}
		}
	} else {
		// kube-scheduler stops filtering once it has found the feasible
		// nodes it scores, walking from where its last search stopped
		// (sample then keeps the same nodes): chunk by chunk, in that order.
		walked := 0
		for walked < n && c.feasible < want && firstErr == nil && ctx.Err() == nil {
			chunk := min(want, n-walked)
			parallel(ctx, chunk, func(k int) { filter((sc.next + walked + k) % n) })
			for k := range chunk {
				if feasible[(sc.next+walked+k)%n] != nil {
					c.feasible++
				}
			}
			walked += chunk
		}
		c.partial = walked < n
	}
	if firstErr != nil {
		if why, failed := failedFilters(reasons); failed && ctx.Err() == nil { // this pod's cycle alone (dra.go)
			return cycle{state: c.state, considered: c.considered, nodes: c.nodes, diagnosis: why}, nil
		}
		return c, firstErr
	}
	if err := ctx.Err(); err != nil {
		// Until stops at an ended context, leaving nodes unfiltered: no
		// node found is then no answer, not "nothing fits".
		return c, err
	}
	if random != nil && len(nodes) > 0 {
		feasible = sc.sample(feasible)
	}
	fit := feasible[:0]
	if cl != nil {
		// scoreByClass reads feasible as filtered, indexed like nodes.
		fit = reuse(&s.cycleLists.fit, c.feasible)[:0]
	}
	var fitSlots []int // fit[k]'s place in all; nil once sampled
	if random == nil {
		fitSlots = reuse(&s.cycleLists.slots, c.feasible)[:0]
	}
	for i, ni := range feasible {
		if ni != nil {
			fit = append(fit, ni)
			if random == nil {
				fitSlots = append(fitSlots, slot(i))
			}
		}
	}
	if len(fit) == 0 {
		c.diagnosis = summarize(reasons, len(nodes))
		return c, nil
	}
	if !fw.HasScorePlugins() {
		c.scores = make([]fwk.NodePluginScores, len(fit))
		for i, ni := range fit {
			c.scores[i] = fwk.NodePluginScores{Name: ni.Node().Name, TotalScore: 1}
		}
		return c, nil
	}
	if cl != nil {
		scores, ok, err := s.scoreByClass(ctx, sc, c.state, pod, nodes, feasible, len(fit), cl, slot, len(all))
		if err != nil || ok {
			c.scores = scores
			return c, err
		}
	}
	if st := fw.RunPreScorePlugins(ctx, c.state, pod, fit); !st.IsSuccess() {
		return c, st.AsError()
	}
	scores, st := sc.runScore(ctx, c.state, pod, fit, fitSlots, len(all))
	if !st.IsSuccess() {
		return c, st.AsError()
	}
	c.scores = scores
	return c, nil
}

// scoreByClass scores the feasible first node of each class and gives each
// feasible node its class's scores, in node list order, as RunScorePlugins
// would list them; ok is false when a Score plugin that reads more of a
// node than its class (see scoresByClass) did not skip itself, and the
// caller scores every node. feasible, indexed like nodes, holds fit nodes.
func (s *Simulator) scoreByClass(ctx context.Context, sc *scheduler, state fwk.CycleState, pod *v1.Pod, nodes, feasible []fwk.NodeInfo, fit int, cl *classes, slot func(int) int, total int) ([]fwk.NodePluginScores, bool, error) {
	fw := sc.framework
	// At most one first node a class: the lists never outgrow these.
	reps := reuse(&s.cycleLists.reps, len(cl.reps))[:0]
	repSlots := reuse(&s.cycleLists.repSlots, len(cl.reps))[:0]
	for _, i := range cl.reps {
		if feasible[i] != nil {
			reps = append(reps, nodes[i])
			repSlots = append(repSlots, slot(i))
		}
	}
	if st := fw.RunPreScorePlugins(ctx, state, pod, reps); !st.IsSuccess() {
		return nil, false, st.AsError()
	}
	if !scoresAlike(sc.scores, state) {
		return nil, false, nil
	}
	repScores, st := sc.runScore(ctx, state, pod, reps, repSlots, total)
	if !st.IsSuccess() {
		return nil, false, st.AsError()
	}
	cc := &s.nodeClasses
	k := 0
	for _, i := range cl.reps {
		if feasible[i] != nil {
			cc.scored[cc.at[i].id] = k
			k++
		}
	}
	out := slices.Grow(sc.byClass[:0], fit)
	for i, ni := range feasible {
		if ni == nil {
			continue // a node with the drain taint (first < 0) is among these
		}
		ns := repScores[cc.scored[cc.at[i].id]]
		ns.Name = ni.Node().Name
		out = append(out, ns)
	}
	sc.byClass = out
	s.byClassCycles++
	return out, true, nil
}

// rescore scores the nodes of scores, found feasible by the pod's own
// scheduler, with another scheduler's PreScore and Score plugins. When that
// scheduler's PreFilter rejects the pod, the scores are kept as they are.
func (s *Simulator) rescore(ctx context.Context, by *scheduler, pod *v1.Pod, scores []fwk.NodePluginScores) ([]fwk.NodePluginScores, error) {
	if len(scores) == 0 || !by.framework.HasScorePlugins() {
		return scores, nil
	}
	state := framework.NewCycleState()
	if _, st, _ := by.framework.RunPreFilterPlugins(ctx, state, pod); !st.IsSuccess() {
		if st.IsRejected() {
			return scores, nil
		}
		return nil, st.AsError()
	}
	nodes := make([]fwk.NodeInfo, len(scores))
	for i, ns := range scores {
		ni, err := s.snapshot.NodeInfos().Get(ns.Name)
		if err != nil {
			return nil, err
		}
		nodes[i] = ni
	}
	if st := by.framework.RunPreScorePlugins(ctx, state, pod, nodes); !st.IsSuccess() {
		return nil, st.AsError()
	}
	out, st := by.runScore(ctx, state, pod, nodes, nil, 0)
	if !st.IsSuccess() {
		return nil, st.AsError()
	}
	return out, nil
}

// sample keeps the feasible nodes kube-scheduler would find: walking the
// node list from where its last search stopped, the first nodesToScore
// feasible ones. feasible is indexed like the node list, nil where a node
// failed; the search start moves past the nodes walked, as kube-scheduler's
// nextStartNodeIndex does.
func (sc *scheduler) sample(feasible []fwk.NodeInfo) []fwk.NodeInfo {
	n := len(feasible)
	want := sc.nodesToScore(n)
	out := make([]fwk.NodeInfo, 0, want)
	walked := 0
	for ; walked < n && len(out) < want; walked++ {
		if ni := feasible[(sc.next+walked)%n]; ni != nil {
			out = append(out, ni)
		}
	}
	sc.next = (sc.next + walked) % n
	return out
}

// drainTaintRefusal is a node's refusal of a pod that does not tolerate
// the drain taint, as TaintToleration words it.
var drainTaintRefusal = fwk.NewStatus(fwk.UnschedulableAndUnresolvable, fmt.Sprintf("node(s) had untolerated taint {%s: }", wellknown.DrainTaintKey))

// summarize counts the filter rejections, as kube-scheduler's FitError does:
// "0/5 nodes are available: 3 Insufficient cpu, 2 node(s) had untolerated taint".
func summarize(reasons []*fwk.Status, total int) string {
	counts := map[string]int{}
	for _, r := range reasons {
		if r != nil {
			counts[r.Message()]++
		}
	}
	keys := make([]string, 0, len(counts))
	for k := range counts {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	msg := fmt.Sprintf("0/%d nodes are available", total)
	for i, k := range keys {
		sep := ", "
		if i == 0 {
			sep = ": "
		}
		msg += fmt.Sprintf("%s%d %s", sep, counts[k], k)
	}
	return msg
}

// PodsOn lists the pods the simulation has on a node, in a stable order.
func (s *Simulator) PodsOn(node string) ([]*v1.Pod, error) {
	ni, err := s.snapshot.NodeInfos().Get(node)
	if err != nil {
		return nil, err
	}
	pods := make([]*v1.Pod, 0, len(ni.GetPods()))
	for _, pi := range ni.GetPods() {
		pods = append(pods, pi.GetPod())
	}
	sort.Slice(pods, func(i, j int) bool {
		if pods[i].Namespace != pods[j].Namespace {
			return pods[i].Namespace < pods[j].Namespace
		}
		return pods[i].Name < pods[j].Name
	})
	return pods, nil
}

// Node returns the simulation's view of a node: its object and requested resources.
func (s *Simulator) Node(name string) (fwk.NodeInfo, error) {
	return s.snapshot.NodeInfos().Get(name)
}

// Nodes returns every node of the simulation.
func (s *Simulator) Nodes() ([]fwk.NodeInfo, error) {
	return s.snapshot.NodeInfos().List()
}
