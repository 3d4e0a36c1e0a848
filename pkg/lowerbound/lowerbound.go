// Package lowerbound bounds from below the number of nodes that can hold a
// set of pods on a fleet of unlike nodes: the fewest nodes such that every
// pod is on a node it is allowed on, and on each node the pods' demands of
// every resource (CPU, memory, pod slots, GPUs, DRA devices...) add up to
// no more than its capacity.
//
// Nodes come as classes (a capacity vector and how many nodes have it), pods
// as groups (a demand vector, how many pods ask it, and the classes they are
// allowed on). The bound is that of the linear programming relaxation
//
//	minimize   Σ_c x_c
//	subject to Σ_{c ∈ A(g)} y_gc = n_g                  for each group g
//	           Σ_g (d_gr / cap_cr) · y_gc ≤ x_c           for each class c, resource r
//	           Σ_{g ∈ S_crk} y_gc ≤ k · x_c               for each class c, resource r, k ≤ 4
//	           x_c ≤ count_c,  x, y ≥ 0
//
// (x_c: nodes of class c used; y_gc: pods of group g on class c; S_crk: the
// groups of which at most k pods fit a node of class c by resource r,
// those with d_gr > cap_cr/(k+1)), rounded up. Any placement gives a
// solution of it whose objective is its number of nodes, so its optimum,
// rounded up, is at most the optimum placement's.
//
// The program is solved by a simplex of its own (simplex.go: gonum's
// lp.Simplex, dense LU solves of the basis at every pivot and Bland's rule
// alone, took seconds where this takes milliseconds, failed on a singular
// basis at the size of a 5,000-node fleet, and gives no dual prices). Its
// answer is not trusted as it stands: the bound is computed from the
// solution's dual prices, as a certificate that holds whatever prices it is
// given (certify), so that neither float error, nor an early stop, nor a
// program made smaller by merging makes it exceed the optimum. The bound is
// also never below the per-resource bound (PerResource), which counts each
// resource on its own, nodes largest first.
//
// Programs are kept small (maxEntries, maxWork): alike classes and groups
// merge first; past that, groups of close demands merge, then classes of
// close capacities, more and more coarsely; and where even the coarsest is
// too large, the bound is the per-resource bound alone.
package lowerbound

import (
	"cmp"
	"math"
	"math/bits"
	"slices"
	"strconv"
)

// Class is a kind of node: the capacity of each resource one node of it
// has (indexed like Group.Demand; a missing entry is 0), and how many nodes
// there are of it.
type Class struct {
	Capacity []int64
	Count    int
}

// Group is a kind of pod: the demand of each resource one pod of it has,
// how many pods there are of it, and the indices of the classes whose nodes
// it is allowed on (by node selectors, affinity, taints...). A pod is also
// kept off classes whose capacity of one resource is less than its demand.
type Group struct {
	Demand  []int64
	Count   int
	Allowed []int
}

// Result is a bound and how it was reached.
type Result struct {
	// Nodes is the bound: the larger of the program's (LP) rounded up and
	// PerResource. More than the classes' nodes (Infeasible) says that no
	// placement exists (not every such case is told: only when the program
	// falls short by a sixteenth of a node or more).
	Nodes int
	// PerResource is the most nodes any one resource needs, counted on its
	// own: nodes largest first until their capacity covers the demand.
	PerResource int
	// LP is the program's optimum as certified (see certify), when Solved
	// (false when there were no pods to place, or no program small
	// enough).
	LP     float64
	Solved bool
	// ClassBits is 0 when the classes were taken as given; otherwise their
	// capacities were rounded up to this many significant bits, and classes
	// alike once rounded merged, to make the program small enough: the
	// bound stays valid, only looser. GroupBits likewise says how coarsely
	// groups of pods alike were merged into one for the program (by their
	// demands to this many significant bits of the largest capacity),
	// which loosens the bound too but never makes it invalid: the bound is
	// certified on the groups as given (see certify).
	ClassBits, GroupBits int
	// Classes and Groups are the sizes of the program solved, after alike
	// classes and groups were merged.
	Classes, Groups int
	// Unplaceable counts the pods allowed on no class that can hold one of
	// them. They are left out of the bound (no placement holds them at all).
	Unplaceable int
	// Infeasible: Nodes is more than the classes have (see Nodes).
	Infeasible bool
}

// maxEntries caps the simplex tableau (rows × columns, 8 bytes each): a
// program larger than this is made smaller by merging alike groups, then
// classes, more and more coarsely (Result.GroupBits, ClassBits); when even
// the coarsest leaves it larger, Compute gives the per-resource bound
// alone. Rows are about groups + classes × (resources + cuts + 1), columns
// about the (group, allowed class) pairs plus the rows.
var maxEntries = 2_500_000

