package consolidation

import (
	"container/heap"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"

	v1 "k8s.io/api/core/v1"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/rebalancer-dev/rebalancer/pkg/requests"
	"github.com/rebalancer-dev/rebalancer/pkg/simulator"
)

// Packing: how many nodes to keep, and which pods each takes.
//
// The nodes a consolidation keeps must hold, besides their own pods, every
// movable pod of the nodes it empties. Counting each resource apart (the
// lower bound) or by the average pod misses that pods differ: a small node
// whose CPU runs out after 35 pods of the average takes 107 of the
// smallest, and a large node has CPU to spare for the largest. So the
// packing fills the kept nodes one by one, each first with the largest
// pods no bigger than its free room divided by its free pod slots (such a
// pod leaves that share as large for the next slot), then with the
// smallest that fit; where that leaves pods without room, it places the
// pods largest first, each on the kept node with the most free room per
// free pod slot (in its scarcest counted resource), so that the largest
// go where a slot has the most room and every node fills its slots as it
// fills its room. It keeps the fewest nodes, in keep order (keepOrder),
// whose room holds every movable pod of the others. The plan then sends each pod to a
// node the packing left room on for pods of its shape
// (simulator.PredictOptions.Prefer), else to any node kept (PreferElse):
// the scheduler's own score chooses among them. The packing only orders and
// prefers: pods it did not foresee (constraints it does not weigh, such as
// taints, affinity or spread) go where the scheduler puts them, nodes
// outside the kept ones take pods when those are full (and then stay), and
// kept nodes are emptied too, last, when the others have room to spare.

// shape is a pod's requests of the counted resources, as a key.
type shape string

// packing is the nodes kept, and how many more pods of each shape the
// packing gave each of them.
type packing struct {
	keep map[string]bool
	// room is, by shape, the nodes the packing left room on for pods of
	// that shape, and how many (a node whose room is taken is removed).
	room map[shape]map[string]int
	// counted are the resources shapes are made of (pod slots aside).
	counted []v1.ResourceName
}

// shapeOf is pod's shape.
func (pk *packing) shapeOf(pod *v1.Pod) shape {
	return shapeKey(amountsOf(requests.Of(pod), pk.counted))
}

// prefer are the targets a pod of shape s prefers: the nodes with room for
// it, else (second) any node kept; when no node has room left for it, any
// node kept, and no second choice.
func (pk *packing) prefer(s shape) (first, second func(node string) bool) {
	kept := func(node string) bool { return pk.keep[node] }
	nodes := pk.room[s]
	if len(nodes) == 0 {
		return kept, nil
	}
	return func(node string) bool { return nodes[node] > 0 }, kept
}

// take counts one pod of shape s placed on node; it reports whether the
// packing had room for it there.
func (pk *packing) take(node string, s shape) bool {
	n := pk.room[s][node]
	switch {
	case n <= 0:
		return false
	case n == 1:
		delete(pk.room[s], node)
	default:
		pk.room[s][node] = n - 1
	}
	return true
}

// giveBack undoes take.
func (pk *packing) giveBack(node string, s shape) {
	if pk.room[s] == nil {
		pk.room[s] = map[string]int{}
	}
	pk.room[s][node]++
}

func amountsOf(req v1.ResourceList, counted []v1.ResourceName) []int64 {
	out := make([]int64, len(counted))
	for i, r := range counted {
		q := req[r]
		out[i] = requests.Units(r, q)
	}
	return out
}

// podAmounts is amountsOf(requests.Of(pod), counted) for a pod on a node,
// read from the requests kube-scheduler's NodeInfo computed for it with
// the same options and keeps, instead of computing them again.
func podAmounts(pi fwk.PodInfo, counted []v1.ResourceName) []int64 {
	res := pi.CalculateResource().Resource
	out := make([]int64, len(counted))
	for i, r := range counted {
		out[i] = requests.Amount(res, r)
	}
	return out
}

func shapeKey(amounts []int64) shape {
	var b strings.Builder
	for _, a := range amounts {
		b.WriteString(strconv.FormatInt(a, 10))
		b.WriteByte(',')
	}
	return shape(b.String())
}

