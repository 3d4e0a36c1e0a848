package simulator

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sort"
	"sync"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/rebalancer-dev/rebalancer/pkg/wellknown"
)

// cycleFilter is one cycle's filter pass, from PreFilter's nodes to what
// the filters made of each. Its lists but nodes are the simulator's
// cycleLists, reused from cycle to cycle.
type cycleFilter struct {
	all   []fwk.NodeInfo // the snapshot's node list
	nodes []fwk.NodeInfo // those PreFilter allows, in list order
	slots []int          // nodes[i] is all[slots[i]]; nil: nodes is all
	// feasible holds nodes[i] where it passed the filters, else nil.
	// In a cycle by class, only the first node of each class has its
	// verdict until fill gives it to the others.
	feasible []fwk.NodeInfo
	// Why each node was refused; read only when no node fits
	// (allReasons).
	reasons []*fwk.Status
	// classes, in a cycle by class, are the classes filtered by; filled
	// says fill gave every node its class's verdict.
	classes *classes
	filled  bool
	// The drained and held nodes, by place in nodes (nil: none): read for
	// every node filtered, so a slice, not a map.
	tainted []bool
	codes   []fwk.Code // the cycle's codes, when it keeps them
	run     func(ctx context.Context, ni fwk.NodeInfo, slot int) *fwk.Status
	// verdicts are the filters' verdicts remembered by node class.
	verdicts classVerdicts
	// firstErr is the first error a filter returned (filters run in
	// parallel).
	firstErr error
	errOnce  sync.Once
}

// slot is the place of nodes[i] in the node list.
func (f *cycleFilter) slot(i int) int {
	if f.slots == nil {
		return i
	}
	return f.slots[i]
}

// preFilter runs sc's PreFilter plugins for pod and lists the nodes of all
// they allow. done: the cycle ends there, with c's diagnosis or the error.
func (s *Simulator) preFilter(ctx context.Context, sc *scheduler, pod *v1.Pod, c *cycle, all []fwk.NodeInfo) (f *cycleFilter, done bool, err error) {
	preRes, status, _ := sc.framework.RunPreFilterPlugins(ctx, c.state, pod)
	if !status.IsSuccess() {
		if why, failed := failedCycle(status); failed { // this pod's cycle alone (dra.go)
			c.diagnosis = why
			return nil, true, nil
		}
		if !status.IsRejected() {
			return nil, true, status.AsError()
		}
		c.diagnosis = status.Message()
		return nil, true, nil
	}
	f = &cycleFilter{all: all, nodes: all}
	if !preRes.AllNodes() {
		f.nodes = make([]fwk.NodeInfo, 0, len(preRes.NodeNames))
		for i, ni := range all { // in node list order, as kube-scheduler
			if preRes.NodeNames.Has(ni.Node().Name) {
				f.nodes = append(f.nodes, ni)
				f.slots = append(f.slots, i)
			}
		}
	}
	return f, false, nil
}

// startFilters readies f to filter pod's nodes with sc's filters.
func (s *Simulator) startFilters(sc *scheduler, pod *v1.Pod, c *cycle, f *cycleFilter, drained sets.Set[string]) {
	f.feasible = reuse(&s.cycleLists.feasible, len(f.nodes))
	f.reasons = reuse(&s.cycleLists.reasons, len(f.nodes))
	if s.keepCodes {
		c.codes = make([]fwk.Code, len(f.nodes))
		f.codes = c.codes
	}
	f.tainted = s.taintedNodes(pod, f, drained)
	f.run, f.verdicts = sc.filterer(c.state, pod, len(f.all))
}

