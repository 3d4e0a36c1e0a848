// Package rebalancehint is the RebalanceHint Score plugin of
// rebalancer-scheduler. When a pod that the rebalancer annotated with a hint
// (package hint) leaves, the plugin remembers its owner; the owner's next pod
// scores the planned target node highest and the node it was evicted from
// lowest, so the replacement lands where the planner simulated it. Every other
// pod skips the plugin, and Filter plugins still decide feasibility: a target
// that no longer fits is never chosen.
package rebalancehint

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	"k8s.io/utils/clock"

	"github.com/rebalancer-dev/rebalancer/pkg/hint"
	"github.com/rebalancer-dev/rebalancer/pkg/requests"
)

// Name is the plugin's name in a KubeSchedulerConfiguration.
const Name = "RebalanceHint"

// score maps a hint's rank onto the framework's range: the target wins (100),
// the source loses (0), every other node sits between (50) so that the
// profile's own scoring orders them.
func score(r hint.Rank) int64 {
	return fwk.MinScore + int64(r)*(fwk.MaxScore-fwk.MinScore)/int64(hint.Prefer)
}

// Lead is the least by which the plugin's score of a hinted target exceeds
// its score of any other node.
func Lead() int64 { return score(hint.Prefer) - score(hint.Neutral) }

// Target is the node the plugin's Score ranks first for pod: the target of
// the hint its owner's next replacement takes, as PreScore finds it; ""
// when the pod has none.
func (pl *Plugin) Target(pod *v1.Pod) string {
	owner, ok := hint.OwnerKey(pod)
	if !ok {
		return ""
	}
	e, ok := pl.book.Next(owner)
	if !ok {
		return ""
	}
	return e.Target
}

const stateKey fwk.StateKey = Name

// Plugin implements PreFilter, Filter, PreScore, Score and Reserve.
type Plugin struct {
	book *hint.Book
	// arrivals: a cycle first waits for the plugin's pod handler to catch
	// up with its pod; nil in a simulation, which feeds the book itself.
	arrivals *hint.Arrivals
	// nodes is the scheduling cycle's snapshot of the nodes.
	nodes fwk.SharedLister
}

var (
	_ fwk.PreFilterPlugin = &Plugin{}
	_ fwk.FilterPlugin    = &Plugin{}
	_ fwk.PreScorePlugin  = &Plugin{}
	_ fwk.ScorePlugin     = &Plugin{}
	_ fwk.ReservePlugin   = &Plugin{}
	_ fwk.SignPlugin      = &Plugin{}
)

// New builds the plugin and subscribes it to pod events through the
// framework's informer factory.
func New(ctx context.Context, obj runtime.Object, h fwk.Handle) (fwk.Plugin, error) {
	registerMetrics.Do(func() { legacyregistry.MustRegister(hintsRecorded, hintsConsumed) })
	return newPlugin(ctx, obj, h, clock.RealClock{}, hint.NewArrivals(hint.ArrivalWait))
}

// Metrics on rebalancer-scheduler's /metrics (kube-scheduler's registry).
// The simulator builds the plugin with NewWithClock and registers nothing.
var (
	registerMetrics sync.Once
	hintsRecorded   = metrics.NewCounter(&metrics.CounterOpts{
		Namespace: "rebalancer", Subsystem: "scheduler", Name: "hints_recorded_total",
		Help: "Rebalance hints recorded from pods being evicted or seen leaving.", StabilityLevel: metrics.ALPHA,
	})
	hintsConsumed = metrics.NewCounter(&metrics.CounterOpts{
		Namespace: "rebalancer", Subsystem: "scheduler", Name: "hints_consumed_total",
		Help: "Rebalance hints consumed: a replacement was reserved a node with one (a binding that fails gives it back; its retry counts again).", StabilityLevel: metrics.ALPHA,
	})
)

// NewWithClock is New with the clock hints are aged by, for the simulator,
// which passes a simulated one and calls PodLeaving itself: its cycles do
// not wait for the pod informer.
func NewWithClock(ctx context.Context, obj runtime.Object, h fwk.Handle, c clock.PassiveClock) (*Plugin, error) {
	return newPlugin(ctx, obj, h, c, nil)
}