// pack chooses the nodes to keep among candidates, listed in keep order
// (the pinned ones first: they are kept whatever it finds), and the pods
// each takes. A node emptied loses all but its DaemonSet and mirror pods.
// ceiling caps, in percent of allocatable, what the packing may fill of a
// resource (the policy's targetUtilizationCeiling; nil for none).
func pack(order []candidate, pinned map[string]bool, counted []v1.ResourceName, ceiling map[v1.ResourceName]int32) *packing {
	pb := newPackProblem(order, counted, ceiling)
	// fill packs the pods of the nodes from m on into the first m nodes;
	// the room it gives each shape when all fit, nil otherwise. Filling
	// node by node packs the kept nodes tightest (the first full, the last
	// with room to spare); where it finds no room for every pod, spreading
	// by room per slot may (it packs best where pod slots run out first,
	// with many small pods).
	fill := func(m int) map[shape]map[string]int {
		left := pb.left(m)
		if given := pb.byShare(m, left); given != nil {
			return given
		}
		return pb.bySlotRoom(m, left)
	}
	// The fewest nodes kept: at least the pinned ones, which lead the order.
	lo := 0
	for lo < len(order) && pinned[order[lo].node.Name] {
		lo++
	}
	m := min(lo+sort.Search(len(order)-lo+1, func(k int) bool { return fill(lo+k) != nil }), len(order))
	pk := &packing{keep: map[string]bool{}, room: fill(m), counted: counted}
	for _, cand := range order[:m] {
		pk.keep[cand.node.Name] = true
	}
	return pk
}

// packProblem is what a packing reads of the candidates, in keep order.
type packProblem struct {
	names []string
	// room and slots are each node's free room (its own pods stay while
	// it is kept) and free pod slots.
	room  [][]int64
	slots []int
	// leaving are the shapes of the pods that leave each node when it is
	// emptied.
	leaving []map[shape]int
	shapes  map[shape][]int64
	// keys are the shapes, largest first: each resource as a share of all
	// pods' demand (total), summed.
	keys  []shape
	total []float64
}

func newPackProblem(order []candidate, counted []v1.ResourceName, ceiling map[v1.ResourceName]int32) *packProblem {
	pb := &packProblem{
		names:   make([]string, len(order)),
		room:    make([][]int64, len(order)),
		slots:   make([]int, len(order)),
		leaving: make([]map[shape]int, len(order)),
		shapes:  map[shape][]int64{},
		total:   make([]float64, len(counted)),
	}
	for i, cand := range order {
		pb.names[i] = cand.node.Name
		pb.room[i] = make([]int64, len(counted))
		for k, r := range counted {
			used, total := amounts(cand.ni, r, nil)
			if c, ok := ceiling[r]; ok {
				total = total * int64(c) / 100
			}
			pb.room[i][k] = max(total-used, 0)
		}
		if !cand.closed { // else it gives no room
			allowed := int64(cand.ni.GetAllocatable().GetAllowedPodNumber())
			if c, ok := ceiling[v1.ResourcePods]; ok {
				allowed = allowed * int64(c) / 100
			}
			pb.slots[i] = max(int(allowed)-len(cand.ni.GetPods()), 0)
		}
		pb.leaving[i] = map[shape]int{}
		for _, pi := range cand.ni.GetPods() {
			p := pi.GetPod()
			if simulator.NodeBound(p) {
				continue
			}
			a := podAmounts(pi, counted)
			key := shapeKey(a)
			pb.shapes[key] = a
			pb.leaving[i][key]++
			for k := range a {
				pb.total[k] += float64(a[k])
			}
		}
	}
	size := func(a []int64) float64 {
		s := 0.0
		for k := range a {
			if pb.total[k] > 0 {
				s += float64(a[k]) / pb.total[k]
			}
		}
		return s
	}
	for key := range pb.shapes {
		pb.keys = append(pb.keys, key)
	}
	sort.Slice(pb.keys, func(i, j int) bool {
		si, sj := size(pb.shapes[pb.keys[i]]), size(pb.shapes[pb.keys[j]])
		if si != sj {
			return si > sj
		}
		return pb.keys[i] < pb.keys[j]
	})
	return pb
}

// left counts, by shape, the pods of the nodes from m on.
func (pb *packProblem) left(m int) map[shape]int {
	left := map[shape]int{}
	for i := m; i < len(pb.leaving); i++ {
		for key, n := range pb.leaving[i] {
			left[key] += n
		}
	}
	return left
}

// give counts n pods of shape key given node i.
func (pb *packProblem) give(given map[shape]map[string]int, key shape, i, n int) {
	if given[key] == nil {
		given[key] = map[string]int{}
	}
	given[key][pb.names[i]] += n
}

