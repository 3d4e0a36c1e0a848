package lowerbound

import (
	"cmp"
	"fmt"
	"math"
	"math/rand"
	"slices"
	"testing"
)

// Resources of the tests' vectors.
const (
	cpu  = iota // millicores
	mem         // MiB
	gpu         // devices
	pods        // slots
	dims
)

// optimum is the fewest nodes that hold every pod of groups, each on a
// node of a class it is allowed on, by exhaustive search (branch and
// bound over the nodes opened so far); -1 when no placement exists.
func optimum(classes []Class, groups []Group) int {
	type pod struct {
		demand  []int64
		allowed []bool
		group   int
	}
	var ps []pod
	for gi, g := range groups {
		allowed := make([]bool, len(classes))
		for _, c := range g.Allowed {
			allowed[c] = true
		}
		for range g.Count {
			ps = append(ps, pod{demand: g.Demand, allowed: allowed, group: gi})
		}
	}
	size := func(p pod) float64 {
		s := 0.0
		for r, d := range p.demand {
			most := int64(1)
			for _, c := range classes {
				most = max(most, c.Capacity[r])
			}
			s = max(s, float64(d)/float64(most))
		}
		return s
	}
	slices.SortStableFunc(ps, func(a, b pod) int {
		if c := cmp.Compare(size(b), size(a)); c != 0 {
			return c
		}
		return cmp.Compare(a.group, b.group)
	})
	total := 0
	for _, c := range classes {
		total += c.Count
	}
	type node struct {
		class int
		free  []int64
	}
	best := total + 1
	var open []node
	opened := make([]int, len(classes))
	at := make([]int, len(ps)) // the node each pod is on
	fit := func(p pod, free []int64) bool {
		for r, d := range p.demand {
			if d > free[r] {
				return false
			}
		}
		return true
	}
	take := func(p pod, free []int64, sign int64) {
		for r, d := range p.demand {
			free[r] -= sign * d
		}
	}
	var place func(i int)
	place = func(i int) {
		if len(open) >= best {
			return
		}
		if i == len(ps) {
			best = len(open)
			return
		}
		p := ps[i]
		from := 0
		if i > 0 && ps[i-1].group == p.group {
			from = at[i-1] // alike pods in node order: no symmetric search
		}
		for n := from; n < len(open); n++ {
			if p.allowed[open[n].class] && fit(p, open[n].free) {
				take(p, open[n].free, 1)
				at[i] = n
				place(i + 1)
				take(p, open[n].free, -1)
			}
		}
		if len(open)+1 >= best {
			return
		}
		for c, cl := range classes {
			if !p.allowed[c] || opened[c] == cl.Count {
				continue
			}
			free := slices.Clone(cl.Capacity)
			if !fit(p, free) {
				continue
			}
			take(p, free, 1)
			open = append(open, node{class: c, free: free})
			opened[c]++
			at[i] = len(open) - 1
			place(i + 1)
			opened[c]--
			open = open[:len(open)-1]
		}
	}
	place(0)
	if best > total {
		return -1
	}
	return best
}

// perResourceToday is the bound as LowerBound counts it: each resource on
// its own, over all nodes, largest first, whatever the pods are allowed on.
func perResourceToday(classes []Class, groups []Group) int {
	bound := 0
	for r := range dims {
		var want int64
		for _, g := range groups {
			want += g.Demand[r] * int64(g.Count)
		}
		if want == 0 {
			continue
		}
		var sizes []int64
		for _, c := range classes {
			for range c.Count {
				sizes = append(sizes, c.Capacity[r])
			}
		}
		slices.SortFunc(sizes, func(a, b int64) int { return cmp.Compare(b, a) })
		n, sum := len(sizes), int64(0)
		for i, s := range sizes {
			if sum += s; sum >= want {
				n = i + 1
				break
			}
		}
		bound = max(bound, n)
	}
	return bound
}