// taintedNodes marks, by place in f.nodes, the drained and held nodes,
// which carry the drain taint, when pod does not tolerate it; nil when
// none of f.nodes is marked.
func (s *Simulator) taintedNodes(pod *v1.Pod, f *cycleFilter, drained sets.Set[string]) []bool {
	if len(drained) == 0 && len(s.held) == 0 {
		return nil
	}
	drainTaint := wellknown.DrainTaint("")
	if corev1helpers.TolerationsTolerateTaint(s.logger, pod.Spec.Tolerations, &drainTaint, true) {
		return nil
	}
	tainted := reuse(&s.cycleLists.tainted, len(f.nodes))
	marked := false
	for _, names := range []sets.Set[string]{drained, s.held} {
		for name := range names {
			i, ok := s.placeOf(f.all, name)
			if ok && f.slots != nil {
				j := sort.SearchInts(f.slots, i) // slots ascend
				i, ok = j, j < len(f.slots) && f.slots[j] == i
			}
			if ok {
				tainted[i], marked = true, true
			}
		}
	}
	if !marked {
		return nil
	}
	return tainted
}

// filter runs the filters on nodes[i], or refuses it for the drain taint.
func (f *cycleFilter) filter(ctx context.Context, i int) {
	if f.tainted != nil && f.tainted[i] {
		f.reasons[i] = drainTaintRefusal
		if f.codes != nil {
			f.codes[i] = fwk.UnschedulableAndUnresolvable
		}
		return
	}
	st := f.run(ctx, f.nodes[i], f.slot(i))
	switch {
	case st.IsSuccess():
		f.feasible[i] = f.nodes[i]
	case st.IsRejected():
		f.reasons[i] = st
		if f.codes != nil {
			f.codes[i] = st.Code()
		}
	default:
		f.reasons[i] = st
		f.errOnce.Do(func() { f.firstErr = st.AsError() })
	}
}

// filterNodes filters f's nodes, counting the feasible ones in c: every
// node (without random, one node of each class where classes apply), or
// with random, where kube-scheduler samples, only until it has the nodes
// it scores. It returns the classes filtered by (nil: none).
func (s *Simulator) filterNodes(ctx context.Context, sc *scheduler, pod *v1.Pod, c *cycle, f *cycleFilter, random *rand.Rand) *classes {
	n, want := len(f.nodes), sc.nodesToScore(len(f.nodes))
	if random != nil && want < n && !sc.filterAll {
		f.walk(ctx, sc, c, want)
		return nil
	}
	var cl *classes
	if random == nil { // a replay's random search lists nodes in its own order
		cl = s.byClass(sc, c.state, pod, f)
	}
	if cl != nil {
		c.feasible = f.filterByClass(ctx, cl)
		return cl
	}
	parallel(ctx, n, func(i int) { f.filter(ctx, i) })
	for _, ni := range f.feasible {
		if ni != nil {
			c.feasible++
		}
	}
	return nil
}

// filterByClass filters the first node of each class, whose verdict is
// every node's of the class (fill), and returns how many nodes passed. A
// class whose verdict is remembered needs no filter; the others' are
// remembered after. The memo is read and written outside the parallel
// part, so it takes no lock.
func (f *cycleFilter) filterByClass(ctx context.Context, cl *classes) (feasible int) {
	f.verdicts.name()
	rest := cl.unknown[:0]
	for k, i := range cl.reps {
		if st, ok := f.verdicts.verdict(cl.ids[k]); ok {
			f.remembered(i, st)
		} else {
			rest = append(rest, k)
		}
	}
	cl.unknown = rest
	parallel(ctx, len(rest), func(t int) { f.filter(ctx, cl.reps[rest[t]]) })
	for _, k := range rest {
		i := cl.reps[k]
		if f.feasible[i] != nil {
			f.verdicts.keep(cl.ids[k], nil)
		} else if st := f.reasons[i]; st.IsRejected() {
			f.verdicts.keep(cl.ids[k], st)
		}
	}
	f.classes = cl
	for i, tainted := range f.tainted {
		if tainted {
			f.filter(ctx, i) // the drain taint decides
		}
	}
	for k, i := range cl.reps {
		if f.feasible[i] != nil {
			feasible += len(cl.members[k])
		}
	}
	if f.codes != nil {
		f.fill()
	}
	return feasible
}

