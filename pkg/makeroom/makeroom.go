// Package makeroom is the MakeRoom balance plugin: for a pod that has been
// unschedulable for a while although the cluster has room in total,
// scattered over nodes, it moves the fewest pods off one node so that the
// pod fits there, each moved pod re-placed elsewhere by its own scheduler
// (steered) in the same simulation. kube-scheduler preempts only by
// priority and autoscalers add nodes; MakeRoom moves running pods, of the
// pending pod's priority or lower, instead. The pending pod then fits only
// on the node made room on (it fit nowhere, and the moves only take room
// elsewhere), so kube-scheduler puts it there when it retries it. It runs
// only inside rebalancer's planner, which hands it the simulation.
package makeroom

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"sigs.k8s.io/descheduler/pkg/descheduler/evictions"
	frameworktypes "sigs.k8s.io/descheduler/pkg/framework/types"

	"github.com/rebalancer-dev/rebalancer/pkg/disruption"
	"github.com/rebalancer-dev/rebalancer/pkg/gang"
	"github.com/rebalancer-dev/rebalancer/pkg/plan"
	"github.com/rebalancer-dev/rebalancer/pkg/requests"
	"github.com/rebalancer-dev/rebalancer/pkg/simhandle"
	"github.com/rebalancer-dev/rebalancer/pkg/simulator"
)

// Name is the plugin's name in a DeschedulerPolicy.
const Name = "MakeRoom"

// maxTries bounds the nodes simulated for one pending pod (the candidates
// come cheapest first), and maxExamined times maxPodsPerCycle the pending
// pods one plan looks at: together they bound a plan's simulations when
// room can rarely be made.
const (
	maxTries    = 8
	maxExamined = 10
)

// MakeRoom is a descheduler BalancePlugin.
type MakeRoom struct {
	handle frameworktypes.Handle
	sim    simhandle.Handle
	args   *Args
	// stuck are the pods whose move the planner refused in this Balance:
	// they are not chosen again (rooms made since only take room away).
	stuck sets.Set[types.UID]
	// requests are the pods' requests in this Balance, by object (a pod
	// is not changed; a moved one is a new object): each pod is looked at
	// for every pending pod.
	requests map[*v1.Pod]v1.ResourceList
}

var _ frameworktypes.BalancePlugin = &MakeRoom{}

// New builds the plugin; the handle must come from rebalancer's planner.
func New(_ context.Context, obj runtime.Object, handle frameworktypes.Handle) (frameworktypes.Plugin, error) {
	args, ok := obj.(*Args)
	if !ok {
		return nil, fmt.Errorf("%s: want args of type %T, got %T", Name, args, obj)
	}
	sim, err := simhandle.From(Name, handle)
	if err != nil {
		return nil, err
	}
	return &MakeRoom{handle: handle, sim: sim, args: args}, nil
}

// Name returns the plugin name.
func (m *MakeRoom) Name() string { return Name }

// Balance makes room on the given nodes for the pods unschedulable longer
// than unschedulableFor, highest priority first, then longest waiting.
func (m *MakeRoom) Balance(ctx context.Context, nodes []*v1.Node) *frameworktypes.Status {
	logger := klog.FromContext(ctx).WithValues("plugin", Name)
	sim := m.sim.Simulator()
	m.stuck = sets.New[types.UID]()
	m.requests = map[*v1.Pod]v1.ResourceList{}
	waiting := m.waiting(sim)
	logger.V(2).Info("Pending pods room may be made for", "pods", len(waiting), "pending", len(sim.Pending()))
	allowed := sets.New[string]() // the policy's nodes
	for _, n := range nodes {
		allowed.Insert(n.Name)
	}
	placed := 0
	for i, pod := range waiting {
		if placed >= int(m.args.MaxPodsPerCycle) || i >= maxExamined*int(m.args.MaxPodsPerCycle) {
			break
		}
		ok, err := m.makeRoom(ctx, logger, pod, allowed)
		if err != nil {
			var total *evictions.EvictionTotalLimitError
			if errors.As(err, &total) {
				break // the plan is full
			}
			return &frameworktypes.Status{Err: err}
		}
		if ok {
			placed++
		}
	}
	return nil
}

// waiting lists the pending pods room may be made for, in the order it is
// made: unschedulable for long enough, not nominated to a node (a
// preemption is under way), highest priority first, then longest waiting.
func (m *MakeRoom) waiting(sim *simulator.Simulator) []*v1.Pod {
	now := sim.Now()
	var out []*v1.Pod
	for _, pod := range sim.Pending() {
		since, ok := UnschedulableSince(pod)
		if !ok || pod.Status.NominatedNodeName != "" || now.Sub(since) < m.args.UnschedulableFor.Duration {
			continue
		}
		out = append(out, pod)
	}
	slices.SortStableFunc(out, func(a, b *v1.Pod) int {
		ta, _ := UnschedulableSince(a)
		tb, _ := UnschedulableSince(b)
		return cmp.Or(cmp.Compare(corev1helpers.PodPriority(b), corev1helpers.PodPriority(a)), ta.Compare(tb),
			cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name))
	})
	return out
}