// fleet is a random small heterogeneous cluster: two to four classes of
// 3 to 12 nodes in all, among CPU-only nodes (small and large) and GPU
// nodes of two models with few CPUs, tainted; and 1 to 15 pods, some
// alike (a workload's replicas), CPU pods kept off GPU nodes unless they
// tolerate the taint, GPU pods selecting a model or any.
func fleet(rng *rand.Rand) ([]Class, []Group) {
	type kind struct {
		capacity []int64
		model    int // 0: CPU only; 1, 2: GPU models
		large    bool
	}
	jitter := func(v int64) int64 { return v/2 + rng.Int63n(v) }
	kinds := []kind{
		{capacity: []int64{jitter(4000), jitter(16384), 0, 0}},
		{capacity: []int64{jitter(16000), jitter(65536), 0, 0}, large: true},
		{capacity: []int64{jitter(4000), jitter(32768), 4, 0}, model: 1},
		{capacity: []int64{jitter(8000), jitter(65536), 8, 0}, model: 2},
	}
	rng.Shuffle(len(kinds), func(i, j int) { kinds[i], kinds[j] = kinds[j], kinds[i] })
	kinds = kinds[:2+rng.Intn(3)]
	nodes := 3 + rng.Intn(10)
	classes := make([]Class, len(kinds))
	for i, k := range kinds {
		k.capacity[pods] = int64(2 + rng.Intn(8))
		if rng.Intn(4) == 0 {
			k.capacity[pods] = 110
		}
		classes[i] = Class{Capacity: k.capacity, Count: 1}
	}
	for n := len(kinds); n < nodes; n++ {
		classes[rng.Intn(len(classes))].Count++
	}
	allowed := func(model int, tolerates, large bool) []int {
		var out []int
		for i, k := range kinds {
			switch {
			case large && !k.large:
			case model > 0 && k.model != model:
			case model < 0 && k.model == 0:
			case model == 0 && k.model > 0 && !tolerates:
			default:
				out = append(out, i)
			}
		}
		return out
	}
	var groups []Group
	for want := 1 + rng.Intn(15); want > 0; {
		n := min(want, 1+rng.Intn(4))
		want -= n
		g := Group{Demand: []int64{rng.Int63n(6000), rng.Int63n(20000), 0, 1}, Count: n}
		if rng.Intn(3) == 0 {
			g.Demand[gpu] = 1 + rng.Int63n(4)
			g.Demand[cpu] = rng.Int63n(4000)
			g.Allowed = allowed(rng.Intn(3)-1, true, false) // a model, or any (-1)
			if g.Allowed == nil && rng.Intn(8) > 0 {
				g.Allowed = allowed(-1, true, false)
			}
		}
		if g.Allowed == nil {
			g.Demand[gpu] = 0
			g.Allowed = allowed(0, rng.Intn(4) == 0, rng.Intn(5) == 0)
		}
		if g.Allowed == nil && rng.Intn(8) > 0 {
			g.Allowed = allowed(0, true, false)
		}
		groups = append(groups, g)
	}
	return classes, groups
}

func podCount(groups []Group) int {
	n := 0
	for _, g := range groups {
		n += g.Count
	}
	return n
}

func TestBoundNeverAboveTheOptimum(t *testing.T) {
	rng := rand.New(rand.NewSource(51))
	runs := 3000
	if testing.Short() {
		runs = 500
	}
	tighter, infeasible, exact := 0, 0, 0
	for run := range runs {
		classes, groups := fleet(rng)
		opt := optimum(classes, groups)
		res := Compute(classes, groups)
		today := perResourceToday(classes, groups)
		what := fmt.Sprintf("run %d: classes %v, groups %v: %+v, optimum %d, per resource %d", run, classes, groups, res, opt, today)
		if (!res.Solved || res.ClassBits+res.GroupBits != 0) && res.Unplaceable < podCount(groups) {
			t.Fatalf("%s: the program was not solved as given", what)
		}
		if res.Nodes < res.PerResource || res.Unplaceable == 0 && res.Nodes < today {
			t.Errorf("%s: below the per-resource bound", what)
		}
		if opt < 0 {
			infeasible++
			continue
		}
		if res.Nodes > opt {
			t.Errorf("%s: above the optimum", what)
		}
		if res.Unplaceable > 0 || res.Infeasible {
			t.Errorf("%s: a placement exists", what)
		}
		if res.Nodes == opt {
			exact++
		}
		if res.Nodes > today {
			tighter++
		}
	}
	t.Logf("%d runs: no placement in %d; of the others, tighter than per resource in %d, the optimum in %d", runs, infeasible, tighter, exact)
	if tighter == 0 {
		t.Error("never tighter than the per-resource bound")
	}
}

