package simulator

import (
	"context"
	"math/rand/v2"
	"slices"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"

	"github.com/rebalancer-dev/rebalancer/pkg/scheduler/rebalancehint"
)

// cycle is the outcome of one simulated scheduling cycle.
type cycle struct {
	// scores are the feasible nodes' total scores, in node list order;
	// for a cycle scored by class, byClass holds them until list.
	scores  []fwk.NodePluginScores
	byClass *classScores
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
	if run, _ := sc.filterer(c.state, pod, 0); !run(ctx, ni, -1).IsSuccess() {
		return c, false, nil
	}
	c.scores, c.hinted = []fwk.NodePluginScores{{Name: target}}, true
	return c, true, nil
}

// schedule mirrors kube-scheduler's schedulePod with sc's profile:
// PreFilter, Filter over the nodes PreFilter allows, then PreScore and Score
// (with normalization) over the feasible nodes: all of them, or with random
// set the sample kube-scheduler would score (see sample). The drained
// nodes carry the drain taint (none when empty).
func (s *Simulator) schedule(ctx context.Context, sc *scheduler, pod *v1.Pod, random *rand.Rand, drained sets.Set[string]) (cycle, error) {
	c, f, cl, done, err := s.filterCycle(ctx, sc, pod, random, drained)
	if done || err != nil {
		return c, err
	}
	err = s.scoreFeasible(ctx, sc, pod, &c, f, cl, random)
	return c, err
}

// filterCycle is schedule up to scoring: PreFilter and Filter. done: the
// cycle ends there, with c's diagnosis (no node, or PreFilter or a
// filter's own failure for this pod) or the error.
func (s *Simulator) filterCycle(ctx context.Context, sc *scheduler, pod *v1.Pod, random *rand.Rand, drained sets.Set[string]) (c cycle, f *cycleFilter, cl *classes, done bool, err error) {
	c.state = framework.NewCycleState()
	all, err := s.snapshot.NodeInfos().List()
	if err != nil {
		return c, nil, nil, true, err
	}
	if len(all) == 0 {
		c.diagnosis = "no nodes"
		return c, nil, nil, true, nil
	}
	f, done, err = s.preFilter(ctx, sc, pod, &c, all)
	if done || err != nil {
		return c, nil, nil, true, err
	}
	c.considered = len(f.nodes)
	c.nodes = f.nodes
	s.startFilters(sc, pod, &c, f, drained)
	cl = s.filterNodes(ctx, sc, pod, &c, f, random)
	if f.firstErr != nil {
		if why, failed := failedFilters(f.reasons); failed && ctx.Err() == nil { // this pod's cycle alone (dra.go)
			return cycle{state: c.state, considered: c.considered, nodes: c.nodes, diagnosis: why}, nil, nil, true, nil
		}
		return c, nil, nil, true, f.firstErr
	}
	if err := ctx.Err(); err != nil {
		// Until stops at an ended context, leaving nodes unfiltered: no
		// node found is then no answer, not "nothing fits".
		return c, nil, nil, true, err
	}
	return c, f, cl, false, nil
}

// scoreFeasible scores the feasible nodes (with random, the sample
// kube-scheduler would score) into c.scores, or when none is left, puts
// why in c.diagnosis.
func (s *Simulator) scoreFeasible(ctx context.Context, sc *scheduler, pod *v1.Pod, c *cycle, f *cycleFilter, cl *classes, random *rand.Rand) error {
	fw := sc.framework
	if cl != nil && c.feasible > 0 && fw.HasScorePlugins() {
		// Without random, every feasible node is scored: no list of them.
		scores, ok, err := s.scoreByClass(ctx, sc, c.state, pod, f, c.feasible, cl)
		if err != nil || ok {
			c.byClass = scores
			return err
		}
	}
	feasible := f.feasibleNodes()
	if random != nil && len(f.nodes) > 0 {
		feasible = sc.sample(feasible)
	}
	fit := feasible[:0]
	var fitSlots []int // fit[k]'s place in all; nil once sampled
	if random == nil {
		fitSlots = reuse(&s.cycleLists.slots, c.feasible)[:0]
	}
	for i, ni := range feasible {
		if ni != nil {
			fit = append(fit, ni)
			if random == nil {
				fitSlots = append(fitSlots, f.slot(i))
			}
		}
	}
	if len(fit) == 0 {
		c.diagnosis = summarize(f.allReasons(), len(f.nodes))
		return nil
	}
	if !fw.HasScorePlugins() {
		c.scores = make([]fwk.NodePluginScores, len(fit))
		for i, ni := range fit {
			c.scores[i] = fwk.NodePluginScores{Name: ni.Node().Name, TotalScore: 1}
		}
		return nil
	}
	if st := sc.runPreScore(ctx, c.state, pod, fit); !st.IsSuccess() {
		return st.AsError()
	}
	scores, st := sc.runScore(ctx, c.state, pod, fit, fitSlots, nil, len(f.all))
	if !st.IsSuccess() {
		return st.AsError()
	}
	c.scores = scores
	return nil
}

