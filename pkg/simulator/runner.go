package simulator

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"

	v1 "k8s.io/api/core/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/sets"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/apis/config"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	frameworkruntime "k8s.io/kubernetes/pkg/scheduler/framework/runtime"
)

// runner runs a profile's Filter and Score plugins on many nodes as the
// framework's RunFilterPlugins and RunScorePlugins do — the same plugins,
// in the same order, the same skips, normalization, weights and checks —
// without what the framework pays on every node for metrics and lookups by
// plugin name: at 5,000 nodes that bookkeeping costs as much as the
// plugins themselves. A simulation built WithEveryNode calls the
// framework's own runners instead (tests compare the two).
type runner struct {
	filters   []fwk.FilterPlugin // in the profile's order
	preScores []preScorer
	scores    []weightedScore
	// raw and list are score's scratch space, and out the list it
	// returns, kept from cycle to cycle (a simulation runs one cycle at a
	// time, and reads a cycle's scores before the next).
	raw  []int64
	list fwk.NodeScoreList
	out  []fwk.NodePluginScores
	todo []int // the nodes whose scores are not remembered by class
	// keys says, for each plugin whose verdicts and scores the runner
	// remembers, what of a pod it reads (see memo.go); memos holds them.
	keys  map[string]map[string]podKey
	memos memos
	// passes remembers whole passes' answers by node class, for the
	// cycles that go by class: a node back in a state it was in before
	// (its pods the same as then, or like another node's) needs no new
	// call, and a class one lookup.
	passes passMemo
	// pluginScores: score lists each plugin's weighted score by node
	// (NodePluginScores.Scores), as the framework does. Nothing in
	// rebalancer reads them but tests, and writing them is a tenth of a
	// cycle's cost at 5,000 nodes: only the totals are kept otherwise.
	pluginScores bool
}

type weightedScore struct {
	plugin fwk.ScorePlugin
	name   string
	weight int64
}

// plugins is filled by the registry's factories as the framework builds a
// profile: the instances the framework runs, by name.
type plugins map[string]fwk.Plugin

// capture wraps every factory of registry so that the plugins it builds are
// recorded in into.
func capture(registry frameworkruntime.Registry, into plugins) {
	for name, factory := range registry {
		registry[name] = func(ctx context.Context, obj k8sruntime.Object, h fwk.Handle) (fwk.Plugin, error) {
			p, err := factory(ctx, obj, h)
			if err == nil {
				into[name] = p
			}
			return p, err
		}
	}
}

// newRunner lists the profile's Filter and Score plugins, as the framework
// resolved them, with the instances it built.
func newRunner(fw framework.Framework, built plugins, prof *config.KubeSchedulerProfile, held sets.Set[string], backed func(v1.ResourceName) bool) (*runner, error) {
	r := &runner{memos: memos{byKey: map[memoKey]*memo{}}}
	r.keys = memoKeys(prof, held, backed, r.once)
	list := fw.ListPlugins()
	for _, pl := range list.Filter.Enabled {
		p, ok := built[pl.Name].(fwk.FilterPlugin)
		if !ok {
			return nil, fmt.Errorf("filter plugin %q was not built", pl.Name)
		}
		r.filters = append(r.filters, p)
	}
	for _, pl := range list.PreScore.Enabled {
		p, ok := built[pl.Name].(fwk.PreScorePlugin)
		if !ok {
			return nil, fmt.Errorf("prescore plugin %q was not built", pl.Name)
		}
		r.preScores = append(r.preScores, newPreScorer(p, r.keys["score"]))
	}
	for _, pl := range list.Score.Enabled {
		p, ok := built[pl.Name].(fwk.ScorePlugin)
		if !ok {
			return nil, fmt.Errorf("score plugin %q was not built", pl.Name)
		}
		r.scores = append(r.scores, weightedScore{plugin: p, name: pl.Name, weight: int64(pl.Weight)})
	}
	return r, nil
}

// once is key computed once a cycle: the filters and the scores of a
// cycle ask for the same pod's keys, and several plugins share one. A new
// cycle (filterPass), or a score, which may come without one, starts over.
func (r *runner) once(key podKey) podKey {
	var pod *v1.Pod
	var cycle int
	var k string
	var ok bool
	return func(p *v1.Pod) (string, bool) {
		if p != pod || cycle != r.memos.cycle {
			pod, cycle = p, r.memos.cycle
			k, ok = key(p)
		}
		return k, ok
	}
}

