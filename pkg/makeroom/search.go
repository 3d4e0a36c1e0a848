package makeroom

import (
	"cmp"
	"slices"

	v1 "k8s.io/api/core/v1"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/rebalancer-dev/rebalancer/pkg/disruption"
	"github.com/rebalancer-dev/rebalancer/pkg/requests"
)

// roomSet is a set of pods on one node whose moves free enough there for
// the pending pod, none of them more than needed: without any one of
// them, it would not be enough.
type roomSet struct {
	node string
	free room      // what the node has free before
	pods []*v1.Pod // biggest first
	cost float64   // what moving them costs (disruption.Cost)
	// moved is how much they ask for: the shares of the node's CPU,
	// memory and every other resource it is short of, summed. Less is
	// easier to place elsewhere.
	moved float64
}

// short is a resource the node lacks for the pending pod, and how much;
// v1.ResourcePods for a pod slot.
type short struct {
	name     v1.ResourceName
	lack, of int64 // of: the node's allocatable
}

// class is pods of one shape (shapeOf) on the node: any of them frees the
// same and goes where the others would; the cheapest to move first.
type class struct {
	pods  []*v1.Pod
	frees []int64 // of each short resource, one pod
	size  int64   // biggest first, as requests.BiggestFirst
}

// roomSets lists the sets of at most maxMovesPerPod of the movable pods
// on ni that free what the pod asking need lacks there, fewest pods
// first, then cheapest, then moving the least; at most maxSetsPerNode of
// them, found in at most maxVisits steps. None when the node lacks
// nothing: moves do not help there.
func (m *MakeRoom) roomSets(ni fwk.NodeInfo, need v1.ResourceList, movable []*v1.Pod) []roomSet {
	lacks := lacking(ni, need)
	if len(lacks) == 0 {
		return nil
	}
	classes := m.classes(movable, lacks)
	k := int(m.args.MaxMovesPerPod)
	// most[i][d] is the most one pod of classes[i:] frees of lacks[d]: what
	// the pods left to choose may add at most.
	most := make([][]int64, len(classes)+1)
	most[len(classes)] = make([]int64, len(lacks))
	for i := len(classes) - 1; i >= 0; i-- {
		most[i] = slices.Clone(most[i+1])
		for d, f := range classes[i].frees {
			most[i][d] = max(most[i][d], f)
		}
	}
	enough := func(freed []int64) bool {
		for d, l := range lacks {
			if freed[d] < l.lack {
				return false
			}
		}
		return true
	}

	var out []roomSet
	visits := 0
	freed := make([]int64, len(lacks))
	taken := make([]int, len(classes))
	var chosen []int // class indexes, nondecreasing
	var walk func(from, size int)
	walk = func(from, size int) {
		if visits++; visits > maxVisits {
			return
		}
		if len(chosen) == size {
			if enough(freed) && m.minimal(chosen, classes, freed, enough) {
				out = append(out, m.roomSet(ni, lacks, chosen, classes, taken))
			}
			return
		}
		if enough(freed) {
			return // a set with more pods than needed
		}
		left := int64(size - len(chosen))
		for d, l := range lacks {
			if freed[d]+left*most[from][d] < l.lack {
				return
			}
		}
		for c := from; c < len(classes); c++ {
			if taken[c] == len(classes[c].pods) {
				continue
			}
			taken[c]++
			chosen = append(chosen, c)
			for d, f := range classes[c].frees {
				freed[d] += f
			}
			walk(c, size)
			for d, f := range classes[c].frees {
				freed[d] -= f
			}
			chosen = chosen[:len(chosen)-1]
			taken[c]--
		}
	}
	for size := 1; size <= k && len(out) < maxSetsPerNode && visits <= maxVisits; size++ {
		walk(0, size)
	}
	slices.SortStableFunc(out, func(a, b roomSet) int {
		return cmp.Or(cmp.Compare(len(a.pods), len(b.pods)), cmp.Compare(a.cost, b.cost), cmp.Compare(a.moved, b.moved))
	})
	return out[:min(len(out), maxSetsPerNode)]
}

// minimal says whether no pod of the chosen classes, which free freed
// together, could be left out.
func (m *MakeRoom) minimal(chosen []int, classes []class, freed []int64, enough func([]int64) bool) bool {
	without := make([]int64, len(freed))
	for i, c := range chosen {
		if i > 0 && chosen[i-1] == c {
			continue
		}
		for d := range freed {
			without[d] = freed[d] - classes[c].frees[d]
		}
		if enough(without) {
			return false
		}
	}
	return true
}

// roomSet is the set of the cheapest pods of the chosen classes.
func (m *MakeRoom) roomSet(ni fwk.NodeInfo, lacks []short, chosen []int, classes []class, taken []int) roomSet {
	s := roomSet{node: ni.Node().Name, free: roomOn(ni)}
	for i, c := range chosen {
		if i > 0 && chosen[i-1] == c {
			continue
		}
		s.pods = append(s.pods, classes[c].pods[:taken[c]]...)
	}
	// The shares in a fixed order: a sum's last bits do not depend on it.
	alloc := ni.GetAllocatable()
	shares := []short{{name: v1.ResourceCPU, of: alloc.GetMilliCPU()}, {name: v1.ResourceMemory, of: alloc.GetMemory()}}
	for _, l := range lacks {
		if l.name != v1.ResourcePods && l.name != v1.ResourceCPU && l.name != v1.ResourceMemory {
			shares = append(shares, l)
		}
	}
	for _, p := range s.pods {
		s.cost += disruption.Cost(p)
		r := m.requestsOf(p)
		for _, sh := range shares {
			if q, ok := r[sh.name]; ok && sh.of > 0 {
				s.moved += float64(requests.Units(sh.name, q)) / float64(sh.of)
			}
		}
	}
	return s
}