// TestBoundRoundedNeverAboveTheOptimum: programs rounded to few bits to fit a
// small tableau still bound the optimum from below, at every rounding.
func TestBoundRoundedNeverAboveTheOptimum(t *testing.T) {
	defer func(n int) { maxEntries = n }(maxEntries)
	rng := rand.New(rand.NewSource(7))
	classRounded, groupRounded := 0, 0
	for run := range 600 {
		classes, groups := fleet(rng)
		// A budget that the program at these roundings just fits.
		cb, gb := classLevels[run%len(classLevels)], groupLevels[1+run%(len(groupLevels)-1)]
		maxEntries = 0
		if gs := placeable(classes, groups); len(gs) > 0 {
			maxEntries = reduce(vectors(classes), counts(classes), gs, dims, cb, gb).entries()
		}
		res := Compute(classes, groups)
		if res.ClassBits != 0 {
			classRounded++
		}
		if res.GroupBits != 0 {
			groupRounded++
		}
		opt := optimum(classes, groups)
		if opt >= 0 && res.Nodes > opt {
			t.Errorf("run %d: classes %v, groups %v: %+v, above the optimum %d", run, classes, groups, res, opt)
		}
		// And every rounding's certified bound, whichever Compute takes.
		gs := placeable(classes, groups)
		if opt < 0 || len(gs) == 0 {
			continue
		}
		for _, cb := range classLevels {
			for _, gb := range groupLevels {
				p := reduce(vectors(classes), counts(classes), gs, dims, cb, gb)
				if f, ok, _ := p.solve(gs); ok && f.ceil() > opt {
					t.Errorf("run %d at %d, %d bits: classes %v, groups %v: %v, above the optimum %d", run, cb, gb, classes, groups, f, opt)
				}
			}
		}
	}
	t.Logf("classes rounded in %d runs, groups in %d", classRounded, groupRounded)
	if classRounded == 0 || groupRounded == 0 {
		t.Error("no program was rounded")
	}
}

func vectors(classes []Class) [][]int64 {
	out := make([][]int64, len(classes))
	for i, c := range classes {
		out[i] = vector(c.Capacity, dims)
	}
	return out
}

func counts(classes []Class) []int {
	out := make([]int, len(classes))
	for i, c := range classes {
		out[i] = c.Count
	}
	return out
}

func placeable(classes []Class, groups []Group) []group {
	var out []group
	for _, g := range groups {
		var allowed []int
		for _, c := range g.Allowed {
			if fits(g.Demand, classes[c].Capacity) {
				allowed = append(allowed, c)
			}
		}
		if len(allowed) > 0 && g.Count > 0 {
			out = append(out, group{demand: g.Demand, count: g.Count, allowed: allowed})
		}
	}
	return out
}

// TestBoundDuality: the solver's primal solution is feasible and its value is
// the certified value of its duals, so both are the program's optimum.
func TestBoundDuality(t *testing.T) {
	rng := rand.New(rand.NewSource(3))
	for run := range 300 {
		classes, groups := fleet(rng)
		checkOptimal(t, fmt.Sprint("small run ", run), classes, groups)
	}
	for run := range 40 {
		classes, groups := medium(rng)
		checkOptimal(t, fmt.Sprint("medium run ", run), classes, groups)
	}
}

// medium is a random problem of 3 to 15 classes and 10 to 80 groups, each
// allowed on a random part of the classes.
func medium(rng *rand.Rand) ([]Class, []Group) {
	classes := make([]Class, 3+rng.Intn(13))
	for i := range classes {
		classes[i] = Class{Capacity: []int64{1000 + rng.Int63n(64000), 1024 + rng.Int63n(262144), rng.Int63n(3) * 4, 10 + rng.Int63n(100)}, Count: 1 + rng.Intn(40)}
	}
	groups := make([]Group, 10+rng.Intn(71))
	for i := range groups {
		g := Group{Demand: []int64{rng.Int63n(16000), rng.Int63n(65536), 0, 1}, Count: 1 + rng.Intn(60)}
		if rng.Intn(5) == 0 {
			g.Demand[gpu] = 1 + rng.Int63n(4)
		}
		for c := range classes {
			if rng.Intn(3) > 0 {
				g.Allowed = append(g.Allowed, c)
			}
		}
		groups[i] = g
	}
	return classes, groups
}

// checkOptimal solves the program of classes and groups as given and
// checks that the solution the simplex ends at is feasible and that its
// value is the certified value of its duals: both are then optimal.
func checkOptimal(t *testing.T, what string, classes []Class, groups []Group) {
	t.Helper()
	gs := placeable(classes, groups)
	if len(gs) == 0 {
		return
	}
	p := reduce(vectors(classes), counts(classes), gs, dims, 0, 0)
	l := p.build()
	tb, optimal := l.run(p)
	if !optimal {
		t.Fatalf("%s: no optimum", what)
	}
	x := make([]float64, l.n)
	for i, j := range tb.basis {
		x[j] = tb.line(i)[tb.n]
		if x[j] < -1e-9 {
			t.Fatalf("%s: column %d at %v", what, j, x[j])
		}
	}
	for i, r := range l.rows {
		lhs := x[r.basic]
		for k, j := range r.cols {
			lhs += r.vals[k] * x[j]
		}
		if math.Abs(lhs-r.rhs) > 1e-6*(1+math.Abs(r.rhs)) {
			t.Fatalf("%s: row %d: %v, want %v", what, i, lhs, r.rhs)
		}
	}
	for j := l.arts; j < l.n; j++ {
		if x[j] > 1e-9 {
			t.Fatalf("%s: artificial %d at %v", what, j, x[j])
		}
	}
	w := make([]float64, len(l.cuts))
	for i, c := range l.cuts {
		w[i] = max(tb.reduced(c.slack), 0)
	}
	cert := p.certify(gs, l.cuts, w)
	if math.Abs(cert.value-tb.value()) > 1e-6*(1+tb.value()) {
		t.Errorf("%s: primal %v, dual %v", what, tb.value(), cert.value)
	}
}

