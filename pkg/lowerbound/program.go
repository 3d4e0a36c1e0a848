package lowerbound

import "math"

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