// maxWork caps the entries the pivots of one solve update (about as many
// multiply-adds, a few hundred milliseconds): a solve that reaches it
// stops, its prices certified as they are (a looser bound), and Compute
// tries the next, coarser program.
var maxWork = 100_000_000

// classLevels and groupLevels are the roundings Compute tries in turn, in
// significant bits (0: none), all of the groups' for each of the classes'.
var (
	classLevels = []int{0, 10, 6, 4, 3, 2}
	groupLevels = []int{0, 6, 5, 4, 3, 2, 1}
)

// maxCut is the largest k of the cuts Σ_{g ∈ S_crk} y_gc ≤ k · x_c.
const maxCut = 4

// Bound is Compute(classes, groups).Nodes.
func Bound(classes []Class, groups []Group) int { return Compute(classes, groups).Nodes }

// group is a Group with a positive count, its allowed classes those that
// can hold one of its pods, sorted, and its demand of every resource.
type group struct {
	demand  []int64
	count   int
	allowed []int
}

// Compute bounds the nodes that can hold groups on classes.
func Compute(classes []Class, groups []Group) Result {
	var res Result
	dims := 0
	for _, c := range classes {
		dims = max(dims, len(c.Capacity))
	}
	for _, g := range groups {
		dims = max(dims, len(g.Demand))
	}
	caps := make([][]int64, len(classes))
	counts := make([]int, len(classes))
	total := 0
	for i, c := range classes {
		caps[i] = vector(c.Capacity, dims)
		counts[i] = max(c.Count, 0)
		total += counts[i]
	}
	var gs []group
	for _, g := range groups {
		if g.Count <= 0 {
			continue
		}
		d := vector(g.Demand, dims)
		var allowed []int
		for _, c := range g.Allowed {
			if c >= 0 && c < len(classes) && counts[c] > 0 && fits(d, caps[c]) {
				allowed = append(allowed, c)
			}
		}
		slices.Sort(allowed)
		allowed = slices.Compact(allowed)
		if len(allowed) == 0 {
			res.Unplaceable += g.Count
			continue
		}
		gs = append(gs, group{demand: d, count: g.Count, allowed: allowed})
	}
	res.PerResource = perResource(caps, counts, gs, dims)
	res.Nodes = res.PerResource
	if len(gs) > 0 {
	levels:
		for _, cb := range classLevels {
			m := mergeClasses(caps, counts, gs, dims, cb)
			if m.leastEntries() > maxEntries {
				continue
			}
			for _, gb := range groupLevels {
				p := m.mergeGroups(gs, gb)
				if p.entries() > maxEntries {
					continue
				}
				// A solve stopped short of the optimum gives a bound all
				// the same; a coarser program may give a better one.
				f, ok, optimal := p.solve(gs)
				if ok && (!res.Solved || f.value > res.LP) {
					res.ClassBits, res.GroupBits, res.Classes, res.Groups = cb, gb, len(p.caps), len(p.groups)
					res.LP, res.Solved = f.value, true
					res.Nodes = max(res.Nodes, f.ceil())
				}
				if optimal {
					break levels
				}
			}
		}
	}
	res.Infeasible = res.Nodes > total
	return res
}

// vector is v as dims values, missing ones 0 and negative ones 0.
func vector(v []int64, dims int) []int64 {
	out := make([]int64, dims)
	for i, q := range v {
		out[i] = max(q, 0)
	}
	return out
}

func fits(demand, capacity []int64) bool {
	for r, d := range demand {
		if d > capacity[r] {
			return false
		}
	}
	return true
}

// perResource is the most nodes one resource needs: for each, the nodes,
// largest first, whose capacity adds up to the demand; one more than the
// classes' nodes when they cannot hold it.
func perResource(caps [][]int64, counts []int, gs []group, dims int) int {
	total := 0
	for _, n := range counts {
		total += n
	}
	bound := 0
	order := make([]int, len(caps))
	for r := 0; r < dims; r++ {
		var want float64
		for _, g := range gs {
			want += float64(g.demand[r]) * float64(g.count)
		}
		if want <= 0 {
			continue
		}
		want *= 1 - 1e-12 // float error errs low
		for i := range order {
			order[i] = i
		}
		slices.SortFunc(order, func(a, b int) int { return cmp.Compare(caps[b][r], caps[a][r]) })
		n, have := total+1, 0.0
		used := 0
		for _, c := range order {
			size := float64(caps[c][r])
			if size <= 0 || counts[c] == 0 {
				continue
			}
			if have+size*float64(counts[c]) >= want {
				n = used + int(math.Ceil((want-have)/size))
				break
			}
			have += size * float64(counts[c])
			used += counts[c]
		}
		bound = max(bound, n)
	}
	return bound
}

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

