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

	"github.com/rebalancer-dev/rebalancer/pkg/gang"
	"github.com/rebalancer-dev/rebalancer/pkg/plan"
	"github.com/rebalancer-dev/rebalancer/pkg/requests"
	"github.com/rebalancer-dev/rebalancer/pkg/simhandle"
	"github.com/rebalancer-dev/rebalancer/pkg/simulator"
)

// Name is the plugin's name in a DeschedulerPolicy.
const Name = "MakeRoom"

// The search for one pending pod simulates at most maxTries sets of moves
// (each up to maxMovesPerPod moves, a check of the pods ahead of it in the
// scheduler's queue and a placement), at most maxTriesPerNode of them on
// one node; keeping the maxSetsPerNode best sets of each node, it looks at
// most at maxVisits combinations of a node's pods. maxExamined times
// maxPodsPerCycle bounds the pending pods one plan searches for. Together
// they bound a plan's simulations when room can rarely be made.
const (
	maxTries        = 16
	maxTriesPerNode = 4
	maxSetsPerNode  = 2 * maxTriesPerNode
	maxVisits       = 4096
	maxExamined     = 10
)

// MakeRoom is a descheduler BalancePlugin.
type MakeRoom struct {
	handle frameworktypes.Handle
	sim    simhandle.Handle
	args   *Args
	// stuck are the pods whose move the planner refused in this Balance
	// as the first move of a try, so whatever the other moves: they are
	// not chosen again (rooms made since only take room away from the
	// nodes they could go to).
	stuck sets.Set[types.UID]
	// requests are the pods' requests in this Balance, by object (a pod
	// is not changed; a moved one is a new object): each pod is looked at
	// for every pending pod. shapes are their shapes (shapeOf).
	requests map[*v1.Pod]v1.ResourceList
	shapes   map[*v1.Pod]string
	// noRoom is, by shape, the pending pod that came first in the
	// scheduler's queue of those this Balance found no room for; arrival
	// is each pending pod's place in the order they arrived.
	noRoom  map[string]*v1.Pod
	arrival map[types.UID]int
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

// Sequential is true: the planner judges each move as the plugin asks for
// it, as each room is searched for on the cluster the moves before left.
func (m *MakeRoom) Sequential() bool { return true }

var _ simhandle.Sequential = &MakeRoom{}

// Balance makes room on the given nodes for the pods unschedulable longer
// than unschedulableFor, highest priority first, then longest waiting.
//
// A pod of the same shape (shapeOf: its requests and everything that
// decides where it fits) as one that comes before it in the scheduler's
// queue and got no room in this plan is not searched for: it gets none
// either. Any room made for it is one the earlier pod fits in too, and
// that pod, still pending, would take it first, so the search would end
// in the same refusal (see ahead). That holds whatever the plan does in
// between, rooms made for other pods included, so nothing invalidates the
// memo within a plan; a new plan starts afresh. A pod of the same shape
// that comes first in the queue itself (waiting longer is not always
// arriving first) is searched for as any other.
func (m *MakeRoom) Balance(ctx context.Context, nodes []*v1.Node) *frameworktypes.Status {
	logger := klog.FromContext(ctx).WithValues("plugin", Name)
	sim := m.sim.Cluster()
	m.stuck = sets.New[types.UID]()
	m.requests = map[*v1.Pod]v1.ResourceList{}
	m.shapes = map[*v1.Pod]string{}
	m.noRoom = map[string]*v1.Pod{}
	m.arrival = map[types.UID]int{}
	for i, p := range sim.Pending() { // in the order they arrived
		m.arrival[p.UID] = i
	}
	waiting := m.waiting(sim)
	logger.V(2).Info("Pending pods room may be made for", "pods", len(waiting), "pending", len(sim.Pending()))
	allowed := sets.New[string]() // the policy's nodes
	for _, n := range nodes {
		allowed.Insert(n.Name)
	}
	placed, searched := 0, 0
	for _, pod := range waiting {
		if placed >= int(m.args.MaxPodsPerCycle) || searched >= maxExamined*int(m.args.MaxPodsPerCycle) {
			break
		}
		shape := m.shapeOf(pod)
		if first := m.noRoom[shape]; shape != "" && first != nil && m.arrival[first.UID] < m.arrival[pod.UID] {
			m.sim.Skip(pod, plan.ReasonNoRoom, fmt.Sprintf("%s, a pod of the same requests and scheduling constraints ahead of it in the scheduler's queue, got no room: any room made for this one it would take first",
				klog.KObj(first)))
			continue
		}
		searched++
		ok, none, err := m.makeRoom(ctx, logger, pod, allowed)
		if err != nil {
			var total *evictions.EvictionTotalLimitError
			if errors.As(err, &total) {
				break // the plan is full
			}
			return &frameworktypes.Status{Err: err}
		}
		if ok {
			placed++
		} else if first := m.noRoom[shape]; none && shape != "" && (first == nil || m.arrival[pod.UID] < m.arrival[first.UID]) {
			m.noRoom[shape] = pod
		}
	}
	return nil
}

// waiting lists the pending pods room may be made for, in the order it is
// made: unschedulable for long enough, not nominated to a node (a
// preemption is under way), highest priority first, then longest waiting.
func (m *MakeRoom) waiting(sim simhandle.Cluster) []*v1.Pod {
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

// outcome is how a try ended.
type outcome int

const (
	made     outcome = iota // the moves hold and the pod lands
	refused                 // the planner refused one of the moves
	rival                   // a pod ahead of it in the queue would take the room
	stillOut                // it still fits nowhere
)

func (o outcome) String() string {
	return [...]string{"made", "refused", "rival", "still out"}[o]
}

// makeRoom plans the moves that make room for pod and places the pod in
// the simulation, so later rooms and plugins see it. It searches the sets
// of at most maxMovesPerPod pods on one node that free enough there
// (roomSets): the fewest moves first, then the cheapest, then those that
// move the least, over all nodes. A set whose pods could not all go
// elsewhere, by what the other nodes have free, is not simulated
// (placeable). A set whose first move the planner refuses rules that pod,
// and the pods of its shape on its node, out of the sets tried after it (it cannot move
// whatever the others do); one refused at a later move is tried again
// with that pod moved first, as the moves before it may have taken the
// room it needed. A node where a pod ahead in the queue would take the
// room, or where the pod still does not fit, is given up. The search
// stops at the first set that makes room, or after maxTries sets
// (maxTriesPerNode on a node). It records a skip for the pod when it
// found no room (none). ok says it made room.
func (m *MakeRoom) makeRoom(ctx context.Context, logger klog.Logger, pod *v1.Pod, allowed sets.Set[string]) (ok, none bool, err error) {
	sim := m.sim.Cluster()
	// Only nodes the pod was refused by for what moving pods may resolve
	// (resources, not a taint or an affinity), and that the policy covers.
	fits, names, err := sim.Resolvable(ctx, pod)
	switch {
	case errors.Is(err, simulator.ErrUnknownScheduler):
		return false, false, nil // the planner warns about schedulers it does not model
	case err != nil:
		return false, false, err
	case fits:
		logger.V(3).Info("Pending pod fits without moves: its scheduler will place it", "pod", klog.KObj(pod))
		return false, false, nil
	}
	var cands []roomSet
	for _, n := range names {
		if !allowed.Has(n) {
			continue
		}
		ni, err := sim.Node(n)
		if err != nil {
			return false, false, err
		}
		cands = append(cands, m.roomSets(ni, m.requestsOf(pod), m.movable(ni, corev1helpers.PodPriority(pod)))...)
	}
	slices.SortStableFunc(cands, func(a, b roomSet) int {
		return cmp.Or(cmp.Compare(len(a.pods), len(b.pods)), cmp.Compare(a.cost, b.cost), cmp.Compare(a.moved, b.moved), cmp.Compare(a.node, b.node))
	})
	var free map[room]int // the nodes by their free room, once a set is to be tried
	if len(cands) > 0 {
		all, err := sim.Nodes()
		if err != nil {
			return false, false, err
		}
		free = rooms(all)
	}

	tries, perNode := 0, map[string]int{}
	given := sets.New[string]() // nodes given up
	var tried []string
	cut := false                  // sets were left untried
	nowhere := sets.New[string]() // nodes with sets whose pods have nowhere to go
	for _, set := range cands {
		if given.Has(set.node) || perNode[set.node] >= maxTriesPerNode || slices.ContainsFunc(set.pods, func(p *v1.Pod) bool { return m.stuck.Has(p.UID) }) {
			continue
		}
		if !m.placeable(set.pods, set.free, free) {
			nowhere.Insert(set.node)
			continue
		}
		if tries >= maxTries {
			cut = true
			break
		}
		seen := sets.New[types.UID]() // the pods moved first in a try
		for order := set.pods; order != nil && perNode[set.node] < maxTriesPerNode && tries < maxTries; {
			if perNode[set.node] == 0 {
				tried = append(tried, set.node)
			}
			tries++
			perNode[set.node]++
			seen.Insert(order[0].UID)
			how, at, err := m.try(ctx, pod, set.node, order)
			if err != nil {
				return false, false, err
			}
			logger.V(4).Info("Tried a set of moves", "pod", klog.KObj(pod), "node", set.node, "moves", len(order), "outcome", how, "refusedAt", at)
			var next []*v1.Pod
			switch {
			case how == made:
				logger.V(2).Info("Room made for a pending pod", "pod", klog.KObj(pod), "node", set.node, "moves", len(order), "tries", tries)
				return true, false, nil
			case how == rival || how == stillOut:
				given.Insert(set.node)
			case at == 0:
				m.stuckWith(order[0], set.node)
			case !seen.Has(order[at].UID):
				// Moved first, it may find the room the others took.
				next = append([]*v1.Pod{order[at]}, slices.Delete(slices.Clone(order), at, at+1)...)
			}
			order = next
		}
	}
	switch {
	case len(tried) == 0 && nowhere.Len() > 0:
		m.sim.Skip(pod, plan.ReasonNoRoom, fmt.Sprintf("moving at most %d pods of priority %d or lower that may move (maxMovesPerPod) would make room for it on %s, but no other nodes have room for them",
			m.args.MaxMovesPerPod, corev1helpers.PodPriority(pod), plan.Abbreviate(sets.List(nowhere), 3)))
		return false, true, nil
	case len(tried) == 0:
		m.sim.Skip(pod, plan.ReasonNoRoom, fmt.Sprintf("no node has room for it after moving at most %d pods of priority %d or lower that may move (maxMovesPerPod)",
			m.args.MaxMovesPerPod, corev1helpers.PodPriority(pod)))
		return false, true, nil
	}
	detail := fmt.Sprintf("the moves that would make room for it on %s do not all hold (see their skips), a pod ahead of it in the scheduler's queue would take the room, or it still does not fit there",
		plan.Abbreviate(tried, 8))
	if cut {
		detail += fmt.Sprintf("; the search stopped after %d sets of moves, the most MakeRoom tries for one pod", tries)
	}
	m.sim.Skip(pod, plan.ReasonNoRoom, detail)
	return false, true, nil
}

// stuckWith rules out p, whose move the planner refused whatever the
// other moves, and the pods of its shape on its node: moved from there,
// they would go where it would (the planner already refused those it
// would refuse whatever the target; see movable).
func (m *MakeRoom) stuckWith(p *v1.Pod, node string) {
	m.stuck.Insert(p.UID)
	shape := m.shapeOf(p)
	if shape == "" {
		return
	}
	ni, err := m.sim.Cluster().Node(node)
	if err != nil {
		return
	}
	for _, pi := range ni.GetPods() {
		if q := pi.GetPod(); m.shapeOf(q) == shape {
			m.stuck.Insert(q.UID)
		}
	}
}

// try moves pods, in that order, steered off node, and places pod; it
// keeps the moves and the placement only if every move holds and pod
// lands. at is the move the planner refused.
func (m *MakeRoom) try(ctx context.Context, pod *v1.Pod, node string, pods []*v1.Pod) (how outcome, at int, err error) {
	tx := m.sim.Begin()
	eo := evictions.EvictOptions{StrategyName: Name, Reason: fmt.Sprintf("making room on %s for pending pod %s/%s", node, pod.Namespace, pod.Name)}
	for i, p := range pods {
		if err := m.sim.PlanMoveFor(ctx, p, pod, eo); err != nil {
			if rbErr := tx.Rollback(); rbErr != nil {
				return refused, i, rbErr
			}
			var total *evictions.EvictionTotalLimitError
			if errors.As(err, &total) {
				return refused, i, err
			}
			return refused, i, nil
		}
	}
	// The scheduler gives the room to the first pod of its queue that fits
	// there: a room a pod ahead of this one would take is no room for it.
	q, err := m.ahead(ctx, pod, node)
	if err != nil || q != nil {
		return rival, 0, errors.Join(err, tx.Rollback())
	}
	landed, err := m.sim.Place(ctx, pod)
	if err != nil {
		return stillOut, 0, errors.Join(err, tx.Rollback())
	}
	if landed == "" {
		return stillOut, 0, tx.Rollback()
	}
	tx.Commit()
	return made, 0, nil
}

// ahead returns a pending pod that comes before pod in kube-scheduler's
// queue (higher priority, or as high and waiting since earlier) and fits
// on node as it is now, nil if none does.
func (m *MakeRoom) ahead(ctx context.Context, pod *v1.Pod, node string) (*v1.Pod, error) {
	sim := m.sim.Cluster()
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

// requestsOf is requests.Of(pod), computed once a Balance.
func (m *MakeRoom) requestsOf(pod *v1.Pod) v1.ResourceList {
	r, ok := m.requests[pod]
	if !ok {
		r = requests.Of(pod)
		m.requests[pod] = r
	}
	return r
}

// shapeOf is shapeOf(pod), computed once a Balance.
func (m *MakeRoom) shapeOf(pod *v1.Pod) string {
	s, ok := m.shapes[pod]
	if !ok {
		s = shapeOf(pod, m.requestsOf(pod))
		m.shapes[pod] = s
	}
	return s
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
	alloc := ni.GetAllocatable()
	if len(ni.GetPods())-removed+1 > alloc.GetAllowedPodNumber() {
		return false
	}
	for r, q := range need {
		if q.IsZero() || r == v1.ResourcePods {
			continue
		}
		requested, has := requests.OnNode(ni, r)
		if requests.Units(r, q) > has-requested+requests.Units(r, freed[r]) {
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
