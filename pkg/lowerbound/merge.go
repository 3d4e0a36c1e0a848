package lowerbound

import (
	"math"
	"math/bits"
	"slices"
	"strconv"
)

// roundUp keeps the top b significant bits of v, rounding up (b 0: v).
func roundUp(v int64, b int) int64 {
	down := roundDown(v, b)
	if down == v {
		return v
	}
	up := down + int64(1)<<(bits.Len64(uint64(v))-b)
	if up < v {
		return math.MaxInt64 // overflow
	}
	return up
}

// roundDown keeps the top b significant bits of v (b 0: v).
func roundDown(v int64, b int) int64 {
	l := bits.Len64(uint64(v))
	if b == 0 || v <= 0 || l <= b {
		return v
	}
	return v &^ (int64(1)<<(l-b) - 1)
}

// bucket is the bucket of a demand d, of a resource whose largest
// capacity is most, where groups are merged at b bits: d in units of a
// 2^(b+3)-th of most, to b significant bits. Small demands share buckets
// of one unit, larger ones buckets of a 2^b-th of their size.
func bucket(d, most int64, b int) int64 {
	if b == 0 || most <= 0 {
		return d
	}
	units := int64(math.Round(float64(d) / float64(most) * float64(int64(1)<<(b+3))))
	return roundDown(units, b)
}

// problem is a program to solve: classes (merged), groups (merged, their
// allowed classes indices of caps) and, for each group given to reduce,
// its allowed classes among these.
type problem struct {
	dims   int
	caps   [][]int64
	counts []int
	groups []group
	of     [][]int // of[i]: the classes of the i-th group given
}

// reduce is mergeClasses(caps, counts, gs, dims, cb).mergeGroups(gs, gb).
func reduce(caps [][]int64, counts []int, gs []group, dims, cb, gb int) *problem {
	return mergeClasses(caps, counts, gs, dims, cb).mergeGroups(gs, gb)
}

// mergeClasses merges classes that are alike: the same capacity once
// rounded up to cb bits, allowed to the same groups (merged, a class has
// the largest capacities and all the nodes: where cb is 0, merged classes
// are interchangeable). Classes no group is allowed on are left out: no
// placement uses them. The problem has no groups yet.
func mergeClasses(caps [][]int64, counts []int, gs []group, dims, cb int) *problem {
	allowing := make([][]int, len(caps))
	for i, g := range gs {
		for _, c := range g.allowed {
			allowing[c] = append(allowing[c], i)
		}
	}
	p := &problem{dims: dims, of: make([][]int, len(gs))}
	merged := make([]int, len(caps))
	ids := map[string]int{}
	var key []byte
	for c := range caps {
		merged[c] = -1
		if len(allowing[c]) == 0 {
			continue
		}
		key = key[:0]
		rounded := make([]int64, dims)
		for r, q := range caps[c] {
			rounded[r] = roundUp(q, cb)
			key = strconv.AppendInt(key, rounded[r], 36)
			key = append(key, ',')
		}
		key = append(key, '|')
		for _, g := range allowing[c] {
			key = strconv.AppendInt(key, int64(g), 36)
			key = append(key, ',')
		}
		id, ok := ids[string(key)]
		if !ok {
			id = len(p.caps)
			ids[string(key)] = id
			p.caps, p.counts = append(p.caps, rounded), append(p.counts, 0)
		}
		merged[c] = id
		p.counts[id] += counts[c]
	}
	for i, g := range gs {
		allowed := make([]int, 0, len(g.allowed))
		for _, c := range g.allowed {
			allowed = append(allowed, merged[c])
		}
		slices.Sort(allowed)
		p.of[i] = slices.Compact(allowed)
	}
	return p
}

// leastEntries is the least tableau that merging groups, however
// coarsely, can make of p's classes: one group for each set of allowed
// classes, a pod slot row and a count row a class.
func (p *problem) leastEntries() int {
	sets := map[string]bool{}
	pairs := 0
	var key []byte
	for _, allowed := range p.of {
		key = key[:0]
		for _, c := range allowed {
			key = strconv.AppendInt(key, int64(c), 36)
			key = append(key, ',')
		}
		if !sets[string(key)] {
			sets[string(key)] = true
			pairs += len(allowed)
		}
	}
	classes := len(p.caps)
	rows := len(sets) + 2*classes
	return (rows + 1) * (2*classes + pairs + rows + 1)
}

// mergeGroups is p, its classes merged, with groups alike merged: allowed
// on the same classes, their demands in the same buckets at gb bits (each
// resource's), into one of their mean demand.
func (p *problem) mergeGroups(gs []group, gb int) *problem {
	out := &problem{dims: p.dims, caps: p.caps, counts: p.counts, of: p.of}
	most := make([]int64, p.dims)
	for _, c := range p.caps {
		for r, q := range c {
			most[r] = max(most[r], q)
		}
	}
	ids := map[string]int{}
	var key []byte
	var sums [][]float64
	for i, g := range gs {
		allowed := p.of[i]
		key = key[:0]
		for r, q := range g.demand {
			key = strconv.AppendInt(key, bucket(q, most[r], gb), 36)
			key = append(key, ',')
		}
		key = append(key, '|')
		for _, c := range allowed {
			key = strconv.AppendInt(key, int64(c), 36)
			key = append(key, ',')
		}
		id, ok := ids[string(key)]
		if !ok {
			id = len(out.groups)
			ids[string(key)] = id
			out.groups = append(out.groups, group{demand: slices.Clone(g.demand), allowed: allowed})
			sums = append(sums, make([]float64, p.dims))
		}
		out.groups[id].count += g.count
		for r, q := range g.demand {
			sums[id][r] += float64(q) * float64(g.count)
		}
	}
	if gb == 0 {
		return out // merged only when alike: the demand is theirs
	}
	for i := range out.groups {
		g := &out.groups[i]
		for r := range g.demand {
			// the mean, no more than the capacities the members fit
			g.demand[r] = int64(math.Floor(sums[i][r] / float64(g.count)))
		}
	}
	return out
}