// cut is a row Σ_{g ∈ S} y_gc ≤ k · x_c, S the groups allowed on c with
// demand of r more than cap_cr/(k+1); for a resource row, k is 0.
type cut struct {
	class, resource, k int
	slack              int // its slack's column
}

// layout is the program's rows and columns.
type layout struct {
	rows []row
	n    int   // columns
	cuts []cut // the resource rows (k 0) and cut rows, with their slacks
	arts int   // the first artificial column (the coverage rows' basics)
}

// build lays out the program: columns x_c; e_c, nodes of class c beyond
// its count, at a cost that makes them unattractive (the program stays
// feasible whatever the counts, and where the classes cannot hold the pods
// the bound says so); y_gc for each group and allowed class; then a slack
// for each resource, cut and count row (x_c − e_c ≤ count_c) and an
// artificial for each coverage row. Its duals are those of the program in
// the package's comment where it uses no e_c.
func (p *problem) build() layout {
	classes := len(p.caps)
	var l layout
	col := 2 * classes
	type entry struct{ g, col int }
	on := make([][]entry, classes)
	ys := make([][]int, len(p.groups))
	for g, gr := range p.groups {
		for _, c := range gr.allowed {
			on[c] = append(on[c], entry{g, col})
			ys[g] = append(ys[g], col)
			col++
		}
	}
	var rows []row
	for c := range classes {
		for r := range p.dims {
			capacity := p.caps[c][r]
			if capacity <= 0 {
				continue
			}
			var cols []int
			var vals []float64
			for _, e := range on[c] {
				if d := p.groups[e.g].demand[r]; d > 0 {
					cols, vals = append(cols, e.col), append(vals, float64(d)/float64(capacity))
				}
			}
			if len(cols) == 0 {
				continue
			}
			rows = append(rows, row{cols: append(cols, c), vals: append(vals, -1), basic: col})
			l.cuts = append(l.cuts, cut{class: c, resource: r, k: 0, slack: col})
			col++
			members := 0
			for k := 1; k <= maxCut; k++ {
				var cols []int
				useful := false
				for _, e := range on[c] {
					// more than cap/(k+1): at most k of them fit a node
					if d := p.groups[e.g].demand[r]; d > capacity/int64(k+1) {
						cols = append(cols, e.col)
						// fewer than k+1 fit, and more than cap/d would:
						// the resource row does not already say it
						useful = useful || d*int64(k) < capacity
					}
				}
				if len(cols) == members || !useful {
					members = len(cols)
					continue
				}
				members = len(cols)
				vals := make([]float64, len(cols))
				for i := range vals {
					vals[i] = 1
				}
				rows = append(rows, row{cols: append(cols, c), vals: append(vals, -float64(k)), basic: col})
				l.cuts = append(l.cuts, cut{class: c, resource: r, k: k, slack: col})
				col++
			}
		}
		rows = append(rows, row{cols: []int{c, classes + c}, vals: []float64{1, -1}, rhs: float64(p.counts[c]), basic: col})
		col++
	}
	l.arts = col
	for g, gr := range p.groups {
		vals := make([]float64, len(ys[g]))
		for i := range vals {
			vals[i] = 1
		}
		rows = append(rows, row{cols: ys[g], vals: vals, rhs: float64(gr.count), basic: col})
		col++
	}
	l.rows, l.n = rows, col
	return l
}

// entries is the size of the program's tableau, without laying it out.
func (p *problem) entries() int {
	classes := len(p.caps)
	pairs := 0
	for _, g := range p.groups {
		pairs += len(g.allowed)
	}
	// at most dims × (1 + maxCut) resource and cut rows and a count row a class
	rows := len(p.groups) + classes*(p.dims*(1+maxCut)+1)
	return (rows + 1) * (2*classes + pairs + rows + 1)
}

// solution is a certified value of the program.
type solution struct {
	value, scale float64
}

// ceil is the value rounded up, after an allowance for float error that
// errs low.
func (s solution) ceil() int {
	return int(math.Ceil(s.value - 1e-9*(1+s.scale)))
}

// solve solves the program and certifies its value for the groups gs it
// was reduced from; ok says whether it found prices to certify, optimal
// whether the simplex reached the program's optimum.
func (p *problem) solve(gs []group) (s solution, ok, optimal bool) {
	l := p.build()
	tb, optimal := l.run(p)
	if tb == nil {
		return solution{}, false, false
	}
	w := make([]float64, len(l.cuts))
	for i, c := range l.cuts {
		w[i] = max(tb.reduced(c.slack), 0)
	}
	s = p.certify(gs, l.cuts, w)
	ok = !math.IsNaN(s.value) && !math.IsInf(s.value, 0)
	return s, ok, optimal
}