// scoreByClass scores the feasible first node of each class, whose scores
// every node of the class has (classScores); ok is false when a Score
// plugin that reads more of a node than its class (see scoresByClass) did
// not skip itself, and the caller scores every node. fit is how many
// nodes f found feasible.
func (s *Simulator) scoreByClass(ctx context.Context, sc *scheduler, state fwk.CycleState, pod *v1.Pod, f *cycleFilter, fit int, cl *classes) (*classScores, bool, error) {
	// At most one first node a class: the lists never outgrow these.
	reps := reuse(&s.cycleLists.reps, len(cl.reps))[:0]
	repSlots := reuse(&s.cycleLists.repSlots, len(cl.reps))[:0]
	repClasses := reuse(&s.cycleLists.repClasses, len(cl.reps))[:0]
	// The place of each class's scores in repScores; -1: not feasible.
	at := reuse(&s.cycleLists.scoreOf, len(cl.reps))
	for k, i := range cl.reps {
		at[k] = -1
		if f.feasible[i] != nil {
			at[k] = len(reps)
			reps = append(reps, f.nodes[i])
			repSlots = append(repSlots, f.slot(i))
			repClasses = append(repClasses, cl.ids[k])
		}
	}
	if st := sc.runPreScore(ctx, state, pod, reps); !st.IsSuccess() {
		return nil, false, st.AsError()
	}
	if !scoresAlike(sc.scores, state) {
		return nil, false, nil
	}
	repScores, st := sc.runScore(ctx, state, pod, reps, repSlots, repClasses, len(f.all))
	if !st.IsSuccess() {
		return nil, false, st.AsError()
	}
	s.byClassCycles++
	return &classScores{nodes: f.nodes, classes: cl, at: at, scores: repScores, fit: fit, lists: &sc.byClass}, true, nil
}

// classScores are the scores of a cycle scored by class: every feasible
// node's are its class's. A cycle that only picks a node (choose) reads
// them so, without a list of every node's.
type classScores struct {
	nodes   []fwk.NodeInfo // the cycle's
	classes *classes
	// scores are the feasible classes' scores, at[k] the place of the k-th
	// class's (-1: its nodes did not pass the filters).
	scores []fwk.NodePluginScores
	at     []int
	fit    int // feasible nodes
	// lists are the scheduler's lists, which list reuses: of every feasible
	// node's scores, and of each node's class's place in scores.
	lists *byClassLists
}

// list are the cycle's scores, one per feasible node in node list order,
// as RunScorePlugins would list them.
func (c *cycle) list() []fwk.NodePluginScores {
	cs := c.byClass
	if cs == nil {
		return c.scores
	}
	of := reuse(&cs.lists.of, len(cs.nodes)) // 1 + the place of a feasible node's scores
	for k, j := range cs.at {
		if j >= 0 {
			for _, i := range cs.classes.members[k] {
				of[i] = j + 1
			}
		}
	}
	out := slices.Grow(cs.lists.scores[:0], cs.fit)
	for i, j := range of {
		if j > 0 {
			ns := cs.scores[j-1]
			ns.Name = cs.nodes[i].Node().Name
			out = append(out, ns)
		}
	}
	cs.lists.scores = out
	c.scores, c.byClass = out, nil
	return out
}

// fit is how many nodes the cycle scored.
func (c *cycle) fit() int {
	if c.byClass != nil {
		return c.byClass.fit
	}
	return len(c.scores)
}

// choose is choose over the cycle's scores; by class (random nil) it
// reads the names only of the nodes of the best classes.
func (c *cycle) choose(random *rand.Rand) (string, int, int64) {
	cs := c.byClass
	if cs == nil || random != nil {
		return choose(c.list(), random)
	}
	top := cs.scores[0].TotalScore
	for _, ns := range cs.scores[1:] {
		top = max(top, ns.TotalScore)
	}
	var best string
	ties := 0
	for k, j := range cs.at {
		if j < 0 || cs.scores[j].TotalScore != top {
			continue
		}
		for _, i := range cs.classes.members[k] {
			if name := cs.nodes[i].Node().Name; ties == 0 || name < best {
				best = name
			}
			ties++
		}
	}
	return best, ties, top
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
	if st := by.runPreScore(ctx, state, pod, nodes); !st.IsSuccess() {
		return nil, st.AsError()
	}
	out, st := by.runScore(ctx, state, pod, nodes, nil, nil, 0)
	if !st.IsSuccess() {
		return nil, st.AsError()
	}
	return out, nil
}
