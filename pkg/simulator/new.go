package simulator

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/sets"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"
	"k8s.io/dynamic-resource-allocation/resourceslice/tracker"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/features"
	"k8s.io/kubernetes/pkg/scheduler/apis/config"
	internalcache "k8s.io/kubernetes/pkg/scheduler/backend/cache"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/dynamicresources"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/names"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/nodevolumelimits"
	frameworkruntime "k8s.io/kubernetes/pkg/scheduler/framework/runtime"
	"k8s.io/kubernetes/pkg/scheduler/metrics"
	"k8s.io/kubernetes/pkg/scheduler/util/assumecache"
	"k8s.io/utils/clock"

	"github.com/rebalancer-dev/rebalancer/internal/liblog"
	"github.com/rebalancer-dev/rebalancer/pkg/fakeapi"
	schedulerplugins "github.com/rebalancer-dev/rebalancer/pkg/scheduler"
	"github.com/rebalancer-dev/rebalancer/pkg/scheduler/loadaware"
	"github.com/rebalancer-dev/rebalancer/pkg/scheduler/rebalancehint"
	"github.com/rebalancer-dev/rebalancer/pkg/snapshot"
)

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
	factory, fopts, draSynced, err := s.frameworkOptions(libCtx, snap)
	if err != nil {
		return nil, err
	}
	if err := s.addSchedulers(libCtx, profiles, snap, set, fopts); err != nil {
		return nil, err
	}
	if err := waitForInformers(ctx, factory, draSynced); err != nil {
		return nil, err
	}
	if err := s.load(ctx, snap); err != nil {
		return nil, err
	}
	return s, nil
}

// frameworkOptions are the options every profile's framework is built
// with. Plugins read volumes, namespaces, CSI nodes and DRA objects through
// informers over the snapshot's other objects (factory's). Pods and nodes
// are not seeded: plugins see those through the scheduler's snapshot. With
// DRA on, it starts the simulation's DRA manager; draSynced are its caches
// fed by informer event handlers, synced only once their handlers have
// seen every object the informers list.
func (s *Simulator) frameworkOptions(ctx context.Context, snap *snapshot.Snapshot) (factory informers.SharedInformerFactory, fopts []frameworkruntime.Option, draSynced []cache.InformerSynced, err error) {
	others := *snap
	others.Pods, others.Nodes = nil, nil
	client, err := fakeapi.Clientset(&others)
	if err != nil {
		return nil, nil, nil, err
	}
	factory = informers.NewSharedInformerFactory(client, 0)

	fopts = []frameworkruntime.Option{
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
		claims := assumecache.NewAssumeCache(s.logger, factory.Resource().V1().ResourceClaims().Informer(), "ResourceClaim", "", nil)
		slices, err := tracker.StartTracker(ctx, tracker.Options{SliceInformer: factory.Resource().V1().ResourceSlices(), KubeClient: client})
		if err != nil {
			return nil, nil, nil, fmt.Errorf("starting the resource slice tracker: %w", err)
		}
		draSynced = append(draSynced, claims.AddEventHandler(cache.ResourceEventHandlerFuncs{}).HasSynced, slices.HasSynced)
		inner := dynamicresources.NewDRAManager(ctx, claims, slices, factory)
		s.dra = &draManager{SharedDRAManager: inner, claims: &claimsOverlay{
			inner:   inner.ResourceClaims(),
			log:     func(c claimChange) { s.log(change{claim: &c}) },
			changed: map[string]*resourceapi.ResourceClaim{},
		}}
		fopts = append(fopts, frameworkruntime.WithSharedDRAManager(s.dra))
	}
	return factory, fopts, draSynced, nil
}

// addSchedulers builds a scheduler for each profile, in configuration
// order, then points each extender-steered one at the scheduler whose
// scoring picks its targets (see WithExtenders).
func (s *Simulator) addSchedulers(ctx context.Context, profiles []*config.KubeSchedulerProfile, snap *snapshot.Snapshot, set settings, fopts []frameworkruntime.Option) error {
	held := heldRepositories(snap.Nodes)
	backed := draBacked(snap.DeviceClasses)
	s.draBacked = backed
	for _, prof := range profiles {
		if _, dup := s.schedulers[prof.SchedulerName]; dup {
			return fmt.Errorf("scheduler profile %q is given twice", prof.SchedulerName)
		}
		sc, err := s.newScheduler(ctx, prof, set, fopts, held, backed)
		if err != nil {
			return err
		}
		s.schedulers[prof.SchedulerName] = sc
		s.names = append(s.names, prof.SchedulerName)
	}
	for _, name := range s.names {
		if sc := s.schedulers[name]; sc.extender {
			sc.targets = s.hintFollower()
		}
	}
	return nil
}