// run solves the program laid out: phase I from the artificial basis, then
// phase II. It says whether phase II reached the optimum; the tableau is
// nil when phase I found no feasible basis (it ran out of iterations or
// work).
func (l layout) run(p *problem) (*tableau, bool) {
	tb := newTableau(l.n, l.rows, maxWork)
	iterations := 20*(len(l.rows)+l.n) + 1000
	phase1 := make([]float64, l.n)
	want := 0.0
	for j := l.arts; j < l.n; j++ {
		phase1[j] = 1
	}
	for _, g := range p.groups {
		want += float64(g.count)
	}
	tb.price(phase1)
	tb.optimize(iterations)
	if tb.value() > 1e-7*(1+want) {
		return nil, false
	}
	// Artificials left in the basis, at zero, give way to other columns
	// where their row has one; a row with none is redundant and stays so.
	for i := 0; i < tb.m; i++ {
		if tb.basis[i] < l.arts {
			continue
		}
		line, j := tb.line(i), -1
		for k := 0; k < l.arts; k++ {
			if math.Abs(line[k]) > pivotTol && (j < 0 || math.Abs(line[k]) > math.Abs(line[j])) {
				j = k
			}
		}
		if j >= 0 {
			tb.pivot(i, j)
		}
	}
	for j := l.arts; j < l.n; j++ {
		tb.banned[j] = true
	}
	classes := len(p.caps)
	total := 0
	for _, n := range p.counts {
		total += n
	}
	phase2 := make([]float64, l.n)
	for c := range classes {
		phase2[c] = 1
		// Dear enough that the optimum uses no extra node where the
		// classes can hold the pods, and that where they cannot by a
		// sixteenth of a node or more, the bound exceeds their nodes.
		phase2[classes+c] = 16 * (float64(total) + 1)
	}
	tb.price(phase2)
	return tb, tb.optimize(iterations)
}

// certify is the bound that prices w (one for each resource and cut row,
// ≥ 0) prove, for the groups gs given to reduce (their own demands, not
// rounded), whether or not the prices are the program's optimal duals.
//
// Let a pod of group g on a node of class c cost
//
//	price_c(g) = Σ_r w_cr · d_gr / cap_cr + Σ_{k: d_gr > cap_cr/(k+1)} w_crk
//
// and let a node of class c be worth L_c = Σ_r w_cr + Σ_k k · w_crk. The pods
// on one node of class c cost at most L_c: their demands of r add up to at
// most cap_cr, and at most k of them have d_gr > cap_cr/(k+1). So if a
// placement uses m_c ≤ count_c nodes of class c, then, with u_g the least
// price_c(g) over g's allowed classes,
//
//	Σ_g n_g u_g ≤ Σ_c m_c L_c ≤ Σ_c m_c + Σ_c count_c · max(0, L_c − 1),
//
// and Σ_c m_c, the placement's nodes, is at least
// Σ_g n_g u_g − Σ_c count_c · max(0, L_c − 1), whatever the prices. (This
// is the program's dual objective; at the dual optimum it is the
// program's optimum.) Merged classes keep this true: a merged class has
// the largest capacities of its members and all their nodes.
func (p *problem) certify(gs []group, cuts []cut, w []float64) solution {
	classes := len(p.caps)
	worth := make([]float64, classes)
	byClass := make([][]int, classes)
	for i, c := range cuts {
		byClass[c.class] = append(byClass[c.class], i)
		if c.k == 0 {
			worth[c.class] += w[i]
		} else {
			worth[c.class] += float64(c.k) * w[i]
		}
	}
	var paid, scale float64
	for i, g := range gs {
		least := math.Inf(1)
		for _, c := range p.of[i] {
			price := 0.0
			for _, ci := range byClass[c] {
				cu := cuts[ci]
				capacity, d := p.caps[c][cu.resource], g.demand[cu.resource]
				switch {
				case cu.k == 0:
					price += w[ci] * float64(d) / float64(capacity)
				case d > capacity/int64(cu.k+1):
					price += w[ci]
				}
			}
			least = min(least, price)
		}
		paid += float64(g.count) * least
	}
	scale = paid
	for c := range classes {
		if over := worth[c] - 1; over > 0 {
			paid -= float64(p.counts[c]) * over
			scale += float64(p.counts[c]) * over
		}
	}
	return solution{value: paid, scale: scale}
}