// TestBoundGPUNodesWithFewCPUs: GPU pods that need GPU nodes of few CPUs, one a
// node by CPU, while CPU-only nodes have many CPUs: counted resource by
// resource, two nodes hold their CPUs and GPUs; they need 16.
func TestBoundGPUNodesWithFewCPUs(t *testing.T) {
	classes := []Class{
		{Capacity: []int64{64000, 262144, 0, 110}, Count: 10},
		{Capacity: []int64{8000, 65536, 8, 110}, Count: 20},
	}
	groups := []Group{
		{Demand: []int64{6000, 8192, 1, 1}, Count: 16, Allowed: []int{1}},
		{Demand: []int64{500, 1024, 0, 1}, Count: 40, Allowed: []int{0}},
	}
	res := Compute(classes, groups)
	if today := perResourceToday(classes, groups); today != 2 {
		t.Errorf("per resource = %d, want 2", today)
	}
	// The optimum: 16 GPU nodes (no two 6-CPU pods share 8 CPUs; the cut
	// k=1 says so, where CPU alone would say 96 of 8: 12) and a CPU node.
	if res.Nodes != 17 || !res.Solved {
		t.Errorf("bound = %+v, want 17: 16 GPU nodes, one CPU node", res)
	}
	// 4-CPU GPU pods: two a GPU node.
	groups[0].Demand[cpu] = 4000
	if res := Compute(classes, groups); res.Nodes != 9 {
		t.Errorf("4-CPU GPU pods: bound = %+v, want 9: 8 GPU nodes, one CPU node", res)
	}
}

// TestBoundModels: pods select a GPU model by label; the other model's nodes,
// however many GPUs they have, do not count for them.
func TestBoundModels(t *testing.T) {
	classes := []Class{
		{Capacity: []int64{32000, 131072, 8, 110}, Count: 4}, // model a
		{Capacity: []int64{32000, 131072, 8, 110}, Count: 4}, // model b
	}
	groups := []Group{{Demand: []int64{1000, 1024, 2, 1}, Count: 12, Allowed: []int{0}}}
	if res := Compute(classes, groups); res.Nodes != 3 || res.PerResource != 3 {
		t.Errorf("bound = %+v, want 3", res)
	}
	groups = append(groups, Group{Demand: []int64{1000, 1024, 2, 1}, Count: 12, Allowed: []int{1}})
	res := Compute(classes, groups)
	if res.Nodes != 6 || res.PerResource != 6 {
		t.Errorf("bound = %+v, want 6", res)
	}
	groups = append(groups, Group{Demand: []int64{1000, 1024, 2, 1}, Count: 12, Allowed: []int{0}})
	res = Compute(classes, groups)
	if !res.Infeasible || res.Nodes <= 8 {
		t.Errorf("36 pods of 2 GPUs on the 4 nodes of 8 that they select: %+v, want infeasible", res)
	}
	if today := perResourceToday(classes, groups); today != 8 {
		t.Errorf("per resource = %d, want 8 (72 GPUs of 64)", today)
	}
}

func TestBoundUnplaceable(t *testing.T) {
	classes := []Class{{Capacity: []int64{4000, 8192, 0, 110}, Count: 3}}
	groups := []Group{
		{Demand: []int64{8000, 1024, 0, 1}, Count: 2, Allowed: []int{0}}, // too big
		{Demand: []int64{1000, 1024, 1, 1}, Count: 2, Allowed: []int{0}}, // no GPU
		{Demand: []int64{1000, 1024, 0, 1}, Count: 2},                    // selects nothing
		{Demand: []int64{3000, 1024, 0, 1}, Count: 2, Allowed: []int{0}},
	}
	res := Compute(classes, groups)
	if res.Unplaceable != 6 || res.Nodes != 2 {
		t.Errorf("%+v, want 6 unplaceable, 2 nodes", res)
	}
}