// fill gives every node of a class its class's first node's verdict.
func (f *cycleFilter) fill() {
	cl := f.classes
	if cl == nil || f.filled {
		return
	}
	f.filled = true
	for k, first := range cl.reps {
		for _, i := range cl.members[k][1:] {
			if f.feasible[first] != nil {
				f.feasible[i] = f.nodes[i]
			} else {
				f.reasons[i] = f.reasons[first]
			}
			if f.codes != nil {
				f.codes[i] = f.codes[first]
			}
		}
	}
}

// feasibleNodes holds nodes[i] where it passed the filters, else nil.
func (f *cycleFilter) feasibleNodes() []fwk.NodeInfo {
	f.fill()
	return f.feasible
}

// allReasons are the filters' reasons for every node.
func (f *cycleFilter) allReasons() []*fwk.Status {
	f.fill()
	return f.reasons
}

// remembered records for nodes[i] a verdict remembered by class: none
// (nil, it passed) or a rejection, which a memo alone keeps.
func (f *cycleFilter) remembered(i int, st *fwk.Status) {
	if st == nil {
		f.feasible[i] = f.nodes[i]
		return
	}
	f.reasons[i] = st
	if f.codes != nil {
		f.codes[i] = st.Code()
	}
}

// walk filters as kube-scheduler does when it samples: it stops once it
// has found the want feasible nodes it scores, walking from where its last
// search stopped (sample then keeps the same nodes), chunk by chunk, in
// that order.
func (f *cycleFilter) walk(ctx context.Context, sc *scheduler, c *cycle, want int) {
	n := len(f.nodes)
	walked := 0
	for walked < n && c.feasible < want && f.firstErr == nil && ctx.Err() == nil {
		chunk := min(want, n-walked)
		parallel(ctx, chunk, func(k int) { f.filter(ctx, (sc.next+walked+k)%n) })
		for k := range chunk {
			if f.feasible[(sc.next+walked+k)%n] != nil {
				c.feasible++
			}
		}
		walked += chunk
	}
	c.partial = walked < n
}

// placeOf is the place of the node named in all, the snapshot's node
// list; false when it is not in it. The places are indexed once per list,
// and again when they no longer match it.
func (s *Simulator) placeOf(all []fwk.NodeInfo, name string) (int, bool) {
	if len(all) == 0 {
		return 0, false
	}
	fresh := s.places == nil || s.placesOf.first != all[0] || s.placesOf.n != len(all)
	if !fresh {
		i, ok := s.places[name]
		switch {
		case ok && all[i].Node().Name == name:
			return i, true
		case !ok:
			if _, err := s.snapshot.NodeInfos().Get(name); err != nil {
				return 0, false // no such node
			}
		}
		// The list changed under the same first node and length.
	}
	s.places = make(map[string]int, len(all))
	for i, ni := range all {
		s.places[ni.Node().Name] = i
	}
	s.placesOf.first, s.placesOf.n = all[0], len(all)
	i, ok := s.places[name]
	return i, ok
}

// drainTaintRefusal is a node's refusal of a pod that does not tolerate
// the drain taint, as TaintToleration words it.
var drainTaintRefusal = fwk.NewStatus(fwk.UnschedulableAndUnresolvable, fmt.Sprintf("node(s) had untolerated taint {%s: }", wellknown.DrainTaintKey))

// summarize counts the filter rejections, as kube-scheduler's FitError does:
// "0/5 nodes are available: 3 Insufficient cpu, 2 node(s) had untolerated taint".
func summarize(reasons []*fwk.Status, total int) string {
	counts := map[string]int{}
	for _, r := range reasons {
		if r != nil {
			counts[r.Message()]++
		}
	}
	keys := make([]string, 0, len(counts))
	for k := range counts {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	msg := fmt.Sprintf("0/%d nodes are available", total)
	for i, k := range keys {
		sep := ", "
		if i == 0 {
			sep = ": "
		}
		msg += fmt.Sprintf("%s%d %s", sep, counts[k], k)
	}
	return msg
}