// filterPass is one cycle's Filter plugins: those state does not skip,
// each with its memo for the pod (nil: not remembered).
type filterPass struct {
	plugins []fwk.FilterPlugin
	memos   []*memo
}

// filterPass prepares the filter pass of pod's cycle over n nodes.
func (r *runner) filterPass(state fwk.CycleState, pod *v1.Pod, n int) filterPass {
	skip := state.GetSkipFilterPlugins()
	r.memos.cycle++
	var fp filterPass
	for _, pl := range r.filters {
		if !skip.Has(pl.Name()) {
			fp.plugins = append(fp.plugins, pl)
			fp.memos = append(fp.memos, r.memo(pl.Name(), "filter", pod, n))
		}
	}
	return fp
}

// filter is RunFilterPlugins with the pass's filters, on the node at
// slot of the node list (-1: not in it, nothing remembered).
func (fp filterPass) filter(ctx context.Context, state fwk.CycleState, pod *v1.Pod, ni fwk.NodeInfo, slot int) *fwk.Status {
	gen := ni.GetGeneration()
	for i, pl := range fp.plugins {
		var st *fwk.Status
		if m := fp.memos[i]; m != nil && slot >= 0 {
			var ok bool
			if st, ok = m.status(slot, gen); !ok {
				st = pl.Filter(ctx, state, pod, ni)
				m.keepStatus(slot, gen, st)
			}
		} else {
			st = pl.Filter(ctx, state, pod, ni)
		}
		if !st.IsSuccess() {
			if !st.IsRejected() {
				st = fwk.AsStatus(fmt.Errorf("running %q filter plugin: %w", pl.Name(), st.AsError()))
			}
			st.SetPlugin(pl.Name())
			return st
		}
	}
	return nil
}