// candidate is a node and the pods whose moves would make room there.
type candidate struct {
	node string
	pods []*v1.Pod
	cost float64
}

// makeRoom plans the moves that make room for pod on the cheapest node
// where they all hold and the pod then fits, and places the pod there in
// the simulation, so later rooms and plugins see it. It records a skip for
// the pod when there is no such node.
func (m *MakeRoom) makeRoom(ctx context.Context, logger klog.Logger, pod *v1.Pod, allowed sets.Set[string]) (bool, error) {
	sim := m.sim.Simulator()
	// Only nodes the pod was refused by for what moving pods may resolve
	// (resources, not a taint or an affinity), and that the policy covers.
	fits, names, err := sim.Resolvable(ctx, pod)
	switch {
	case errors.Is(err, simulator.ErrUnknownScheduler):
		return false, nil // the planner warns about schedulers it does not model
	case err != nil:
		return false, err
	case fits:
		logger.V(3).Info("Pending pod fits without moves: its scheduler will place it", "pod", klog.KObj(pod))
		return false, nil
	}
	var resolvable []string
	for _, n := range names {
		if allowed.Has(n) {
			resolvable = append(resolvable, n)
		}
	}
	// The cheapest node first; after a try fails, the candidates again
	// without the pods the planner refused to move.
	tried := sets.New[string]()
	for tried.Len() < maxTries {
		cands, err := m.candidates(pod, resolvable, tried)
		if err != nil {
			return false, err
		}
		if len(cands) == 0 {
			break
		}
		c := cands[0]
		tried.Insert(c.node)
		ok, err := m.try(ctx, pod, c)
		if err != nil || ok {
			if ok {
				logger.V(2).Info("Room made for a pending pod", "pod", klog.KObj(pod), "node", c.node, "moves", len(c.pods))
			}
			return ok, err
		}
	}
	if tried.Len() == 0 {
		m.sim.Skip(pod, plan.ReasonNoRoom, fmt.Sprintf("no node has room for it after moving at most %d pods of priority %d or lower that may move (maxMovesPerPod)",
			m.args.MaxMovesPerPod, corev1helpers.PodPriority(pod)))
		return false, nil
	}
	m.sim.Skip(pod, plan.ReasonNoRoom, fmt.Sprintf("the moves that would make room for it on %s do not all hold (see their skips), a pod ahead of it in the scheduler's queue would take the room, or it still does not fit there",
		strings.Join(sets.List(tried), ", ")))
	return false, nil
}

// try moves c's pods, steered off c.node, and places pod; it keeps the
// moves and the placement only if every move holds and pod lands.
func (m *MakeRoom) try(ctx context.Context, pod *v1.Pod, c candidate) (bool, error) {
	tx := m.sim.Begin()
	eo := evictions.EvictOptions{StrategyName: Name, Reason: fmt.Sprintf("making room on %s for pending pod %s/%s", c.node, pod.Namespace, pod.Name)}
	for _, p := range c.pods {
		if err := m.sim.MoveFor(ctx, p, pod, eo); err != nil {
			m.stuck.Insert(p.UID)
			if rbErr := tx.Rollback(); rbErr != nil {
				return false, rbErr
			}
			var total *evictions.EvictionTotalLimitError
			if errors.As(err, &total) {
				return false, err
			}
			return false, nil
		}
	}
	// The scheduler gives the room to the first pod of its queue that fits
	// there: a room a pod ahead of this one would take is no room for it.
	rival, err := m.ahead(ctx, pod, c.node)
	if err != nil || rival != nil {
		return false, errors.Join(err, tx.Rollback())
	}
	node, err := m.sim.Place(ctx, pod)
	if err != nil {
		return false, errors.Join(err, tx.Rollback())
	}
	if node == "" {
		return false, tx.Rollback()
	}
	tx.Commit()
	return true, nil
}

// ahead returns a pending pod that comes before pod in kube-scheduler's
// queue (higher priority, or as high and waiting since earlier) and fits
// on node as it is now, nil if none does.
func (m *MakeRoom) ahead(ctx context.Context, pod *v1.Pod, node string) (*v1.Pod, error) {
	sim := m.sim.Simulator()
	ni, err := sim.Node(node)
	if err != nil {
		return nil, err
	}
	priority := corev1helpers.PodPriority(pod)
	arrivedFirst := true
	for _, q := range sim.Pending() { // in the order they arrived
		if q.UID == pod.UID {
			arrivedFirst = false
			continue
		}
		if qp := corev1helpers.PodPriority(q); qp < priority || qp == priority && !arrivedFirst {
			continue
		}
		if !fits(ni, m.requestsOf(q), nil, 0) {
			continue
		}
		pred, err := sim.Predict(ctx, q, simulator.PredictOptions{Exclude: func(n string) bool { return n != node }})
		switch {
		case errors.Is(err, simulator.ErrUnknownScheduler):
		case err != nil:
			return nil, err
		case pred.Node == node:
			return q, nil
		}
	}
	return nil, nil
}