func newPlugin(ctx context.Context, obj runtime.Object, h fwk.Handle, c clock.PassiveClock, arrivals *hint.Arrivals) (*Plugin, error) {
	args, err := argsCodec.Decode(obj)
	if err != nil {
		return nil, err
	}
	logger := klog.FromContext(ctx).WithName(Name)
	if h == nil || h.SharedInformerFactory() == nil {
		return nil, fmt.Errorf("%s: the framework handle has no informer factory", Name)
	}
	pl := &Plugin{book: hint.NewBook(c, args.HintTTL.Duration), arrivals: arrivals, nodes: h.SnapshotSharedLister()}
	_, err = h.SharedInformerFactory().Core().V1().Pods().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		// A sticky Deployment's pods are followed from their bind, and a
		// new ReplicaSet's first pod records the nodes of the old ones
		// still running (hint.Book.Added): a rolling update creates new
		// pods before the old ones leave.
		AddFunc: func(obj any) {
			if pod, ok := obj.(*v1.Pod); ok {
				if n := pl.book.Added(logger, pod); n > 0 {
					hintsRecorded.Add(float64(n))
				}
				pl.arrivals.Seen(pod)
			}
		},
		// The hint is recorded when the executor writes it, before the
		// eviction; a pod with a grace period is marked for deletion next,
		// and its owner creates the replacement right then, before the
		// delete event (hint.Book.Updated).
		UpdateFunc: func(oldObj, newObj any) {
			oldPod, ok1 := oldObj.(*v1.Pod)
			newPod, ok2 := newObj.(*v1.Pod)
			if !ok1 || !ok2 {
				return
			}
			if pl.book.Updated(logger, oldPod, newPod) {
				hintsRecorded.Inc()
			}
			pl.arrivals.Seen(newPod)
		},
		DeleteFunc: func(obj any) {
			if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = t.Obj
			}
			if pod, ok := obj.(*v1.Pod); ok {
				pl.PodLeaving(logger, pod)
				pl.arrivals.Gone(pod)
			}
		},
	})
	if err != nil {
		return nil, fmt.Errorf("%s: watching pods: %w", Name, err)
	}
	return pl, nil
}

// PodLeaving records the hint of a pod that is going away. The pod informer
// calls it; rebalancer's simulator calls it directly when it replays an
// eviction, so simulated replacements are steered exactly as real ones.
func (pl *Plugin) PodLeaving(logger klog.Logger, pod *v1.Pod) {
	if pl.book.Leaving(logger, pod) {
		hintsRecorded.Inc()
	}
}

// catchUp waits, once per pod and briefly, for the plugin's pod handler to
// see the pod being scheduled, so that the book knows every hint and sticky
// node recorded before the pod was created (hint.Arrivals).
func (pl *Plugin) catchUp(ctx context.Context, pod *v1.Pod) {
	if !pl.arrivals.Await(ctx, pod) && ctx.Err() == nil {
		klog.FromContext(ctx).V(2).Info("Scheduling a pod the pod watch has not delivered yet: hints recorded just before it may be missed",
			"pod", klog.KObj(pod), "waited", hint.ArrivalWait)
	}
}

// Checkpoint copies the hints the plugin holds; Restore brings them back.
func (pl *Plugin) Checkpoint() hint.Checkpoint { return pl.book.Checkpoint() }

// Restore replaces the hints the plugin holds with a checkpoint's.
func (pl *Plugin) Restore(c hint.Checkpoint) { pl.book.Restore(c) }

// Name returns the plugin name.
func (pl *Plugin) Name() string { return Name }

const heldKey fwk.StateKey = Name + "/held"

// FilteredKey marks a cycle that filters only the nodes it names
// (Filtered): PreFilter then collects the room promised on those alone.
// rebalancer's simulator sets it for a replacement it places by filtering
// its hinted target alone; kube-scheduler never does.
const FilteredKey fwk.StateKey = Name + "/filtered"

// Filtered are the only nodes a cycle filters.
type Filtered []string

func (f Filtered) Clone() fwk.StateData { return f } // read only

// held is the room promised on nodes to hinted replacements other than the
// pod being scheduled, and that pod's requests, from PreFilter to Filter.
// Nodes are keyed by their object in the cycle's snapshot, which the
// NodeInfos Filter is given share (copies too): Filter runs for every node
// and must not read each one's name.
type held struct {
	promised map[*v1.Node]hint.Room
	pod      *framework.Resource
}

func (h *held) Clone() fwk.StateData { return h } // read only

