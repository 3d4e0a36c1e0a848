package live

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	v1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	resourcev1 "k8s.io/api/resource/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/rebalancer-dev/rebalancer/pkg/snapshot"
)

// Cluster keeps a snapshot.Snapshot of a cluster current through client-go informers:
// one initial list per kind, then WATCH. Used by `rebalancer plan --kubeconfig`
// (once) and by the long-lived daemon (every cycle), which thus reads the whole
// cluster once and then only receives changes, instead of listing every pod
// every cycle. (With client-go's WatchListClient feature, on by default, the
// initial list is itself a WATCH that streams the current objects first, where
// the API server supports it.)
//
// A Cluster runs once: Start it, take Snapshots, then cancel the ctx given to
// Start or call Stop. After a failed Start or a Stop, make a new Cluster.
type Cluster struct {
	client  kubernetes.Interface
	factory informers.SharedInformerFactory
	kinds   []kind // in the order of Snapshot's fields

	mu     sync.Mutex
	cancel context.CancelFunc // set by Start so that Stop can stop the informers

	synced atomic.Bool // Start saw every informer synced: Snapshot may read the caches
}

// kind is the informer of one kind of Snapshot.
type kind struct {
	name     string       // resource, e.g. "pods", for errors
	typ      reflect.Type // the informer's key in the factory, e.g. *v1.Pod
	informer cache.SharedIndexInformer
	fill     func(*snapshot.Snapshot) // sets the kind's field of a Snapshot from the informer's cache
}

// kindOf is the kind of the objects of type P that informer caches and
// list finds in a Snapshot.
func kindOf[P interface {
	metav1.Object
	runtime.Object
}](name string, informer cache.SharedIndexInformer, list func(*snapshot.Snapshot) *[]P) kind {
	return kind{
		name:     name,
		typ:      reflect.TypeFor[P](),
		informer: informer,
		fill: func(s *snapshot.Snapshot) {
			items := informer.GetStore().List()
			out := make([]P, 0, len(items))
			for _, o := range items {
				out = append(out, o.(P))
			}
			// The cache is a map: sort so that equal clusters give equal snapshots, and plans.
			slices.SortFunc(out, func(a, b P) int {
				return cmp.Or(cmp.Compare(a.GetNamespace(), b.GetNamespace()), cmp.Compare(a.GetName(), b.GetName()))
			})
			*list(s) = out
		},
	}
}

// NewCluster prepares informers for every kind of Snapshot (nodes, pods, PDBs policy/v1, namespaces,
// priorityclasses scheduling/v1, PVCs, PVs, storageclasses, csinodes; and, where the cluster
// serves resource.k8s.io/v1, the DRA kinds, see Start). Nothing is contacted yet.
//
// Pods are watched in all namespaces and in every phase: the simulation must
// account for every pod on a node, and it is the planner, not the source, that
// decides what to do with terminal ones.
func NewCluster(client kubernetes.Interface) *Cluster {
	// Resync 0: a resync only replays the cache to event handlers, and Cluster has none.
	factory := informers.NewSharedInformerFactoryWithOptions(client, 0, informers.WithTransform(stripManagedFields))
	core, storage := factory.Core().V1(), factory.Storage().V1()
	// Every informer is created here, before Start: the factory starts, and waits
	// for, only the informers that exist when Start calls it.
	return &Cluster{
		client:  client,
		factory: factory,
		kinds: []kind{
			kindOf("nodes", core.Nodes().Informer(), func(s *snapshot.Snapshot) *[]*v1.Node { return &s.Nodes }),
			kindOf("pods", core.Pods().Informer(), func(s *snapshot.Snapshot) *[]*v1.Pod { return &s.Pods }),
			kindOf("poddisruptionbudgets", factory.Policy().V1().PodDisruptionBudgets().Informer(),
				func(s *snapshot.Snapshot) *[]*policyv1.PodDisruptionBudget { return &s.PodDisruptionBudgets }),
			kindOf("namespaces", core.Namespaces().Informer(), func(s *snapshot.Snapshot) *[]*v1.Namespace { return &s.Namespaces }),
			kindOf("priorityclasses", factory.Scheduling().V1().PriorityClasses().Informer(),
				func(s *snapshot.Snapshot) *[]*schedulingv1.PriorityClass { return &s.PriorityClasses }),
			kindOf("persistentvolumeclaims", core.PersistentVolumeClaims().Informer(),
				func(s *snapshot.Snapshot) *[]*v1.PersistentVolumeClaim { return &s.PersistentVolumeClaims }),
			kindOf("persistentvolumes", core.PersistentVolumes().Informer(),
				func(s *snapshot.Snapshot) *[]*v1.PersistentVolume { return &s.PersistentVolumes }),
			kindOf("storageclasses", storage.StorageClasses().Informer(),
				func(s *snapshot.Snapshot) *[]*storagev1.StorageClass { return &s.StorageClasses }),
			kindOf("csinodes", storage.CSINodes().Informer(), func(s *snapshot.Snapshot) *[]*storagev1.CSINode { return &s.CSINodes }),
		},
	}
}