// lacking lists what ni lacks for need, by name; nothing when it fits.
func lacking(ni fwk.NodeInfo, need v1.ResourceList) []short {
	alloc := ni.GetAllocatable()
	var out []short
	if n, most := len(ni.GetPods())+1, alloc.GetAllowedPodNumber(); n > most {
		out = append(out, short{name: v1.ResourcePods, lack: int64(n - most), of: int64(most)})
	}
	for r, q := range need {
		if r == v1.ResourcePods {
			continue
		}
		requested, of := requests.OnNode(ni, r)
		if ask, free := requests.Units(r, q), of-requested; ask > free {
			out = append(out, short{name: r, lack: ask - free, of: of})
		}
	}
	slices.SortFunc(out, func(a, b short) int { return cmp.Compare(a.name, b.name) })
	return out
}

// classes groups the movable pods by shape, those that free nothing the
// node lacks left out; biggest first, then the cheapest, then by name.
func (m *MakeRoom) classes(movable []*v1.Pod, lacks []short) []class {
	var out []class
	index := map[string]int{}
	for _, p := range movable {
		key := m.shapeOf(p)
		if key == "" {
			key = "uid:" + string(p.UID) // a class of its own
		}
		if i, ok := index[key]; ok {
			if i >= 0 {
				out[i].pods = append(out[i].pods, p)
			}
			continue
		}
		r := m.requestsOf(p)
		c := class{pods: []*v1.Pod{p}, frees: make([]int64, len(lacks)), size: r.Cpu().MilliValue()*1024 + r.Memory().Value()/(1<<20)}
		helps := false
		for d, l := range lacks {
			if l.name == v1.ResourcePods {
				c.frees[d] = 1
			} else if q, ok := r[l.name]; ok {
				c.frees[d] = requests.Units(l.name, q)
			}
			helps = helps || c.frees[d] > 0
		}
		if !helps {
			index[key] = -1
			continue
		}
		index[key] = len(out)
		out = append(out, c)
	}
	byCost := func(a, b *v1.Pod) int {
		return cmp.Or(cmp.Compare(disruption.Cost(a), disruption.Cost(b)), cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name))
	}
	for i := range out {
		slices.SortStableFunc(out[i].pods, byCost)
	}
	slices.SortStableFunc(out, func(a, b class) int {
		return cmp.Or(cmp.Compare(b.size, a.size), byCost(a.pods[0], b.pods[0]))
	})
	return out
}

// room is what a node has free, or what a pod takes: CPU (millicores),
// memory and pod slots.
type room struct{ cpu, memory, slots int64 }

func (r room) holds(q room) bool { return q.cpu <= r.cpu && q.memory <= r.memory && q.slots <= r.slots }

// rooms counts the nodes by what they have free.
func rooms(nodes []fwk.NodeInfo) map[room]int {
	out := map[room]int{}
	for _, ni := range nodes {
		out[roomOn(ni)]++
	}
	return out
}

// roomOn is what ni has free.
func roomOn(ni fwk.NodeInfo) room {
	alloc, used := ni.GetAllocatable(), ni.GetRequested()
	return room{alloc.GetMilliCPU() - used.GetMilliCPU(), alloc.GetMemory() - used.GetMemory(), int64(alloc.GetAllowedPodNumber() - len(ni.GetPods()))}
}

// takes is what pod takes on a node.
func (m *MakeRoom) takes(pod *v1.Pod) room {
	r := m.requestsOf(pod)
	return room{r.Cpu().MilliValue(), r.Memory().Value(), 1}
}

// placeable says whether the pods could all go to other nodes than
// source, each to one with the CPU, memory and pod slot it takes left once
// those before it landed: free counts the nodes by their free room. It is
// what any set of moves that holds needs, whatever the schedulers choose,
// so a set without it is not simulated. It tries every node for each pod,
// nodes with the same room once, at most maxVisits steps; it says true
// when it cannot tell.
func (m *MakeRoom) placeable(pods []*v1.Pod, source room, free map[room]int) bool {
	free[source]--
	defer func() { free[source]++ }()
	kinds := make([]room, 0, len(free))
	for r := range free {
		kinds = append(kinds, r)
	}
	// The tightest first: a pod that fits there leaves the most elsewhere.
	slices.SortFunc(kinds, func(a, b room) int {
		return cmp.Or(cmp.Compare(a.cpu, b.cpu), cmp.Compare(a.memory, b.memory), cmp.Compare(a.slots, b.slots))
	})
	takes := make([]room, len(pods))
	for i, p := range pods {
		takes[i] = m.takes(p)
	}
	slices.SortFunc(takes, func(a, b room) int {
		return cmp.Or(cmp.Compare(b.cpu, a.cpu), cmp.Compare(b.memory, a.memory))
	})
	visits := 0
	var place func(i int) bool
	place = func(i int) bool {
		if i == len(takes) {
			return true
		}
		for _, r := range kinds {
			if free[r] <= 0 || !r.holds(takes[i]) {
				continue
			}
			if visits++; visits > maxVisits {
				return true
			}
			left := room{r.cpu - takes[i].cpu, r.memory - takes[i].memory, r.slots - takes[i].slots}
			free[r]--
			free[left]++
			// A kind of room first seen here is tried by the pods after.
			added := free[left] == 1
			if added {
				kinds = append(kinds, left)
			}
			ok := place(i + 1)
			if added {
				kinds = slices.Delete(kinds, len(kinds)-1, len(kinds))
			}
			free[left]--
			if free[left] == 0 {
				delete(free, left)
			}
			free[r]++
			if ok {
				return true
			}
		}
		return false
	}
	return place(0)
}