// newScheduler builds prof's framework over the simulation's cache, and
// unless every node is to go through the framework (WithEveryNode), the
// runner and node classes that stand in for it.
func (s *Simulator) newScheduler(ctx context.Context, prof *config.KubeSchedulerProfile, set settings, fopts []frameworkruntime.Option, held sets.Set[string], backed func(v1.ResourceName) bool) (*scheduler, error) {
	sc := &scheduler{profile: prof}
	registry, err := s.registryFor(sc, set.clock)
	if err != nil {
		return nil, err
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
	if sc.framework, err = frameworkruntime.NewFramework(ctx, registry, p, fopts...); err != nil {
		return nil, fmt.Errorf("building scheduler profile %q: %w", p.SchedulerName, err)
	}
	sc.classes = !set.everyNode && alikeToProfile(p)
	if !set.everyNode {
		if sc.run, err = newRunner(sc.framework, built, p, held, backed); err != nil {
			return nil, fmt.Errorf("building scheduler profile %q: %w", p.SchedulerName, err)
		}
	}
	sc.readPlugins(extWeight)
	return sc, nil
}

// registryFor is the plugin registry of sc's framework: kube-scheduler's
// in-tree plugins and rebalancer's, RebalanceHint on the simulation's
// clock and LoadAware on its usage. The plugins sc calls itself
// (RebalanceHint, DynamicResources) are kept in sc as the framework builds
// them.
func (s *Simulator) registryFor(sc *scheduler, clk clock.PassiveClock) (frameworkruntime.Registry, error) {
	registry, err := schedulerplugins.All(func(ctx context.Context, obj k8sruntime.Object, h fwk.Handle) (fwk.Plugin, error) {
		p, err := rebalancehint.NewWithClock(ctx, obj, h, clk)
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
	return registry, nil
}

// readPlugins notes sc's Filter and Score plugins as its framework
// resolved them, and whether hints steer it and decide alone; extWeight is
// the part of RebalanceHint's weight that models the extender.
func (sc *scheduler) readPlugins(extWeight int64) {
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
}

// waitForInformers starts the informers and waits until they, and the
// caches their handlers feed (draSynced), have every object.
func waitForInformers(ctx context.Context, factory informers.SharedInformerFactory, draSynced []cache.InformerSynced) error {
	factory.Start(ctx.Done())
	for typ, ok := range factory.WaitForCacheSync(ctx.Done()) {
		if !ok {
			return fmt.Errorf("informer for %v did not sync", typ)
		}
	}
	if !cache.WaitForCacheSync(ctx.Done(), draSynced...) {
		return errors.New("the ResourceClaims and ResourceSlices of the simulation did not sync")
	}
	return nil
}

// load puts the snapshot's nodes and pods in the cache.
func (s *Simulator) load(ctx context.Context, snap *snapshot.Snapshot) error {
	// The only change to nodes in a simulation: after this, only their
	// pods change (the runner's memos count on it, see memo.go).
	for _, n := range snap.Nodes {
		s.cache.AddNode(s.logger, n)
	}
	for i, pod := range snap.Pods {
		if i%4096 == 0 && ctx.Err() != nil {
			return context.Cause(ctx) // 150,000 pods take seconds
		}
		if err := s.admit(pod); err != nil {
			return err
		}
	}
	return s.sync()
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

// initMetrics creates kube-scheduler's metric objects, which the framework
// needs, without registering them: unregistered metrics are no-ops, so the
// simulation neither pays for per-plugin counters in its hot loop nor shows
// its own plugin runs as a scheduler's on rebalancer's /metrics.
var initMetrics sync.Once

func ptrTo[T any](v T) *T { return &v }