// PreFilter collects the room promised to hinted replacements: between an
// eviction and the bind of its replacement, another pending pod could take
// the target's room and push the replacement elsewhere (or back onto the
// node being emptied). A pod's own hint promises it nothing to hold from
// itself. With no promise, Filter is skipped.
func (pl *Plugin) PreFilter(ctx context.Context, state fwk.CycleState, pod *v1.Pod, _ []fwk.NodeInfo) (*fwk.PreFilterResult, *fwk.Status) {
	pl.catchUp(ctx, pod)
	owner, _ := hint.OwnerKey(pod)
	var own types.UID
	if owner != "" {
		if e, ok := pl.book.Next(owner); ok && !e.Sticky {
			own = e.Pod
		}
	}
	h := &held{}
	noNodes := false
	collect := func(name string, r hint.Room) {
		if pl.nodes == nil {
			noNodes = true
			return
		}
		if h.pod == nil {
			h.pod = framework.NewResource(requests.Of(pod))
		}
		ni, err := pl.nodes.NodeInfos().Get(name)
		if err != nil || ni.Node() == nil {
			return // the target is gone: nothing to hold there
		}
		if h.short(r, ni) != nil {
			if h.promised == nil {
				h.promised = map[*v1.Node]hint.Room{}
			}
			h.promised[ni.Node()] = hint.Room{Requests: maps.Clone(r.Requests), Pods: r.Pods}
		}
	}
	if only, err := state.Read(FilteredKey); err == nil {
		pl.book.PromisedOn(owner, own, only.(Filtered), collect)
	} else {
		pl.book.Promised(owner, own, collect)
	}
	if noNodes {
		return nil, fwk.AsStatus(fmt.Errorf("%s: the framework handle has no snapshot of the nodes", Name))
	}
	if len(h.promised) == 0 {
		// The pod fits beside every promise: Filter, which would run for
		// every node, has nothing to refuse.
		return nil, fwk.NewStatus(fwk.Skip)
	}
	state.Write(heldKey, h)
	return nil, nil
}

// PreFilterExtensions: the promises do not depend on other pods.
func (pl *Plugin) PreFilterExtensions() fwk.PreFilterExtensions { return nil }

// Filter refuses a node whose room, less what is promised to hinted
// replacements, no longer fits the pod: in each resource the pod asks for,
// and in pod slots.
func (pl *Plugin) Filter(_ context.Context, state fwk.CycleState, _ *v1.Pod, nodeInfo fwk.NodeInfo) *fwk.Status {
	d, err := state.Read(heldKey)
	if err != nil {
		return nil
	}
	h := d.(*held)
	p, ok := h.promised[nodeInfo.Node()]
	if !ok {
		return nil
	}
	what := h.short(p, nodeInfo)
	if what == nil {
		return nil
	}
	return fwk.NewStatus(fwk.Unschedulable, fmt.Sprintf("%s held for %d rebalanced replacement(s) to come", strings.Join(what, ", "), p.Pods))
}

// short lists what the node lacks for the pod once p is kept: each
// resource the pod asks for, and pod slots; nil when it fits.
func (h *held) short(p hint.Room, nodeInfo fwk.NodeInfo) []string {
	alloc, used := nodeInfo.GetAllocatable(), nodeInfo.GetRequested()
	over := func(ask, promised, requested, allocatable int64) bool {
		return ask > 0 && requested+promised+ask > allocatable
	}
	var what []string
	if len(nodeInfo.GetPods())+p.Pods+1 > alloc.GetAllowedPodNumber() {
		what = append(what, string(v1.ResourcePods))
	}
	if over(h.pod.MilliCPU, p.Requests[v1.ResourceCPU], used.GetMilliCPU(), alloc.GetMilliCPU()) {
		what = append(what, string(v1.ResourceCPU))
	}
	if over(h.pod.Memory, p.Requests[v1.ResourceMemory], used.GetMemory(), alloc.GetMemory()) {
		what = append(what, string(v1.ResourceMemory))
	}
	if over(h.pod.EphemeralStorage, p.Requests[v1.ResourceEphemeralStorage], used.GetEphemeralStorage(), alloc.GetEphemeralStorage()) {
		what = append(what, string(v1.ResourceEphemeralStorage))
	}
	for name, ask := range h.pod.ScalarResources {
		if over(ask, p.Requests[name], used.GetScalarResources()[name], alloc.GetScalarResources()[name]) {
			what = append(what, string(name))
		}
	}
	slices.Sort(what)
	return what
}

// cycleState carries the hint a pod is being scheduled with, from PreScore to Reserve.
type cycleState struct {
	owner    types.UID // hint.OwnerKey
	entry    hint.Entry
	reserved bool
	// consumed is the entry Reserve consumed (hint.Book.Take), for
	// Unreserve to give back.
	consumed types.UID
}