// score is RunScorePlugins: every active Score plugin on every node, then
// each plugin's NormalizeScore over all nodes, then its weight. slots, when
// not nil, gives each node's place in the node list, where raw scores are
// remembered (see memo.go), and classes, when not nil, each node's class;
// total is that list's length. The list returned is the runner's, valid
// until its next score.
func (r *runner) score(ctx context.Context, state fwk.CycleState, pod *v1.Pod, nodes []fwk.NodeInfo, slots, classes []int, total int) ([]fwk.NodePluginScores, *fwk.Status) {
	skip := state.GetSkipScorePlugins()
	active := make([]weightedScore, 0, len(r.scores))
	var memos []*memo
	for _, ws := range r.scores {
		if !skip.Has(ws.name) {
			active = append(active, ws)
			var m *memo
			if slots != nil {
				m = r.memo(ws.name, "score", pod, total)
			}
			memos = append(memos, m)
		}
	}
	r.memos.cycle++ // the pod's keys are not read again (once)
	n, k := len(nodes), len(active)
	var pass uint64 // the scores remembered by class (passMemo)
	if classes != nil {
		unfiltered := state.GetSkipFilterPlugins()
		pass = r.passes.pass(memos, func(j int) bool {
			return scoreNothingUnfiltered.Has(active[j].name) && unfiltered.Has(active[j].name)
		})
	}
	// Plugin j's raw scores are raw[j*n:(j+1)*n]; every one is written below.
	if cap(r.raw) < n*k {
		r.raw = make([]int64, n*k)
	}
	raw := r.raw[:n*k]
	out := reuse(&r.out, n)
	var failed atomic.Pointer[fwk.Status]
	// The scores remembered by class first; the other nodes are scored in
	// parallel, and their classes' scores remembered after: the memo is
	// not touched in parallel.
	todo := r.todo[:0] // the nodes to score, when by class
	if pass != 0 {
		for i := range n {
			a, ok := r.passes.score(pass, classes[i])
			if !ok {
				todo = append(todo, i)
				continue
			}
			for j := range k {
				raw[j*n+i] = a[j]
			}
		}
		r.todo = todo
	}
	count := n
	if pass != 0 {
		count = len(todo)
	}
	parallel(ctx, count, func(t int) {
		i := t
		if pass != 0 {
			i = todo[t]
		}
		if classes == nil {
			// By class, nodes stand for their classes and no one reads
			// their names: the class plugins normalize by score alone and
			// the cycle reads the names of the nodes it picks from.
			out[i].Name = nodes[i].Node().Name
		}
		gen := nodes[i].GetGeneration()
		for j, ws := range active {
			m := memos[j]
			s, ok := int64(0), false
			if m != nil {
				s, ok = m.score(slots[i], gen)
			}
			if !ok {
				var st *fwk.Status
				s, st = ws.plugin.Score(ctx, state, pod, nodes[i])
				if !st.IsSuccess() {
					failed.CompareAndSwap(nil, fwk.AsStatus(fmt.Errorf("running Score plugins: plugin %q failed with: %w", ws.name, st.AsError())))
					return
				}
				if m != nil {
					m.keepScore(slots[i], gen, s)
				}
			}
			raw[j*n+i] = s
		}
	})
	if st := failed.Load(); st != nil {
		return nil, st
	}
	for _, i := range todo { // empty unless by class
		var a [maxPassScores]int64
		for j := range k {
			a[j] = raw[j*n+i]
		}
		r.passes.keepScore(pass, classes[i], a)
	}
	if err := ctx.Err(); err != nil {
		return nil, fwk.AsStatus(err)
	}
	for j, ws := range active {
		ext := ws.plugin.ScoreExtensions()
		if ext == nil {
			continue
		}
		if cap(r.list) < n {
			r.list = make(fwk.NodeScoreList, n)
		}
		list := r.list[:n]
		for i := range list {
			list[i] = fwk.NodeScore{Name: out[i].Name, Score: raw[j*n+i]}
		}
		if st := ext.NormalizeScore(ctx, state, pod, list); !st.IsSuccess() {
			return nil, fwk.AsStatus(fmt.Errorf("running Normalize on Score plugins: plugin %q failed with: %w", ws.name, st.AsError()))
		}
		for i := range list {
			raw[j*n+i] = list[i].Score
		}
	}
	var each []fwk.PluginScore
	if r.pluginScores {
		each = make([]fwk.PluginScore, n*k)
	}
	for i := range out {
		ns := &out[i]
		if each != nil {
			ns.Scores = each[i*k : (i+1)*k : (i+1)*k]
		}
		for j, ws := range active {
			s := raw[j*n+i]
			if s > fwk.MaxScore || s < fwk.MinScore {
				return nil, fwk.AsStatus(fmt.Errorf("applying score defaultWeights on Score plugins: plugin %q returns an invalid score %v, it should in the range of [%v, %v] after normalizing", ws.name, s, fwk.MinScore, fwk.MaxScore))
			}
			if each != nil {
				ns.Scores[j] = fwk.PluginScore{Name: ws.name, Score: s * ws.weight}
			}
			ns.TotalScore += s * ws.weight
		}
	}
	return out, nil
}

// parallel calls do for 0..n-1 on every core, in chunks, until ctx ends;
// on one core when there are fewer than perWorker items a core.
func parallel(ctx context.Context, n int, do func(i int)) {
	workers := min(runtime.GOMAXPROCS(0), n/perWorker)
	if workers <= 1 {
		for i := range n {
			if i%chunk == 0 && ctx.Err() != nil {
				return
			}
			do(i)
		}
		return
	}
	var next atomic.Int64
	work := func() {
		for ctx.Err() == nil {
			start := int(next.Add(chunk)) - chunk
			if start >= n {
				return
			}
			for i := start; i < min(start+chunk, n); i++ {
				do(i)
			}
		}
	}
	// The caller is one of the workers: a goroutine fewer to start and
	// wake in every cycle.
	var wg sync.WaitGroup
	for range workers - 1 {
		wg.Go(work)
	}
	work()
	wg.Wait()
}

// reuse is *buf resized to n and cleared, grown when it is too small: a
// cycle's lists of every node, kept from cycle to cycle rather than
// allocated each time (at 5,000 nodes they are most of what a cycle
// allocates, and the garbage collector's work).
func reuse[T any](buf *[]T, n int) []T {
	if cap(*buf) < n {
		*buf = make([]T, n)
	}
	b := (*buf)[:n]
	clear(b)
	return b
}

// chunk is how many nodes a worker takes at a time: enough to make the
// handover cheap, few enough to balance the cores.
const chunk = 64

// perWorker is the fewest nodes worth another core: waking one costs
// about what a cycle by class spends on a few hundred first nodes, whose
// answers are mostly remembered.
const perWorker = 4 * chunk
