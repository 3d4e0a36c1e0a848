package consolidation

import (
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"

	v1 "k8s.io/api/core/v1"

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
// packing fills the nodes in keep order (keepOrder), each first with the
// largest pods no bigger than its free room divided by its free pod slots,
// in every counted resource (such a pod leaves that share as large for the
// next slot: the node fills its slots as it fills its room), then with the
// smallest that fit. It keeps the fewest nodes, in that order, whose room
// holds every movable pod of the others. The plan then sends each pod to a
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

func shapeKey(amounts []int64) shape {
	var b strings.Builder
	for _, a := range amounts {
		b.WriteString(strconv.FormatInt(a, 10))
		b.WriteByte(',')
	}
	return shape(b.String())
}

// shapeCount is how many pods of one shape there are.
type shapeCount struct {
	key     shape
	amounts []int64
	n       int
}

// pack chooses the nodes to keep among candidates, listed in keep order
// (the pinned ones first: they are kept whatever it finds), and the pods
// each takes. A node emptied loses all but its DaemonSet and mirror pods.
func pack(order []candidate, pinned map[string]bool, counted []v1.ResourceName) *packing {
	// Each node's free room (its own pods stay while it is kept) and the
	// shapes of the pods that leave it when it is emptied.
	room := make([][]int64, len(order))
	slots := make([]int, len(order))
	leaving := make([]map[shape]int, len(order))
	shapes := map[shape][]int64{}
	for i, cand := range order {
		room[i] = make([]int64, len(counted))
		for k, r := range counted {
			used, total := amounts(cand.ni, r, nil)
			room[i][k] = total - used
		}
		slots[i] = cand.ni.GetAllocatable().GetAllowedPodNumber() - len(cand.ni.GetPods())
		leaving[i] = map[shape]int{}
		for _, pi := range cand.ni.GetPods() {
			p := pi.GetPod()
			if simulator.NodeBound(p) {
				continue
			}
			a := amountsOf(requests.Of(p), counted)
			key := shapeKey(a)
			shapes[key] = a
			leaving[i][key]++
		}
	}
	// Shapes largest first: each resource as a share of all pods' demand.
	total := make([]float64, len(counted))
	for _, l := range leaving {
		for key, n := range l {
			for k, a := range shapes[key] {
				total[k] += float64(a) * float64(n)
			}
		}
	}
	size := func(a []int64) float64 {
		s := 0.0
		for k := range a {
			if total[k] > 0 {
				s += float64(a[k]) / total[k]
			}
		}
		return s
	}
	keys := make([]shape, 0, len(shapes))
	for key := range shapes {
		keys = append(keys, key)
	}
	sort.Slice(keys, func(i, j int) bool {
		si, sj := size(shapes[keys[i]]), size(shapes[keys[j]])
		if si != sj {
			return si > sj
		}
		return keys[i] < keys[j]
	})

	// fill packs the pods of the nodes from m on into the first m nodes;
	// the room it gives each shape when all fit, nil otherwise.
	fill := func(m int) map[shape]map[string]int {
		left := map[shape]int{}
		for i := m; i < len(order); i++ {
			for key, n := range leaving[i] {
				left[key] += n
			}
		}
		todo := make([]shapeCount, 0, len(left))
		pods := 0
		for _, key := range keys {
			if n := left[key]; n > 0 {
				todo = append(todo, shapeCount{key: key, amounts: shapes[key], n: n})
				pods += n
			}
		}
		given := map[shape]map[string]int{}
		for i := 0; i < m && pods > 0; i++ {
			free, n := slices.Clone(room[i]), slots[i]
			for n > 0 && pods > 0 {
				// The largest pods within the node's fair share: the share
				// stays fair after each, so it takes all it can of them.
				pick, take := -1, 0
				for j := range todo {
					if todo[j].n > 0 && fits(todo[j].amounts, free, int64(n)) {
						pick, take = j, min(todo[j].n, n)
						break
					}
				}
				if pick < 0 { // else as many of the smallest that fit as fit
					for j := len(todo) - 1; j >= 0; j-- {
						if todo[j].n > 0 && fits(todo[j].amounts, free, 1) {
							pick, take = j, min(todo[j].n, n, howMany(todo[j].amounts, free))
							break
						}
					}
				}
				if pick < 0 {
					break
				}
				sc := &todo[pick]
				for k, a := range sc.amounts {
					free[k] -= a * int64(take)
				}
				sc.n, n, pods = sc.n-take, n-take, pods-take
				if given[sc.key] == nil {
					given[sc.key] = map[string]int{}
				}
				given[sc.key][order[i].node.Name] += take
			}
		}
		if pods > 0 {
			return nil
		}
		return given
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
