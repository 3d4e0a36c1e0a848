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

// Where things are: this file has the API and the per-resource bound;
// merge.go the merging that keeps programs small; program.go the program
// a merged problem makes, its solve and the certified bound; simplex.go
// the solver.

import (
	"cmp"
	"math"
	"slices"
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
