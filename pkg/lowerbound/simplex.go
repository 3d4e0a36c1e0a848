package lowerbound

import "math"

// A dense tableau simplex for the small linear programs of Compute:
//
//	minimize cost·x  s.t.  row_i·x + b_i = rhs_i,  x ≥ 0,  rhs_i ≥ 0,
//
// where each row names its own basic column b_i (a slack, or an artificial
// that only phase I may use), so that the origin is a basis. Nothing here
// has to be exact: Compute never trusts the optimum it reaches, only the
// dual prices it reads off the final tableau, which it checks itself
// (certify). A solve that stops early, or pivots badly, gives a weaker
// bound, never a wrong one.

// row is one constraint, sparse: the coefficient vals[k] of column cols[k]
// (not the basic column, whose coefficient is 1).
type row struct {
	cols  []int
	vals  []float64
	rhs   float64
	basic int
}

// tableau is the simplex tableau: m constraint rows and the objective row
// (reduced costs, and minus the objective's value in the rhs column), each
// n+1 wide, the last column the right-hand side.
type tableau struct {
	m, n   int
	t      []float64
	basis  []int
	banned []bool // columns that may not enter the basis
	nz     []int  // scratch: the pivot row's nonzero columns
	// work counts the entries pivots updated and scans read, against
	// budget: a solve that would take too long stops instead.
	work, budget int
}

const (
	pivotTol   = 1e-9  // coefficients smaller than this are not pivots
	costTol    = 1e-9  // reduced costs above -costTol do not improve
	harrisTol  = 1e-9  // the ratio test's slack on primal feasibility
	zeroTol    = 1e-13 // entries smaller than this are set to zero
	blandAfter = 100   // degenerate pivots in a row before Bland's rule
)

func newTableau(n int, rows []row, budget int) *tableau {
	m := len(rows)
	tb := &tableau{m: m, n: n, t: make([]float64, (m+1)*(n+1)), basis: make([]int, m), banned: make([]bool, n), budget: budget}
	for i, r := range rows {
		line := tb.line(i)
		for k, j := range r.cols {
			line[j] += r.vals[k]
		}
		line[r.basic] = 1
		line[n] = r.rhs
		tb.basis[i] = r.basic
	}
	return tb
}

func (tb *tableau) line(i int) []float64 { return tb.t[i*(tb.n+1) : (i+1)*(tb.n+1)] }

// price sets the objective row to the reduced costs of cost in the current
// basis: cost_j - Σ_i cost_basis(i) · t_ij, and its value.
func (tb *tableau) price(cost []float64) {
	obj := tb.line(tb.m)
	copy(obj, cost)
	obj[tb.n] = 0
	for i := 0; i < tb.m; i++ {
		cb := cost[tb.basis[i]]
		if cb == 0 {
			continue
		}
		for j, v := range tb.line(i) {
			if v != 0 {
				obj[j] -= cb * v
			}
		}
	}
	for i := 0; i < tb.m; i++ {
		obj[tb.basis[i]] = 0
	}
}

// value is the objective's value at the current basis.
func (tb *tableau) value() float64 { return -tb.line(tb.m)[tb.n] }

// reduced is the objective row's reduced cost of column j.
func (tb *tableau) reduced(j int) float64 { return tb.line(tb.m)[j] }

func (tb *tableau) pivot(r, j int) {
	w := tb.n + 1
	pr := tb.line(r)
	inv := 1 / pr[j]
	nz := tb.nz[:0]
	for k, v := range pr {
		if v != 0 {
			v *= inv
			if math.Abs(v) < zeroTol {
				v = 0
			} else {
				nz = append(nz, k)
			}
			pr[k] = v
		}
	}
	pr[j] = 1
	tb.nz = nz
	for i := 0; i <= tb.m; i++ {
		if i == r {
			continue
		}
		other := tb.t[i*w : (i+1)*w]
		f := other[j]
		if f == 0 {
			continue
		}
		tb.work += len(nz)
		for _, k := range nz {
			v := other[k] - f*pr[k]
			if math.Abs(v) < zeroTol {
				v = 0
			}
			other[k] = v
		}
		other[j] = 0
		if i < tb.m && other[tb.n] < 0 && other[tb.n] > -harrisTol*10 {
			other[tb.n] = 0 // a feasible basis that float error nudged below zero
		}
	}
	tb.basis[r] = j
}

// optimize runs the simplex on the objective row until no column improves
// it, or iterations or the work budget run out; it says whether it reached
// an optimum.
func (tb *tableau) optimize(iterations int) bool {
	obj := tb.line(tb.m)
	degenerate := 0
	for it := 0; it < iterations && tb.work < tb.budget; it++ {
		bland := degenerate >= blandAfter
		tb.work += tb.n + 2*tb.m // the pricing and ratio scans
		j := -1
		best := -costTol
		for k := 0; k < tb.n; k++ {
			if d := obj[k]; d < best && !tb.banned[k] {
				j, best = k, d
				if bland {
					break // the first improving column
				}
			}
		}
		if j < 0 {
			return true
		}
		r := tb.leaving(j, bland)
		if r < 0 {
			return false // unbounded: Compute's programs are not
		}
		if rhs := tb.line(r)[tb.n]; rhs/tb.line(r)[j] < zeroTol {
			degenerate++
		} else {
			degenerate = 0
		}
		tb.pivot(r, j)
	}
	return false
}

// leaving is the row that leaves the basis when column j enters: by
// Harris's two-pass ratio test (the largest pivot among the rows whose
// ratio is within tolerance of the least), or under Bland's rule the least
// ratio, ties to the smallest basic column. -1 when no row limits j.
func (tb *tableau) leaving(j int, bland bool) int {
	w := tb.n + 1
	slack := harrisTol
	if bland {
		slack = 0
	}
	theta := math.Inf(1)
	for i := 0; i < tb.m; i++ {
		if a := tb.t[i*w+j]; a > pivotTol {
			theta = min(theta, (tb.t[i*w+tb.n]+slack)/a)
		}
	}
	if math.IsInf(theta, 1) {
		return -1
	}
	r, big := -1, 0.0
	for i := 0; i < tb.m; i++ {
		a := tb.t[i*w+j]
		if a <= pivotTol || tb.t[i*w+tb.n]/a > theta {
			continue
		}
		if bland {
			if r < 0 || tb.basis[i] < tb.basis[r] {
				r = i
			}
		} else if a > big {
			r, big = i, a
		}
	}
	return r
}