// stripManagedFields drops metadata.managedFields from every object before it
// is cached, as kube-scheduler does for its pods: the planner never reads them,
// and on a cluster of 150,000 pods they are a large share of the cache's memory.
// Informers let a transform change the object in place.
func stripManagedFields(obj any) (any, error) {
	if m, err := meta.Accessor(obj); err == nil {
		m.SetManagedFields(nil)
	}
	return obj, nil
}

// Start starts the informers and blocks until EVERY informer has synced, or ctx ends
// (then it returns an error naming the kinds that did not sync, e.g.
// "informers not synced: pods: context deadline exceeded").
// A snapshot must never be planned on a half-filled cache: upstream's one-shot dry-run
// evaluated an empty copy of the cluster because it planned before its informers had synced.
//
// ctx bounds both the wait and the informers' lifetime: they run until ctx ends
// or Stop is called, after which the caches no longer follow the cluster and
// Snapshot returns an error. So a ctx with a timeout meant only for the sync
// would stop the informers when it expires; to bound the sync alone, call Stop
// from a timer (time.AfterFunc), which makes a waiting Start return an error.
// Start may be called only once.
func (c *Cluster) Start(ctx context.Context) error {
	c.mu.Lock()
	if c.cancel != nil {
		c.mu.Unlock()
		return errors.New("Start called twice: a Cluster runs once")
	}
	ctx, cancel := context.WithCancel(ctx)
	c.cancel = cancel
	c.mu.Unlock()

	if err := c.addDRA(ctx); err != nil {
		cancel()
		return err
	}
	c.factory.StartWithContext(ctx)
	done := make(chan struct{})
	go c.progress(ctx, done)
	res := c.factory.WaitForCacheSyncWithContext(ctx)
	close(done)
	// Look up every kind rather than trust res.Err alone: an informer the factory
	// did not start (after Stop) is missing from res.Synced, and counts as not synced.
	var unsynced []string
	for _, k := range c.kinds {
		if !res.Synced[k.typ] {
			unsynced = append(unsynced, k.name)
		}
	}
	if len(unsynced) > 0 {
		cancel() // a Cluster whose Start failed is not used: leave nothing running
		return fmt.Errorf("informers not synced: %s: %w", strings.Join(unsynced, ", "),
			cmp.Or(res.Err, errors.New("the Cluster was stopped before Start")))
	}
	c.synced.Store(true)
	return nil
}

// addDRA adds the informers of Dynamic Resource Allocation's kinds when the
// cluster serves resource.k8s.io/v1 (Kubernetes 1.34 and later, unless
// turned off): without them a pod's device claims could not be simulated.
// A cluster that does not serve it has no such claims, and its snapshots
// carry none.
func (c *Cluster) addDRA(ctx context.Context) error {
	_, err := c.client.Discovery().ServerResourcesForGroupVersion(resourcev1.SchemeGroupVersion.String())
	switch {
	case apierrors.IsNotFound(err):
		klog.FromContext(ctx).V(2).Info("The cluster does not serve resource.k8s.io/v1: no DRA objects to read")
		return nil
	case err != nil:
		return fmt.Errorf("asking the cluster whether it serves %s: %w", resourcev1.SchemeGroupVersion, err)
	}
	dra := c.factory.Resource().V1()
	c.kinds = append(c.kinds,
		kindOf("resourceclaims", dra.ResourceClaims().Informer(),
			func(s *snapshot.Snapshot) *[]*resourcev1.ResourceClaim { return &s.ResourceClaims }),
		kindOf("resourceclaimtemplates", dra.ResourceClaimTemplates().Informer(),
			func(s *snapshot.Snapshot) *[]*resourcev1.ResourceClaimTemplate { return &s.ResourceClaimTemplates }),
		kindOf("resourceslices", dra.ResourceSlices().Informer(),
			func(s *snapshot.Snapshot) *[]*resourcev1.ResourceSlice { return &s.ResourceSlices }),
		kindOf("deviceclasses", dra.DeviceClasses().Informer(),
			func(s *snapshot.Snapshot) *[]*resourcev1.DeviceClass { return &s.DeviceClasses }),
	)
	return nil
}

