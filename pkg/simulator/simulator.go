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
	"fmt"
	"runtime"
	"sort"
	"sync"

	v1 "k8s.io/api/core/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/client-go/informers"
	"k8s.io/dynamic-resource-allocation/resourceslice/tracker"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/features"
	"k8s.io/kubernetes/pkg/scheduler/apis/config"
	internalcache "k8s.io/kubernetes/pkg/scheduler/backend/cache"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/dynamicresources"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/nodevolumelimits"
	frameworkruntime "k8s.io/kubernetes/pkg/scheduler/framework/runtime"
	"k8s.io/kubernetes/pkg/scheduler/metrics"
	"k8s.io/kubernetes/pkg/scheduler/util/assumecache"
	"k8s.io/utils/clock"

	"github.com/rebalancer-dev/rebalancer/internal/liblog"
	"github.com/rebalancer-dev/rebalancer/pkg/scheduler/rebalancehint"
	"github.com/rebalancer-dev/rebalancer/pkg/snapshot"
)

// Registry returns the plugins rebalancer-scheduler is built with: the
// in-tree ones and ours. The simulator must know exactly the same set.
func Registry() (frameworkruntime.Registry, error) {
	return registry(rebalancehint.New)
}

func registry(hintFactory frameworkruntime.PluginFactory) (frameworkruntime.Registry, error) {
	r := plugins.NewInTreeRegistry()
	if err := r.Register(rebalancehint.Name, hintFactory); err != nil {
		return nil, err
	}
	return r, nil
}

// Prediction is the outcome of one simulated scheduling cycle.
type Prediction struct {
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
	// Feasible is the number of nodes that passed the filters.
	Feasible int
	// Unschedulable explains an empty Node, from the filters' statuses.
	Unschedulable string
}

// Simulator is the one simulated cluster: the nodes and pods of a snapshot in
// kube-scheduler's own cache, the scheduler profile that places pods on it,
// and the snapshot's other objects. Every what-if forks it (Fork), changes it
// (Move, Evict, Place) and keeps or reverts the changes (Commit, Revert).
// It is not safe for concurrent use.
type Simulator struct {
	logger    klog.Logger
	profile   *config.KubeSchedulerProfile
	framework framework.Framework
	cache     internalcache.Cache
	snapshot  *internalcache.Snapshot
	// hints is the profile's RebalanceHint plugin, nil when the profile
	// does not enable it.
	hints *rebalancehint.Plugin

	state
}

// Option tunes a Simulator.
type Option func(*settings)

type settings struct {
	clock clock.PassiveClock
}

// WithClock sets the clock the profile's RebalanceHint plugin judges hint
// ages by (default: the real clock); a multi-round simulation passes its
// simulated clock, so hints expire in simulated time.
func WithClock(c clock.PassiveClock) Option {
	return func(s *settings) { s.clock = c }
}

// New builds the profile's framework with the plugins of rebalancer-scheduler
// and loads the snapshot into kube-scheduler's cache: bound pods on their
// nodes, pending pods waiting for Place, finished pods kept only for State.
// The snapshot is not modified.
func New(ctx context.Context, profile *config.KubeSchedulerProfile, snap *snapshot.Snapshot, opts ...Option) (*Simulator, error) {
	logger := klog.FromContext(ctx).WithName("simulator")
	initMetrics.Do(metrics.InitMetrics)
	set := settings{clock: clock.RealClock{}}
	for _, o := range opts {
		o(&set)
	}

	s := &Simulator{
		logger:   logger,
		profile:  profile,
		cache:    internalcache.New(ctx, nil, false),
		snapshot: internalcache.NewEmptySnapshot(),
		state:    newState(snap),
	}
	// kube-scheduler's framework and plugins log what they find; below
	// rebalancer's own lines.
	libCtx := klog.NewContext(ctx, liblog.Quiet(logger))
	registry, err := registry(func(ctx context.Context, obj k8sruntime.Object, h fwk.Handle) (fwk.Plugin, error) {
		p, err := rebalancehint.NewWithClock(ctx, obj, h, set.clock)
		if err == nil {
			s.hints = p
		}
		return p, err
	})
	if err != nil {
		return nil, err
	}
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
	if utilfeature.DefaultFeatureGate.Enabled(features.DynamicResourceAllocation) {
		// Without a DRA manager the DynamicResources PreFilter panics.
		claims := assumecache.NewAssumeCache(logger, factory.Resource().V1().ResourceClaims().Informer(), "ResourceClaim", "", nil)
		slices, err := tracker.StartTracker(libCtx, tracker.Options{SliceInformer: factory.Resource().V1().ResourceSlices(), KubeClient: client})
		if err != nil {
			return nil, fmt.Errorf("starting the resource slice tracker: %w", err)
		}
		fopts = append(fopts, frameworkruntime.WithSharedDRAManager(dynamicresources.NewDRAManager(libCtx, claims, slices, factory)))
	}
	// Score every feasible node, as rebalancer-scheduler's shipped profiles
	// do, so the prediction does not depend on sampling.
	p := profile.DeepCopy()
	p.PercentageOfNodesToScore = ptrTo[int32](100)
	if s.framework, err = frameworkruntime.NewFramework(libCtx, registry, p, fopts...); err != nil {
		return nil, fmt.Errorf("building scheduler profile %q: %w", p.SchedulerName, err)
	}
	factory.Start(ctx.Done())
	for typ, ok := range factory.WaitForCacheSync(ctx.Done()) {
		if !ok {
			return nil, fmt.Errorf("informer for %v did not sync", typ)
		}
	}

	for _, n := range snap.Nodes {
		s.cache.AddNode(logger, n)
	}
	for _, pod := range snap.Pods {
		if err := s.admit(pod); err != nil {
			return nil, err
		}
	}
	if err := s.sync(); err != nil {
		return nil, err
	}
	return s, nil
}

