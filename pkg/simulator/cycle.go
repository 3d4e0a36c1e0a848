package simulator

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"sort"
	"sync"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"

	"github.com/rebalancer-dev/rebalancer/pkg/plan"
	"github.com/rebalancer-dev/rebalancer/pkg/scheduler/rebalancehint"
	"github.com/rebalancer-dev/rebalancer/pkg/wellknown"
)

// cycle is the outcome of one simulated scheduling cycle.
type cycle struct {
	// scores are the feasible nodes' total scores, in node list order.
	scores []fwk.NodePluginScores
	// considered is the number of nodes PreFilter left to filter, and
	// feasible how many of them passed the filters.
	considered, feasible int
	// diagnosis says why no node was feasible.
	diagnosis string
	state     *framework.CycleState
	// hinted: the pod's hint alone decided (see hinted); scores holds its
	// target alone, unscored, and feasible is not counted.
	hinted bool
	// partial: with node sampling, the filters stopped once they had found
	// the nodes to score, as kube-scheduler's do; feasible counts those.
	partial bool
	// codes are the filters' status codes by node (of nodes, the nodes
	// filtered), kept only when Resolvable asks.
	codes []fwk.Code
	nodes []fwk.NodeInfo
}

// hinted is schedule for a pod whose hint decides its node: when sc's
// RebalanceHint outweighs every other score (hintDecides), sc scores every
// node it considers, and the hinted target passes PreFilter and the
// filters, the target scores highest of all feasible nodes whatever the
// other plugins say, so only the target is filtered and nothing scored.
// ok is false when it cannot tell: schedule then runs the whole cycle.
func (s *Simulator) hinted(ctx context.Context, sc *scheduler, pod *v1.Pod, drained sets.Set[string]) (c cycle, ok bool, err error) {
	if !sc.hintDecides {
		return c, false, nil
	}
	target := sc.hints.Target(pod)
	if target == "" || drained.Has(target) || s.held.Has(target) {
		return c, false, nil
	}
	ni, err := s.snapshot.NodeInfos().Get(target)
	if err != nil {
		return c, false, nil // gone: the whole cycle says where it goes
	}
	c.state = framework.NewCycleState()
	// Only the target is filtered: RebalanceHint needs the room promised
	// there alone, not on every target of the plan.
	c.state.Write(rebalancehint.FilteredKey, rebalancehint.Filtered{target})
	preRes, status, _ := sc.framework.RunPreFilterPlugins(ctx, c.state, pod)
	if !status.IsSuccess() {
		return c, false, nil
	}
	all, err := s.snapshot.NodeInfos().List()
	if err != nil {
		return c, false, err
	}
	c.considered = len(all)
	if !preRes.AllNodes() {
		if !preRes.NodeNames.Has(target) {
			return c, false, nil
		}
		c.considered = len(preRes.NodeNames) // an upper bound: names may include nodes that do not exist
	}
	if sc.nodesToScore(c.considered) < c.considered {
		return c, false, nil // the target may be left out of the sample scored
	}
	if !sc.filterer(c.state, pod, 0)(ctx, ni, -1).IsSuccess() {
		return c, false, nil
	}
	c.scores, c.hinted = []fwk.NodePluginScores{{Name: target}}, true
	return c, true, nil
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

// schedule mirrors kube-scheduler's schedulePod with sc's profile:
// PreFilter, Filter over the nodes PreFilter allows, then PreScore and Score
// (with normalization) over the feasible nodes: all of them, or with random
// set the sample kube-scheduler would score (see sample). The drained
// nodes carry the drain taint (none when empty).
func (s *Simulator) schedule(ctx context.Context, sc *scheduler, pod *v1.Pod, random *rand.Rand, drained sets.Set[string]) (cycle, error) {
	var c cycle
	c.state = framework.NewCycleState()
	all, err := s.snapshot.NodeInfos().List()
	if err != nil {
		return c, err
	}
	if len(all) == 0 {
		c.diagnosis = "no nodes"
		return c, nil
	}
	fw := sc.framework
	preRes, status, _ := fw.RunPreFilterPlugins(ctx, c.state, pod)
	if !status.IsSuccess() {
		if why, failed := failedCycle(status); failed { // this pod's cycle alone (dra.go)
			c.diagnosis = why
			return c, nil
		}
		if !status.IsRejected() {
			return c, status.AsError()
		}
		c.diagnosis = status.Message()
		return c, nil
	}
	nodes := all
	var slots []int // nodes[i] is all[slots[i]]; nil: nodes is all
	if !preRes.AllNodes() {
		nodes = make([]fwk.NodeInfo, 0, len(preRes.NodeNames))
		for i, ni := range all { // in node list order, as kube-scheduler
			if preRes.NodeNames.Has(ni.Node().Name) {
				nodes = append(nodes, ni)
				slots = append(slots, i)
			}
		}
	}
	slot := func(i int) int {
		if slots == nil {
			return i
		}
		return slots[i]
	}
	c.considered = len(nodes)
	c.nodes = nodes

	feasible := reuse(&s.cycleLists.feasible, len(nodes))
	// Why each node was refused; read only when no node fits.
	reasons := reuse(&s.cycleLists.reasons, len(nodes))
	if s.keepCodes {
		c.codes = make([]fwk.Code, len(nodes))
	}
	var firstErr error
	var errOnce sync.Once
	// The drained and held nodes, by place in nodes (nil: none): read for
	// every node filtered, so a slice, not a map.
	var tainted []bool
	if len(drained) > 0 || len(s.held) > 0 {
		drainTaint := plan.DrainTaint("")
		if !corev1helpers.TolerationsTolerateTaint(s.logger, pod.Spec.Tolerations, &drainTaint, true) {
			tainted = reuse(&s.cycleLists.tainted, len(nodes))
			marked := false
			for _, names := range []sets.Set[string]{drained, s.held} {
				for name := range names {
					i, ok := s.placeOf(all, name)
					if ok && slots != nil {
						j := sort.SearchInts(slots, i) // slots ascend
						i, ok = j, j < len(slots) && slots[j] == i
					}
					if ok {
						tainted[i], marked = true, true
					}
				}
			}
			if !marked {
				tainted = nil
			}
		}
	}
	runFilters := sc.filterer(c.state, pod, len(all))
	filter := func(i int) {
		if tainted != nil && tainted[i] {
			reasons[i] = drainTaintRefusal
			if c.codes != nil {
				c.codes[i] = fwk.UnschedulableAndUnresolvable
			}
			return
		}
		st := runFilters(ctx, nodes[i], slot(i))
		switch {
		case st.IsSuccess():
			feasible[i] = nodes[i]
		case st.IsRejected():
			reasons[i] = st
			if c.codes != nil {
				c.codes[i] = st.Code()
			}
		default:
			reasons[i] = st
			errOnce.Do(func() { firstErr = st.AsError() })
		}
	}
	n, want := len(nodes), sc.nodesToScore(len(nodes))
	var cl *classes
	if random == nil || want >= n || sc.filterAll {
		if random == nil { // a replay's random search lists nodes in its own order
			cl = s.byClass(sc, c.state, pod, nodes, tainted)
		}
		if cl != nil {
			parallel(ctx, len(cl.reps), func(k int) { filter(cl.reps[k]) })
			for i, first := range cl.first {
				switch {
				case first < 0:
					filter(i) // the drain taint decides
				case first != i:
					reasons[i] = reasons[first]
					if c.codes != nil {
						c.codes[i] = c.codes[first]
					}
					if feasible[first] != nil {
						feasible[i] = nodes[i]
					}
				}
			}
		} else {
			parallel(ctx, n, filter)
		}
		for _, ni := range feasible {
			if ni != nil {
				c.feasible++
			}
		}
	} else {
		// kube-scheduler stops filtering once it has found the feasible
		// nodes it scores, walking from where its last search stopped
		// (sample then keeps the same nodes): chunk by chunk, in that order.
		walked := 0
		for walked < n && c.feasible < want && firstErr == nil && ctx.Err() == nil {
			chunk := min(want, n-walked)
			parallel(ctx, chunk, func(k int) { filter((sc.next + walked + k) % n) })
			for k := range chunk {
				if feasible[(sc.next+walked+k)%n] != nil {
					c.feasible++
				}
			}
			walked += chunk
		}
		c.partial = walked < n
	}
	if firstErr != nil {
		if why, failed := failedFilters(reasons); failed && ctx.Err() == nil { // this pod's cycle alone (dra.go)
			return cycle{state: c.state, considered: c.considered, nodes: c.nodes, diagnosis: why}, nil
		}
		return c, firstErr
	}
	if err := ctx.Err(); err != nil {
		// Until stops at an ended context, leaving nodes unfiltered: no
		// node found is then no answer, not "nothing fits".
		return c, err
	}
	if random != nil && len(nodes) > 0 {
		feasible = sc.sample(feasible)
	}
	fit := feasible[:0]
	if cl != nil {
		// scoreByClass reads feasible as filtered, indexed like nodes.
		fit = reuse(&s.cycleLists.fit, c.feasible)[:0]
	}
	var fitSlots []int // fit[k]'s place in all; nil once sampled
	if random == nil {
		fitSlots = reuse(&s.cycleLists.slots, c.feasible)[:0]
	}
	for i, ni := range feasible {
		if ni != nil {
			fit = append(fit, ni)
			if random == nil {
				fitSlots = append(fitSlots, slot(i))
			}
		}
	}
	if len(fit) == 0 {
		c.diagnosis = summarize(reasons, len(nodes))
		return c, nil
	}
	if !fw.HasScorePlugins() {
		c.scores = make([]fwk.NodePluginScores, len(fit))
		for i, ni := range fit {
			c.scores[i] = fwk.NodePluginScores{Name: ni.Node().Name, TotalScore: 1}
		}
		return c, nil
	}
	if cl != nil {
		scores, ok, err := s.scoreByClass(ctx, sc, c.state, pod, nodes, feasible, len(fit), cl, slot, len(all))
		if err != nil || ok {
			c.scores = scores
			return c, err
		}
	}
	if st := fw.RunPreScorePlugins(ctx, c.state, pod, fit); !st.IsSuccess() {
		return c, st.AsError()
	}
	scores, st := sc.runScore(ctx, c.state, pod, fit, fitSlots, len(all))
	if !st.IsSuccess() {
		return c, st.AsError()
	}
	c.scores = scores
	return c, nil
}

// scoreByClass scores the feasible first node of each class and gives each
// feasible node its class's scores, in node list order, as RunScorePlugins
// would list them; ok is false when a Score plugin that reads more of a
// node than its class (see scoresByClass) did not skip itself, and the
// caller scores every node. feasible, indexed like nodes, holds fit nodes.
func (s *Simulator) scoreByClass(ctx context.Context, sc *scheduler, state fwk.CycleState, pod *v1.Pod, nodes, feasible []fwk.NodeInfo, fit int, cl *classes, slot func(int) int, total int) ([]fwk.NodePluginScores, bool, error) {
	fw := sc.framework
	// At most one first node a class: the lists never outgrow these.
	reps := reuse(&s.cycleLists.reps, len(cl.reps))[:0]
	repSlots := reuse(&s.cycleLists.repSlots, len(cl.reps))[:0]
	for _, i := range cl.reps {
		if feasible[i] != nil {
			reps = append(reps, nodes[i])
			repSlots = append(repSlots, slot(i))
		}
	}
	if st := fw.RunPreScorePlugins(ctx, state, pod, reps); !st.IsSuccess() {
		return nil, false, st.AsError()
	}
	if !scoresAlike(sc.scores, state) {
		return nil, false, nil
	}
	repScores, st := sc.runScore(ctx, state, pod, reps, repSlots, total)
	if !st.IsSuccess() {
		return nil, false, st.AsError()
	}
	cc := &s.nodeClasses
	k := 0
	for _, i := range cl.reps {
		if feasible[i] != nil {
			cc.scored[cc.at[i].id] = k
			k++
		}
	}
	out := slices.Grow(sc.byClass[:0], fit)
	for i, ni := range feasible {
		if ni == nil {
			continue // a node with the drain taint (first < 0) is among these
		}
		ns := repScores[cc.scored[cc.at[i].id]]
		ns.Name = ni.Node().Name
		out = append(out, ns)
	}
	sc.byClass = out
	s.byClassCycles++
	return out, true, nil
}

// rescore scores the nodes of scores, found feasible by the pod's own
// scheduler, with another scheduler's PreScore and Score plugins. When that
// scheduler's PreFilter rejects the pod, the scores are kept as they are.
func (s *Simulator) rescore(ctx context.Context, by *scheduler, pod *v1.Pod, scores []fwk.NodePluginScores) ([]fwk.NodePluginScores, error) {
	if len(scores) == 0 || !by.framework.HasScorePlugins() {
		return scores, nil
	}
	state := framework.NewCycleState()
	if _, st, _ := by.framework.RunPreFilterPlugins(ctx, state, pod); !st.IsSuccess() {
		if st.IsRejected() {
			return scores, nil
		}
		return nil, st.AsError()
	}
	nodes := make([]fwk.NodeInfo, len(scores))
	for i, ns := range scores {
		ni, err := s.snapshot.NodeInfos().Get(ns.Name)
		if err != nil {
			return nil, err
		}
		nodes[i] = ni
	}
	if st := by.framework.RunPreScorePlugins(ctx, state, pod, nodes); !st.IsSuccess() {
		return nil, st.AsError()
	}
	out, st := by.runScore(ctx, state, pod, nodes, nil, 0)
	if !st.IsSuccess() {
		return nil, st.AsError()
	}
	return out, nil
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