// progressEvery is how often a sync that takes a while says how far it got.
var progressEvery = 5 * time.Second

// progress logs, while Start waits, which kinds are still being read and
// how many objects have arrived, so a large cluster's first sync is not
// minutes of silence.
func (c *Cluster) progress(ctx context.Context, done <-chan struct{}) {
	t := time.NewTicker(progressEvery)
	defer t.Stop()
	logger := klog.FromContext(ctx)
	for {
		select {
		case <-done:
			return
		case <-ctx.Done():
			return
		case <-t.C:
		}
		var waiting []string
		objects := 0
		for _, k := range c.kinds {
			objects += len(k.informer.GetStore().ListKeys())
			if !k.informer.HasSynced() {
				waiting = append(waiting, k.name)
			}
		}
		logger.Info("Reading the cluster", "waitingFor", waiting, "objectsSoFar", objects)
	}
}

// Stop stops the informers and waits until their goroutines have returned.
// Cancelling the ctx given to Start stops them too, without waiting; Stop is for
// callers that must not leave goroutines behind (a one-shot plan, tests).
// Stop may be called before Start, and more than once.
func (c *Cluster) Stop() {
	c.mu.Lock()
	if c.cancel != nil {
		c.cancel()
	}
	c.mu.Unlock()
	// Shutdown waits for the informers' goroutines, which return once their ctx is done.
	c.factory.Shutdown()
}

// Snapshot returns the current state, in a deterministic order (nodes and other
// cluster-scoped objects by name; namespaced objects by namespace/name).
//
// The objects are the informers' cached pointers, shared with the caches and
// with every other Snapshot: callers must not mutate them, and must DeepCopy an
// object to change it. Each kind is read from its own cache, so kinds may be a
// few watch events apart from one another.
//
// Pods bound to a node the node cache does not have (a race between the pod and
// node watches) are left out and counted in podsOnUnknownNodes, not an error;
// pods not bound to any node are kept. Returns an error if Start has not
// completed, if the informers have stopped, if there are no nodes, or if a
// device is allocated to two ResourceClaims that may not share it
// (snapshot.Snapshot.CheckDevices).
func (c *Cluster) Snapshot() (snap *snapshot.Snapshot, podsOnUnknownNodes int, err error) {
	if !c.synced.Load() {
		return nil, 0, errors.New("informers not synced: Start has not completed")
	}
	for _, k := range c.kinds {
		if k.informer.IsStopped() {
			return nil, 0, errors.New("informers stopped: the cluster is no longer watched")
		}
	}
	s := &snapshot.Snapshot{Ignored: map[string]int{}} // only kinds the planner uses are watched
	for _, k := range c.kinds {
		k.fill(s)
	}
	if len(s.Nodes) == 0 {
		return nil, 0, errors.New("no nodes in the cluster")
	}
	// A device allocated to two claims at once: a plan would count one
	// device for two pods. A snapshot file with it is refused the same way.
	if err := s.CheckDevices(); err != nil {
		return nil, 0, fmt.Errorf("the cluster's device allocations cannot be: %w", err)
	}
	nodes := make(map[string]bool, len(s.Nodes))
	for _, n := range s.Nodes {
		nodes[n.Name] = true
	}
	s.Pods = slices.DeleteFunc(s.Pods, func(p *v1.Pod) bool {
		if p.Spec.NodeName == "" || nodes[p.Spec.NodeName] {
			return false
		}
		podsOnUnknownNodes++
		return true
	})
	return s, podsOnUnknownNodes, nil
}

// Current is Snapshot, the pods it leaves out logged.
func (c *Cluster) Current(ctx context.Context) (*snapshot.Snapshot, error) {
	snap, unknown, err := c.Snapshot()
	if unknown > 0 {
		klog.FromContext(ctx).Info("Left out pods bound to nodes not seen yet", "pods", unknown)
	}
	return snap, err
}

// syncTimeout bounds the wait for the first full view of the cluster.
const syncTimeout = 2 * time.Minute

// Capture reads the cluster once: it waits for every informer to sync,
// then takes one snapshot, so a plan never starts on a half-filled cache.
func Capture(ctx context.Context, client kubernetes.Interface) (*snapshot.Snapshot, error) {
	c := NewCluster(client)
	defer c.Stop()
	timer := time.AfterFunc(syncTimeout, c.Stop)
	err := c.Start(ctx)
	timer.Stop()
	if err != nil {
		return nil, fmt.Errorf("reading the cluster: %w", err)
	}
	return c.Current(ctx)
}