// candidates lists the nodes, of those given, where moving at most
// maxMovesPerPod pods frees enough of every resource pod asks for, with the
// fewest pods (biggest first) that do; fewest moves first, then the
// cheapest, then by name. try then places the pod with its own profile.
func (m *MakeRoom) candidates(pod *v1.Pod, nodes []string, tried sets.Set[string]) ([]candidate, error) {
	sim := m.sim.Simulator()
	need := requests.Of(pod)
	priority := corev1helpers.PodPriority(pod)
	var out []candidate
	for _, n := range nodes {
		if tried.Has(n) {
			continue
		}
		ni, err := sim.Node(n)
		if err != nil {
			return nil, err
		}
		movable := m.movable(ni, priority)
		requests.BiggestFirst(movable, m.requestsOf)
		var chosen []*v1.Pod
		freed := v1.ResourceList{}
		for !fits(ni, need, freed, len(chosen)) {
			if len(chosen) == len(movable) || len(chosen) == int(m.args.MaxMovesPerPod) {
				chosen = nil
				break
			}
			p := movable[len(chosen)]
			chosen = append(chosen, p)
			for r, q := range m.requestsOf(p) {
				sum := freed[r]
				sum.Add(q)
				freed[r] = sum
			}
		}
		if len(chosen) == 0 {
			continue // nothing to move there, or not enough
		}
		c := candidate{node: n, pods: chosen}
		for _, p := range chosen {
			c.cost += disruption.Cost(p)
		}
		out = append(out, c)
	}
	slices.SortStableFunc(out, func(a, b candidate) int {
		return cmp.Or(cmp.Compare(len(a.pods), len(b.pods)), cmp.Compare(a.cost, b.cost), cmp.Compare(a.node, b.node))
	})
	return out, nil
}

// requestsOf is requests.Of(pod), computed once a Balance.
func (m *MakeRoom) requestsOf(pod *v1.Pod) v1.ResourceList {
	r, ok := m.requests[pod]
	if !ok {
		r = requests.Of(pod)
		m.requests[pod] = r
	}
	return r
}

// movable are the pods on a node MakeRoom may move for a pod of priority:
// of that priority or lower, not bound to the node, passing the evictor's
// filters, and none the planner would refuse to move whatever the target.
func (m *MakeRoom) movable(ni fwk.NodeInfo, priority int32) []*v1.Pod {
	ev := m.handle.Evictor()
	var out []*v1.Pod
	for _, pi := range ni.GetPods() {
		p := pi.GetPod()
		if simulator.NodeBound(p) || corev1helpers.PodPriority(p) > priority || m.stuck.Has(p.UID) {
			continue
		}
		if !ev.Filter(p) || !ev.PreEvictionFilter(p) {
			continue
		}
		// A gang's member moves only with its whole gang, which makes no
		// room on one node.
		if gang.Of(p) != "" {
			continue
		}
		if why, _ := m.sim.MustStay(p); why != "" {
			continue
		}
		out = append(out, p)
	}
	return out
}

// fits says whether need fits on the node once the pods whose requests add
// up to freed (removed of them) are gone: every resource it asks for, and
// a pod slot.
func fits(ni fwk.NodeInfo, need, freed v1.ResourceList, removed int) bool {
	alloc, used := ni.GetAllocatable(), ni.GetRequested()
	if len(ni.GetPods())-removed+1 > alloc.GetAllowedPodNumber() {
		return false
	}
	for r, q := range need {
		if q.IsZero() {
			continue
		}
		f := freed[r]
		var free int64
		switch r {
		case v1.ResourceCPU:
			free = alloc.GetMilliCPU() - used.GetMilliCPU() + f.MilliValue()
			if q.MilliValue() > free {
				return false
			}
			continue
		case v1.ResourceMemory:
			free = alloc.GetMemory() - used.GetMemory() + f.Value()
		case v1.ResourceEphemeralStorage:
			free = alloc.GetEphemeralStorage() - used.GetEphemeralStorage() + f.Value()
		case v1.ResourcePods:
			continue
		default:
			free = alloc.GetScalarResources()[r] - used.GetScalarResources()[r] + f.Value()
		}
		if q.Value() > free {
			return false
		}
	}
	return true
}

// UnschedulableSince is when the scheduler last found pod unschedulable;
// ok is false for a pod it has not (yet) found so.
func UnschedulableSince(pod *v1.Pod) (since time.Time, ok bool) {
	for _, c := range pod.Status.Conditions {
		if c.Type == v1.PodScheduled && c.Status == v1.ConditionFalse && c.Reason == v1.PodReasonUnschedulable {
			return c.LastTransitionTime.Time, true
		}
	}
	return time.Time{}, false
}