func TestBoundRound(t *testing.T) {
	for _, tc := range []struct {
		v        int64
		b        int
		down, up int64
	}{
		{0, 3, 0, 0}, {7, 3, 7, 7}, {8, 3, 8, 8}, {9, 3, 8, 10}, {15, 3, 14, 16}, {1000, 0, 1000, 1000}, {1023, 4, 960, 1024},
	} {
		if got := roundDown(tc.v, tc.b); got != tc.down {
			t.Errorf("roundDown(%d, %d) = %d, want %d", tc.v, tc.b, got, tc.down)
		}
		if got := roundUp(tc.v, tc.b); got != tc.up {
			t.Errorf("roundUp(%d, %d) = %d, want %d", tc.v, tc.b, got, tc.up)
		}
	}
}

// large is a fleet of 5,000 nodes and 150,000 pods: CPU-only instance
// types in three zones (which no pod selects), some nodes of each a little
// fuller of DaemonSet pods than others, and two GPU models, tainted; pods
// of 2,000 workloads, most allowed on every CPU node, some selecting an
// instance family, some GPU pods selecting a model.
func large(rng *rand.Rand) ([]Class, []Group) {
	type kind struct {
		cpu, mem, gpu int64
		family, model int
	}
	kinds := []kind{
		{cpu: 4000, mem: 16384, family: 0}, {cpu: 8000, mem: 32768, family: 0}, {cpu: 16000, mem: 65536, family: 0},
		{cpu: 8000, mem: 65536, family: 1}, {cpu: 16000, mem: 131072, family: 1}, {cpu: 32000, mem: 262144, family: 1},
		{cpu: 16000, mem: 32768, family: 2}, {cpu: 48000, mem: 98304, family: 2},
		{cpu: 8000, mem: 65536, gpu: 1, model: 1}, {cpu: 48000, mem: 393216, gpu: 4, model: 1},
		{cpu: 32000, mem: 262144, gpu: 8, model: 2},
	}
	var classes []Class
	var of []kind
	for i := 0; i < 5000; {
		k := kinds[rng.Intn(len(kinds))]
		for _, daemons := range []int64{300, 500} { // a heavier DaemonSet on some nodes
			n := min(1+rng.Intn(60), 5000-i)
			i += n
			classes = append(classes, Class{Capacity: []int64{k.cpu - daemons, k.mem - 4*daemons, k.gpu, 105}, Count: n})
			of = append(of, k)
		}
	}
	var groups []Group
	pods := 0
	for w := 0; pods < 150000; w++ {
		n := min(1+rng.Intn(150), 150000-pods)
		pods += n
		g := Group{Demand: []int64{15 * (1 + rng.Int63n(40)), 48 * (1 + rng.Int63n(64)), 0, 1}, Count: n}
		family, model := -1, 0
		switch x := rng.Intn(40); {
		case x == 0:
			model = 1 + rng.Intn(2)
			g.Demand[gpu] = 1
			g.Demand[cpu] *= 4
		case x < 7:
			family = rng.Intn(3)
		}
		for c, k := range of {
			switch {
			case model > 0 && k.model != model:
			case model == 0 && k.model > 0:
			case family >= 0 && k.family != family:
			default:
				g.Allowed = append(g.Allowed, c)
			}
		}
		groups = append(groups, g)
	}
	return classes, groups
}

func TestBoundLarge(t *testing.T) {
	if testing.Short() {
		t.Skip("5,000 nodes")
	}
	classes, groups := large(rand.New(rand.NewSource(1)))
	res := Compute(classes, groups)
	t.Logf("%d classes, %d groups: %+v; per resource today %d", len(classes), len(groups), res, perResourceToday(classes, groups))
	if !res.Solved || res.Nodes <= res.PerResource {
		t.Errorf("%+v, want solved, above the per-resource bound", res)
	}
}

// BenchmarkCompute bounds a fleet of 5,000 nodes and 150,000 pods:
//
//	go test ./pkg/lowerbound -run '^$' -bench Compute -benchtime 3x
func BenchmarkCompute(b *testing.B) {
	classes, groups := large(rand.New(rand.NewSource(1)))
	var res Result
	for b.Loop() {
		res = Compute(classes, groups)
	}
	b.ReportMetric(float64(res.Nodes), "nodes")
	b.ReportMetric(float64(res.PerResource), "per-resource")
	b.ReportMetric(float64(res.ClassBits), "class-bits")
	b.ReportMetric(float64(res.GroupBits), "group-bits")
}