func (s *cycleState) Clone() fwk.StateData { c := *s; return &c }

// PreScore looks up a hint for the pod's owner; without one the plugin skips
// Score, leaving the pod to the profile's own scoring. Of its owner's sticky
// nodes it takes the oldest the pod passed the filters on: in a rolling
// update an old pod may still hold the node it was recorded for, while
// another old pod's node has room.
func (pl *Plugin) PreScore(ctx context.Context, state fwk.CycleState, pod *v1.Pod, nodes []fwk.NodeInfo) *fwk.Status {
	pl.catchUp(ctx, pod)
	owner, ok := hint.OwnerKey(pod)
	if !ok {
		return fwk.NewStatus(fwk.Skip)
	}
	var feasible map[string]bool
	e, ok := pl.book.NextOn(owner, func(node string) bool {
		if feasible == nil {
			feasible = make(map[string]bool, len(nodes))
			for _, ni := range nodes {
				if n := ni.Node(); n != nil {
					feasible[n.Name] = true
				}
			}
		}
		return feasible[node]
	})
	if !ok {
		return fwk.NewStatus(fwk.Skip)
	}
	state.Write(stateKey, &cycleState{owner: owner, entry: e})
	return nil
}

// Score ranks the hinted target first and the hinted source last.
func (pl *Plugin) Score(_ context.Context, state fwk.CycleState, _ *v1.Pod, nodeInfo fwk.NodeInfo) (int64, *fwk.Status) {
	s, err := readState(state)
	if err != nil {
		return 0, fwk.AsStatus(err)
	}
	return score(s.entry.RankOf(nodeInfo.Node().Name)), nil
}

// ScoreExtensions: scores are already in [MinScore, MaxScore].
func (pl *Plugin) ScoreExtensions() fwk.ScoreExtensions { return nil }

// Reserve consumes the hint once the pod has a node, wherever it went: the
// owner's next replacement takes the next hint. A pod placed without
// scoring (kube-scheduler skips PreScore and Score when one node is
// feasible) takes its owner's next hint all the same: left unconsumed, it
// would steer a later pod and hold room for a replacement already placed.
// A sticky pod placed off its entry's node takes the entry of the node it
// got, if its owner has one, and leaves a rolling update's entry whose old
// pod still runs to the next new pod (hint.Book.Take).
func (pl *Plugin) Reserve(ctx context.Context, state fwk.CycleState, pod *v1.Pod, nodeName string) *fwk.Status {
	s, err := readState(state)
	if err != nil {
		pl.catchUp(ctx, pod)
		owner, ok := hint.OwnerKey(pod)
		if !ok {
			return nil
		}
		e, ok := pl.book.Next(owner)
		if !ok {
			return nil // no hint for its owner
		}
		s = &cycleState{owner: owner, entry: e}
		state.Write(stateKey, s)
	}
	consumed, ok := pl.book.Take(s.owner, s.entry.Pod, nodeName)
	if !ok {
		return nil
	}
	s.consumed, s.reserved = consumed, true
	hintsConsumed.Inc()
	return nil
}

// Unreserve gives the hint back when the pod did not bind after all.
func (pl *Plugin) Unreserve(_ context.Context, state fwk.CycleState, _ *v1.Pod, _ string) {
	s, err := readState(state)
	if err != nil || !s.reserved {
		return
	}
	pl.book.SetConsumed(s.owner, s.consumed, false)
	s.reserved = false
}

// SignPod keeps batching on for pods this plugin scores neutrally and turns it
// off for a pod whose owner has a pending hint: two pods of that owner must
// not share one scoring result, since each consumes its own hint.
func (pl *Plugin) SignPod(ctx context.Context, pod *v1.Pod) ([]fwk.SignFragment, *fwk.Status) {
	pl.catchUp(ctx, pod)
	if owner, ok := hint.OwnerKey(pod); ok {
		if _, ok := pl.book.Next(owner); ok {
			return nil, fwk.NewStatus(fwk.Unschedulable, "pod has a pending rebalance hint")
		}
	}
	return nil, nil
}

func readState(state fwk.CycleState) (*cycleState, error) {
	d, err := state.Read(stateKey)
	if err != nil {
		return nil, err
	}
	s, ok := d.(*cycleState)
	if !ok {
		return nil, fmt.Errorf("%s: cycle state holds %T", Name, d)
	}
	return s, nil
}
