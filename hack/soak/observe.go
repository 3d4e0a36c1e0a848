package main

import (
	"context"
	"slices"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"

	"github.com/rebalancer-dev/rebalancer/pkg/lowerbound"
	"github.com/rebalancer-dev/rebalancer/pkg/requests"
)

// observer watches the run's pods and nodes and rebalancer's events.
type observer struct {
	c     kubernetes.Interface
	pods  corelisters.PodLister
	nodes corelisters.NodeLister

	mu sync.Mutex
	// fitSince is when each pending pod was first seen pending while some
	// node had room for it: its wait is counted from then.
	fitSince       map[types.UID]time.Time
	unfit          map[types.UID]bool // pending pods seen without room
	longestPending time.Duration
	longestWho     string
	seenEvents     map[types.UID]time.Time
	moves          []move
	pingPong       *pingPongs
}

func newObserver(ctx context.Context, c kubernetes.Interface, pingPongWindow time.Duration) *observer {
	f := informers.NewSharedInformerFactory(c, 0)
	o := &observer{c: c, pods: f.Core().V1().Pods().Lister(), nodes: f.Core().V1().Nodes().Lister(),
		fitSince: map[types.UID]time.Time{}, unfit: map[types.UID]bool{}, seenEvents: map[types.UID]time.Time{}, pingPong: newPingPongs(pingPongWindow)}
	f.Start(ctx.Done())
	f.WaitForCacheSync(ctx.Done())
	return o
}

func inRun(p *v1.Pod) bool {
	for _, ns := range namespaces {
		if p.Namespace == ns {
			return true
		}
	}
	return false
}

// runPods are the run's pods that are or will be on a node: not finished,
// not being deleted.
func (o *observer) runPods() []*v1.Pod {
	all, _ := o.pods.List(labels.Everything())
	var out []*v1.Pod
	for _, p := range all {
		if inRun(p) && p.DeletionTimestamp == nil && p.Status.Phase != v1.PodSucceeded && p.Status.Phase != v1.PodFailed {
			out = append(out, p)
		}
	}
	return out
}

func (o *observer) runNodes() []*v1.Node {
	nodes, _ := o.nodes.List(labels.SelectorFromSet(labels.Set{nodeLabel: "true"}))
	return nodes
}

// free is what a node has left by the requests of the pods on it.
type free struct{ cpu, mem, pods int64 }

// room is each schedulable node's free capacity: cordoned nodes have none.
// Nodes rebalancer drains count: a pod kept waiting by a drain taint waits
// because of rebalancer.
func room(nodes []*v1.Node, pods []*v1.Pod) map[string]*free {
	out := map[string]*free{}
	for _, n := range nodes {
		if n.Spec.Unschedulable {
			continue
		}
		a := n.Status.Allocatable
		out[n.Name] = &free{cpu: a.Cpu().MilliValue(), mem: a.Memory().Value(), pods: a.Pods().Value()}
	}
	for _, p := range pods {
		f := out[p.Spec.NodeName]
		if f == nil {
			continue
		}
		r := requests.Of(p)
		f.cpu -= r.Cpu().MilliValue()
		f.mem -= r.Memory().Value()
		f.pods--
	}
	return out
}

func fitsSomewhere(p *v1.Pod, rooms map[string]*free) bool {
	r := requests.Of(p)
	for _, f := range rooms {
		if f.pods >= 1 && f.cpu >= r.Cpu().MilliValue() && f.mem >= r.Memory().Value() {
			return true
		}
	}
	return false
}

// tick updates the pending waits and reads rebalancer's new Rebalanced
// events; it runs more often than samples, so waits and moves are timed
// closely.
func (o *observer) tick(ctx context.Context, now time.Time) {
	pods := o.runPods()
	rooms := room(o.runNodes(), pods)
	o.mu.Lock()
	pending := map[types.UID]bool{}
	for _, p := range pods {
		if p.Spec.NodeName != "" {
			continue
		}
		pending[p.UID] = true
		since, ok := o.fitSince[p.UID]
		if !ok {
			if !fitsSomewhere(p, rooms) {
				o.unfit[p.UID] = true
				continue
			}
			// A pod seen without room before waits from now; one that had
			// room when first seen, from its creation.
			since = p.CreationTimestamp.Time
			if o.unfit[p.UID] {
				since = now
			}
			o.fitSince[p.UID] = since
		}
		if w := now.Sub(since); w > o.longestPending {
			o.longestPending, o.longestWho = w, p.Namespace+"/"+p.Name
		}
	}
	for uid := range o.fitSince {
		if !pending[uid] {
			delete(o.fitSince, uid)
		}
	}
	for uid := range o.unfit {
		if !pending[uid] {
			delete(o.unfit, uid)
		}
	}
	o.mu.Unlock()
	o.readEvents(ctx, now)
}