// Profile is the scheduler profile the simulator runs.
func (s *Simulator) Profile() *config.KubeSchedulerProfile { return s.profile }

// initMetrics creates kube-scheduler's metric objects, which the framework
// needs, without registering them: unregistered metrics are no-ops, so the
// simulation neither pays for per-plugin counters in its hot loop nor shows
// its own plugin runs as a scheduler's on rebalancer's /metrics.
var initMetrics sync.Once

func ptrTo[T any](v T) *T { return &v }

// Options narrow one prediction.
type Options struct {
	// Exclude rules nodes out as targets after the filters ran (e.g. nodes
	// being drained). It is not asked about the source.
	Exclude func(node string) bool
	// LeaveSource rules the source node out as a target: the pod must go.
	LeaveSource bool
}

// Predict runs one scheduling cycle for the pod as its replacement would
// see the cluster: the pod is taken off its node first, and put back after.
// Ties between the best nodes go to the source node (a move must be strictly
// better), then to the node name, so predictions are repeatable.
func (s *Simulator) Predict(ctx context.Context, pod *v1.Pod, opts Options) (Prediction, error) {
	pred := Prediction{Source: pod.Spec.NodeName}
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

	scores, diag, _, err := s.schedule(ctx, candidate)
	if err != nil {
		return pred, err
	}
	for _, ns := range scores {
		if ns.Name == pred.Source {
			pred.SourceFeasible, pred.SourceScore = true, ns.TotalScore
		}
	}
	best := -1
	for i, ns := range scores {
		if ns.Name == pred.Source && opts.LeaveSource {
			continue
		}
		if opts.Exclude != nil && ns.Name != pred.Source && opts.Exclude(ns.Name) {
			continue
		}
		pred.Feasible++
		if best < 0 || better(ns, scores[best], pred.Source) {
			best = i
		}
	}
	if best < 0 {
		pred.Unschedulable = diag
		return pred, nil
	}
	pred.Node, pred.Score = scores[best].Name, scores[best].TotalScore
	return pred, nil
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

// schedule mirrors kube-scheduler's schedulePod: PreFilter, Filter over the
// nodes PreFilter allows, then PreScore and Score (with normalization) over
// the feasible nodes. It returns every feasible node's total score, or why
// none was feasible.
func (s *Simulator) schedule(ctx context.Context, pod *v1.Pod) ([]fwk.NodePluginScores, string, *framework.CycleState, error) {
	state := framework.NewCycleState()
	all, err := s.snapshot.NodeInfos().List()
	if err != nil {
		return nil, "", nil, err
	}
	if len(all) == 0 {
		return nil, "no nodes", nil, nil
	}
	preRes, status, _ := s.framework.RunPreFilterPlugins(ctx, state, pod)
	if !status.IsSuccess() {
		if !status.IsRejected() {
			return nil, "", nil, status.AsError()
		}
		return nil, status.Message(), nil, nil
	}
	nodes := all
	if !preRes.AllNodes() {
		nodes = make([]fwk.NodeInfo, 0, len(preRes.NodeNames))
		for name := range preRes.NodeNames {
			if ni, err := s.snapshot.NodeInfos().Get(name); err == nil {
				nodes = append(nodes, ni)
			}
		}
	}

	feasible := make([]fwk.NodeInfo, len(nodes))
	reasons := make([]string, len(nodes))
	var firstErr error
	var errOnce sync.Once
	s.framework.Parallelizer().Until(ctx, len(nodes), func(i int) {
		st := s.framework.RunFilterPlugins(ctx, state, pod, nodes[i])
		switch {
		case st.IsSuccess():
			feasible[i] = nodes[i]
		case st.IsRejected():
			reasons[i] = st.Message()
		default:
			errOnce.Do(func() { firstErr = st.AsError() })
		}
	}, "Filter")
	if firstErr != nil {
		return nil, "", nil, firstErr
	}
	fit := feasible[:0]
	for _, ni := range feasible {
		if ni != nil {
			fit = append(fit, ni)
		}
	}
	if len(fit) == 0 {
		return nil, summarize(reasons, len(nodes)), nil, nil
	}
	if !s.framework.HasScorePlugins() {
		out := make([]fwk.NodePluginScores, len(fit))
		for i, ni := range fit {
			out[i] = fwk.NodePluginScores{Name: ni.Node().Name, TotalScore: 1}
		}
		return out, "", state, nil
	}
	if st := s.framework.RunPreScorePlugins(ctx, state, pod, fit); !st.IsSuccess() {
		return nil, "", nil, st.AsError()
	}
	scores, st := s.framework.RunScorePlugins(ctx, state, pod, fit)
	if !st.IsSuccess() {
		return nil, "", nil, st.AsError()
	}
	return scores, "", state, nil
}

// summarize counts the filter rejections, as kube-scheduler's FitError does:
// "0/5 nodes are available: 3 Insufficient cpu, 2 node(s) had untolerated taint".
func summarize(reasons []string, total int) string {
	counts := map[string]int{}
	for _, r := range reasons {
		if r != "" {
			counts[r]++
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

// ScoreWeights returns the weight of every Score plugin of the profile, as
// the framework resolved them from the configuration and its defaults.
func (s *Simulator) ScoreWeights() map[string]int32 {
	out := map[string]int32{}
	for _, p := range s.framework.ListPlugins().Score.Enabled {
		out[p.Name] = p.Weight
	}
	return out
}

// Nodes returns every node of the simulation.
func (s *Simulator) Nodes() ([]fwk.NodeInfo, error) {
	return s.snapshot.NodeInfos().List()
}
