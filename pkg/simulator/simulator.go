// Package simulator runs a kube-scheduler profile in memory over a cluster
// snapshot: the same in-tree plugins, arguments and weights that
// rebalancer-scheduler runs, on kube-scheduler's own cache and snapshot. It
// answers "if this pod were recreated now, which node would it get?", and it
// applies accepted moves incrementally, so later questions see them.
package simulator

import (
	"context"
	"fmt"
	"runtime"
	"sort"
	"sync"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
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

// Simulator holds one scheduler profile and the cluster state it schedules on.
// It is not safe for concurrent use.
type Simulator struct {
	logger    klog.Logger
	framework framework.Framework
	cache     internalcache.Cache
	snapshot  *internalcache.Snapshot
	// pods are the objects in the cache, by UID: the cache must be handed
	// back exactly what it was given.
	pods map[types.UID]*v1.Pod
	// replacements counts simulated replacement pods, for unique names.
	replacements int
	// hints is the profile's RebalanceHint plugin, nil when the profile
	// does not enable it.
	hints *rebalancehint.Plugin
}

// New builds the profile's framework with the plugins of rebalancer-scheduler
// and loads the snapshot into kube-scheduler's cache. Pods bound to a node
// are placed; pending pods are left out (they are nobody's move).
func New(ctx context.Context, profile *config.KubeSchedulerProfile, snap *snapshot.Snapshot) (*Simulator, error) {
	logger := klog.FromContext(ctx).WithName("simulator")
	initMetrics.Do(metrics.InitMetrics)

	s := &Simulator{
		logger:   logger,
		cache:    internalcache.New(ctx, nil, false),
		snapshot: internalcache.NewEmptySnapshot(),
		pods:     map[types.UID]*v1.Pod{},
	}
	registry, err := registry(func(ctx context.Context, obj k8sruntime.Object, h fwk.Handle) (fwk.Plugin, error) {
		p, err := rebalancehint.New(ctx, obj, h)
		if err == nil {
			s.hints = p.(*rebalancehint.Plugin)
		}
		return p, err
	})
	if err != nil {
		return nil, err
	}
	// Plugins read volumes, namespaces, CSI nodes and DRA objects through
	// informers; a fake clientset seeded with the snapshot serves them.
	// Pods and nodes are not seeded: plugins see those through the snapshot.
	var objs []k8sruntime.Object
	for _, o := range snap.Namespaces {
		objs = append(objs, o)
	}
	for _, o := range snap.PersistentVolumeClaims {
		objs = append(objs, o)
	}
	for _, o := range snap.PersistentVolumes {
		objs = append(objs, o)
	}
	for _, o := range snap.StorageClasses {
		objs = append(objs, o)
	}
	for _, o := range snap.CSINodes {
		objs = append(objs, o)
	}
	client := fake.NewClientset(objs...)
	factory := informers.NewSharedInformerFactory(client, 0)

	opts := []frameworkruntime.Option{
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
		slices, err := tracker.StartTracker(ctx, tracker.Options{SliceInformer: factory.Resource().V1().ResourceSlices(), KubeClient: client})
		if err != nil {
			return nil, fmt.Errorf("starting the resource slice tracker: %w", err)
		}
		opts = append(opts, frameworkruntime.WithSharedDRAManager(dynamicresources.NewDRAManager(ctx, claims, slices, factory)))
	}
	// Score every feasible node, as rebalancer-scheduler's shipped profiles
	// do, so the prediction does not depend on sampling.
	p := profile.DeepCopy()
	p.PercentageOfNodesToScore = ptrTo[int32](100)
	if s.framework, err = frameworkruntime.NewFramework(ctx, registry, p, opts...); err != nil {
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
		if pod.Spec.NodeName == "" || isTerminal(pod) {
			continue
		}
		if err := s.add(pod); err != nil {
			return nil, err
		}
	}
	if err := s.sync(); err != nil {
		return nil, err
	}
	return s, nil
}

// initMetrics creates kube-scheduler's metric objects, which the framework
// needs, without registering them: unregistered metrics are no-ops, so the
// simulation neither pays for per-plugin counters in its hot loop nor shows
// its own plugin runs as a scheduler's on rebalancer's /metrics.
var initMetrics sync.Once

func ptrTo[T any](v T) *T { return &v }

// NodeBound pods belong to their node: DaemonSet and mirror (static) pods
// run on every node anyway, are never moved, and do not keep a node in use.
func NodeBound(pod *v1.Pod) bool {
	if _, mirror := pod.Annotations[v1.MirrorPodAnnotationKey]; mirror {
		return true
	}
	owner := metav1.GetControllerOf(pod)
	return owner != nil && owner.Kind == "DaemonSet"
}

// isTerminal pods hold no resources on their node.
func isTerminal(pod *v1.Pod) bool {
	return pod.Status.Phase == v1.PodSucceeded || pod.Status.Phase == v1.PodFailed
}

func (s *Simulator) add(pod *v1.Pod) error {
	if pod.UID == "" {
		return fmt.Errorf("pod %s has no UID", klog.KObj(pod))
	}
	if _, dup := s.pods[pod.UID]; dup {
		return fmt.Errorf("pod %s: UID %s is already in the simulation", klog.KObj(pod), pod.UID)
	}
	if err := s.cache.AddPod(s.logger, pod); err != nil {
		return fmt.Errorf("adding pod %s to the simulation: %w", klog.KObj(pod), err)
	}
	s.pods[pod.UID] = pod
	return nil
}

func (s *Simulator) remove(pod *v1.Pod) error {
	cached, ok := s.pods[pod.UID]
	if !ok {
		return fmt.Errorf("pod %s (UID %s) is not in the simulation", klog.KObj(pod), pod.UID)
	}
	if err := s.cache.RemovePod(s.logger, cached); err != nil {
		return fmt.Errorf("removing pod %s from the simulation: %w", klog.KObj(pod), err)
	}
	delete(s.pods, pod.UID)
	return nil
}

// sync brings the snapshot up to date with the cache; only the nodes that
// changed since the last sync are copied.
func (s *Simulator) sync() error {
	return s.cache.UpdateSnapshot(s.logger, s.snapshot)
}

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
		cached, ok := s.pods[pod.UID]
		if !ok {
			return pred, fmt.Errorf("pod %s (UID %s) is not in the simulation", klog.KObj(pod), pod.UID)
		}
		if err := s.remove(cached); err != nil {
			return pred, err
		}
		defer func() {
			// Restoring what was just removed cannot fail unless the cache is broken.
			if err := s.add(cached); err != nil {
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

// Move applies an accepted move: the pod leaves its node and a replacement
// (a copy with a new UID) is bound to target. It returns the replacement.
func (s *Simulator) Move(pod *v1.Pod, target string) (*v1.Pod, error) {
	if _, err := s.snapshot.NodeInfos().Get(target); err != nil {
		return nil, fmt.Errorf("moving pod %s: target node %q is not in the simulation", klog.KObj(pod), target)
	}
	if err := s.remove(pod); err != nil {
		return nil, err
	}
	s.replacements++
	r := pod.DeepCopy()
	r.UID = types.UID(fmt.Sprintf("%s-r%d", pod.UID, s.replacements))
	r.Spec.NodeName = target
	r.Status = v1.PodStatus{Phase: v1.PodPending}
	if err := s.add(r); err != nil {
		return nil, err
	}
	return r, s.sync()
}

// Place schedules a pending pod as rebalancer-scheduler would and binds it:
// the best node by the profile's scores (ties to the node name), after the
// Reserve plugins ran there (RebalanceHint consumes the hint it followed).
// It returns the bound copy, or nil and the reason when no node fits.
func (s *Simulator) Place(ctx context.Context, pod *v1.Pod) (*v1.Pod, string, error) {
	if pod.Spec.NodeName != "" {
		return nil, "", fmt.Errorf("placing pod %s: it is already bound to %s", klog.KObj(pod), pod.Spec.NodeName)
	}
	scores, diag, state, err := s.schedule(ctx, pod)
	if err != nil {
		return nil, "", err
	}
	if len(scores) == 0 {
		return nil, diag, nil
	}
	best := 0
	for i := range scores {
		if better(scores[i], scores[best], "") {
			best = i
		}
	}
	node := scores[best].Name
	if st := s.framework.RunReservePluginsReserve(ctx, state, pod, node); !st.IsSuccess() {
		return nil, "", fmt.Errorf("reserving %s for pod %s: %w", node, klog.KObj(pod), st.AsError())
	}
	bound := pod.DeepCopy()
	bound.Spec.NodeName = node
	bound.Status = v1.PodStatus{Phase: v1.PodRunning}
	if err := s.add(bound); err != nil {
		return nil, "", err
	}
	return bound, "", s.sync()
}

// Leaving tells the profile's RebalanceHint plugin that a pod is going away,
// as rebalancer-scheduler's pod informer would, so that the replacement
// follows the hint the pod carries. It does not remove the pod.
func (s *Simulator) Leaving(pod *v1.Pod) {
	if s.hints != nil {
		s.hints.PodLeaving(s.logger, pod)
	}
}

// Revert undoes a Move: the replacement goes and the original pod is back
// on its node.
func (s *Simulator) Revert(original, replacement *v1.Pod) error {
	if err := s.remove(replacement); err != nil {
		return err
	}
	if err := s.add(original); err != nil {
		return err
	}
	return s.sync()
}

// Evict removes a pod without a replacement (its owner does not recreate it).
func (s *Simulator) Evict(pod *v1.Pod) error {
	if err := s.remove(pod); err != nil {
		return err
	}
	return s.sync()
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