// readEvents feeds the moves of new Rebalanced events, oldest first, to
// the ping-pong count.
func (o *observer) readEvents(ctx context.Context, now time.Time) {
	var fresh []move
	for _, ns := range namespaces {
		list, err := o.c.EventsV1().Events(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			continue
		}
		o.mu.Lock()
		for _, ev := range list.Items {
			if ev.Reason != "Rebalanced" || ev.Regarding.Kind != "Pod" {
				continue
			}
			if _, seen := o.seenEvents[ev.UID]; seen {
				continue
			}
			o.seenEvents[ev.UID] = now
			at := ev.EventTime.Time
			if at.IsZero() {
				at = ev.CreationTimestamp.Time
			}
			if m, ok := parseMove(ns, ev.Regarding.Name, ev.Note, at); ok {
				fresh = append(fresh, m)
			}
		}
		o.mu.Unlock()
	}
	sortMoves(fresh)
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, m := range fresh {
		o.moves = append(o.moves, m)
		o.pingPong.add(m)
	}
	// Events live an hour in the apiserver; their UIDs need not be kept
	// longer.
	for uid, seen := range o.seenEvents {
		if now.Sub(seen) > 2*time.Hour {
			delete(o.seenEvents, uid)
		}
	}
}

// snapshot fills the cluster's side of a sample.
func (o *observer) snapshot(s *Sample, now time.Time) {
	pods := o.runPods()
	nodes := o.runNodes()
	s.Nodes, s.Pods = len(nodes), len(pods)
	inUse := map[string]bool{}
	for _, p := range pods {
		if p.Spec.NodeName == "" {
			s.Pending++
			continue
		}
		if !ownedByDaemonSet(p) {
			inUse[p.Spec.NodeName] = true
		}
	}
	s.NodesInUse = len(inUse)
	s.LowerBound = lowerBound(nodes, pods)
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, p := range pods {
		if since, ok := o.fitSince[p.UID]; ok && p.Spec.NodeName == "" {
			s.LongestPending = max(s.LongestPending, now.Sub(since))
		}
	}
	s.PingPong = o.pingPong.Count
}

func ownedByDaemonSet(p *v1.Pod) bool {
	ref := metav1.GetControllerOf(p)
	return ref != nil && ref.Kind == "DaemonSet"
}

// lowerBound is pkg/lowerbound's bound of the pods (bound and pending) on
// the schedulable nodes, by their requests of CPU, memory and pod slots:
// the nodes are alike, one class; the pods group by their requests.
func lowerBound(nodes []*v1.Node, pods []*v1.Pod) int {
	var class lowerbound.Class
	for _, n := range nodes {
		if n.Spec.Unschedulable {
			continue
		}
		a := n.Status.Allocatable
		class.Capacity = []int64{a.Pods().Value(), a.Cpu().MilliValue(), a.Memory().Value()}
		class.Count++
	}
	if class.Count == 0 {
		return 0
	}
	type key struct{ cpu, mem int64 }
	counts := map[key]int{}
	for _, p := range pods {
		if ownedByDaemonSet(p) {
			continue
		}
		r := requests.Of(p)
		counts[key{r.Cpu().MilliValue(), r.Memory().Value()}]++
	}
	groups := make([]lowerbound.Group, 0, len(counts))
	for k, n := range counts {
		groups = append(groups, lowerbound.Group{Demand: []int64{1, k.cpu, k.mem}, Count: n, Allowed: []int{0}})
	}
	return lowerbound.Bound([]lowerbound.Class{class}, groups)
}

func sortMoves(ms []move) {
	slices.SortStableFunc(ms, func(a, b move) int { return a.At.Compare(b.At) })
}

// longest is the longest wait of a pod that fit, over the whole run.
func (o *observer) longest() (time.Duration, string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.longestPending, o.longestWho
}