// bySlotRoom places the pods largest first, each on the node of the first
// m with the most free room per free slot that it fits.
func (pb *packProblem) bySlotRoom(m int, left map[shape]int) map[shape]map[string]int {
	nodes := &roomHeap{free: make([][]int64, m), slots: slices.Clone(pb.slots[:m]), total: pb.total, perSlot: make([]float64, m)}
	for i := range m {
		nodes.free[i] = slices.Clone(pb.room[i])
		if nodes.slots[i] > 0 {
			nodes.update(i)
			nodes.idx = append(nodes.idx, i)
		}
	}
	heap.Init(nodes)
	given := map[shape]map[string]int{}
	var passed []int
	for _, key := range pb.keys {
		a := pb.shapes[key]
		for range left[key] {
			// The most room per slot rarely misses: a few tries.
			placed := -1
			for nodes.Len() > 0 && len(passed) < maxPackTries {
				i := heap.Pop(nodes).(int)
				if fits(a, nodes.free[i], 1) {
					placed = i
					break
				}
				passed = append(passed, i)
			}
			for _, i := range passed {
				heap.Push(nodes, i)
			}
			passed = passed[:0]
			if placed < 0 {
				return nil
			}
			for k := range a {
				nodes.free[placed][k] -= a[k]
			}
			if nodes.slots[placed]--; nodes.slots[placed] > 0 {
				nodes.update(placed)
				heap.Push(nodes, placed)
			}
			pb.give(given, key, placed, 1)
		}
	}
	return given
}

// byShare fills the first m nodes one by one, each first with the largest
// pods no bigger than its free room divided by its free slots, in every
// counted resource (such a pod leaves that share as large for the next
// slot), then with the smallest that fit.
func (pb *packProblem) byShare(m int, left map[shape]int) map[shape]map[string]int {
	type shapeCount struct {
		key shape
		n   int
	}
	todo := make([]shapeCount, 0, len(left))
	pods := 0
	for _, key := range pb.keys {
		if n := left[key]; n > 0 {
			todo = append(todo, shapeCount{key: key, n: n})
			pods += n
		}
	}
	given := map[shape]map[string]int{}
	for i := 0; i < m && pods > 0; i++ {
		free, n := slices.Clone(pb.room[i]), pb.slots[i]
		for n > 0 && pods > 0 {
			pick, take := -1, 0
			for j := range todo {
				if todo[j].n > 0 && fits(pb.shapes[todo[j].key], free, int64(n)) {
					pick, take = j, min(todo[j].n, n)
					break
				}
			}
			if pick < 0 {
				for j := len(todo) - 1; j >= 0; j-- {
					if a := pb.shapes[todo[j].key]; todo[j].n > 0 && fits(a, free, 1) {
						pick, take = j, min(todo[j].n, n, howMany(a, free))
						break
					}
				}
			}
			if pick < 0 {
				break
			}
			sc := &todo[pick]
			for k, a := range pb.shapes[sc.key] {
				free[k] -= a * int64(take)
			}
			sc.n, n, pods = sc.n-take, n-take, pods-take
			pb.give(given, sc.key, i, take)
		}
	}
	if pods > 0 {
		return nil
	}
	return given
}

// howMany is how many pods of amounts fit in free (at least one does).
func howMany(amounts, free []int64) int {
	most := math.MaxInt
	for k, a := range amounts {
		if a > 0 {
			most = min(most, int(free[k]/a))
		}
	}
	return most
}

// fits says whether n pods of amounts fit in free.
func fits(amounts, free []int64, n int64) bool {
	for k, a := range amounts {
		if a*n > free[k] {
			return false
		}
	}
	return true
}

// maxPackTries is how many nodes, most room per slot first, the packing
// tries for one pod before it finds the kept nodes too few.
const maxPackTries = 64

// roomHeap orders nodes by their free room per free pod slot, in their
// scarcest counted resource (each as a share of all pods' demand): the
// most first, then the earliest in keep order.
type roomHeap struct {
	idx   []int
	free  [][]int64
	slots []int
	total []float64
	// perSlot is each node's room per slot, set by update.
	perSlot []float64
}

// update sets node i's room per slot after a change to its room or slots.
func (h *roomHeap) update(i int) {
	share := math.Inf(1)
	for k, t := range h.total {
		if t > 0 {
			share = min(share, float64(h.free[i][k])/t)
		}
	}
	if math.IsInf(share, 1) {
		share = 1
	}
	h.perSlot[i] = share / float64(h.slots[i])
}

func (h *roomHeap) Len() int { return len(h.idx) }
func (h *roomHeap) Less(x, y int) bool {
	i, j := h.idx[x], h.idx[y]
	if a, b := h.perSlot[i], h.perSlot[j]; a != b {
		return a > b
	}
	return i < j
}
func (h *roomHeap) Swap(x, y int) { h.idx[x], h.idx[y] = h.idx[y], h.idx[x] }
func (h *roomHeap) Push(x any)    { h.idx = append(h.idx, x.(int)) }
func (h *roomHeap) Pop() any {
	last := h.idx[len(h.idx)-1]
	h.idx = h.idx[:len(h.idx)-1]
	return last
}
