package simulator

import (
	"context"
	"fmt"
	"slices"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
)

type Prediction struct {
	// Scheduler names the scheduler that places the pod's replacement.
	Scheduler string
	// Steered says whether that scheduler follows rebalance hints (its
	// profile scores with RebalanceHint), so a plan can choose the node.
	Steered bool
	// Node is where the scheduler would put the pod; "" when no node fits.
	Node string
	// Score is Node's total weighted score.
	Score int64
	// Source is the node the pod runs on now ("" for a pending pod).
	Source string
	// SourceFeasible says whether the pod, taken off Source, still passes
	// every Filter plugin there; SourceScore is then Source's total score.
	SourceFeasible bool
	SourceScore    int64
	// Exhaustive says the scheduler scores every feasible node: it does not
	// sample them by percentageOfNodesToScore.
	Exhaustive bool
	// Certain says the scheduler itself, left to its own scoring, would
	// pick Node and no other: it scores every feasible node (no sampling
	// by percentageOfNodesToScore) and Node's score is strictly the
	// highest (kube-scheduler breaks ties at random). PredictOptions.Exclude does
	// not count: the scheduler does not know it.
	Certain bool
	// Candidates, for a drain's pod (PredictOptions.LeaveSource) whose scheduler
	// does not follow hints, when it is not Certain, are all the nodes it
	// could choose by itself: each node
	// that scores highest, ties included, in some sample of feasible nodes
	// it may score (all of them when it scores every feasible node, else any
	// nodesToScore of them). PredictOptions.Exclude does not narrow them.
	Candidates []string
	// Unschedulable explains an empty Node, from the filters' statuses.
	Unschedulable string
}

// PredictOptions narrow one prediction.
type PredictOptions struct {
	// Exclude rules nodes out as targets after the filters ran (e.g. nodes
	// being drained). It is not asked about the source.
	Exclude func(node string) bool
	// LeaveSource rules the source node out as a target: the pod must go
	// (the executor taints a node it drains, so no scheduler puts the
	// replacement back there).
	LeaveSource bool
	// Prefer, for a steered pod, picks the best of the nodes it holds true
	// for among those the others allow, when there is one: a hint sends
	// the replacement wherever the plan says. An unsteered scheduler makes
	// its own choice, so it is not asked.
	Prefer func(node string) bool
	// PreferElse, when no node Prefer holds for is allowed, picks the best
	// of those it holds true for (a second choice, asked as Prefer is).
	PreferElse func(node string) bool
	// Drained are the nodes that carry the drain taint when the
	// replacement is scheduled (wellknown.DrainTaint: the executor taints the
	// nodes a plan empties before its first eviction, to the end of the
	// cycle). A replacement that does not tolerate it cannot go there,
	// whatever the scores.
	Drained sets.Set[string]
}

// Predict runs one scheduling cycle for the pod, with its own scheduler's
// profile, as its replacement would see the cluster: the pod is taken off
// its node first, and put back after. Ties between the best nodes go to the
// source node (a move must be strictly better), then to the node name, so
// predictions are repeatable. A pod whose scheduler is not modelled gets
// ErrUnknownScheduler.
func (s *Simulator) Predict(ctx context.Context, pod *v1.Pod, opts PredictOptions) (Prediction, error) {
	pred := Prediction{Source: pod.Spec.NodeName, Scheduler: s.SchedulerOf(pod)}
	sc, err := s.schedulerOf(pod)
	if err != nil {
		return pred, err
	}
	pred.Steered = sc.steered
	if pred.Source != "" {
		restore, err := s.offNode(pod)
		if err != nil {
			return pred, err
		}
		defer restore()
		if err := s.sync(); err != nil {
			return pred, err
		}
	}
	// The replacement is a new pod of the same template: not bound, no UID
	// of its own, no nominated node.
	candidate := pod.DeepCopy()
	candidate.Spec.NodeName = ""
	candidate.Status = v1.PodStatus{}
	candidate, undo, err := s.claimsForOneCycle(pod, candidate)
	if err != nil {
		return pred, err
	}
	defer undo()

	res, err := s.schedule(ctx, sc, candidate, nil, opts.Drained)
	if err != nil {
		return pred, err
	}
	res.list() // every feasible node's scores, in res.scores from here on
	feasible := len(res.scores)
	if opts.LeaveSource && slices.ContainsFunc(res.scores, func(ns fwk.NodePluginScores) bool { return ns.Name == pred.Source }) {
		feasible-- // the drain taint keeps it off the source
	}
	exhaustive := sc.scoresAll(feasible, res.considered)
	if sc.targets != nil && exhaustive {
		// The extender steers the replacement wherever the plan says;
		// the plan's scoring says where (see WithExtenders).
		if res.scores, err = s.rescore(ctx, sc.targets, candidate, res.scores); err != nil {
			return pred, err
		}
	}
	scores := res.scores
	for _, ns := range scores {
		if ns.Name == pred.Source {
			pred.SourceFeasible, pred.SourceScore = true, ns.TotalScore
		}
	}
	best, top, atTop := chooseTarget(scores, pred.Source, pred.Steered, opts)
	if best < 0 {
		pred.Unschedulable = unplaceable(pred, scores, res, opts)
		return pred, nil
	}
	pred.Node, pred.Score = scores[best].Name, scores[best].TotalScore
	pred.Exhaustive = exhaustive
	pred.Certain = pred.Exhaustive && atTop == 1 && pred.Score == top
	if !pred.Certain && !pred.Steered && opts.LeaveSource {
		// The drain taint keeps it off its source.
		choice := slices.DeleteFunc(slices.Clone(scores), func(ns fwk.NodePluginScores) bool { return ns.Name == pred.Source })
		pred.Candidates = sc.candidates(choice, exhaustive, res.considered)
	}
	return pred, nil
}

// offNode takes the bound pod off its node in the cache for one cycle:
// the state does not change. restore puts it back.
func (s *Simulator) offNode(pod *v1.Pod) (restore func(), err error) {
	e, ok := s.bound[pod.UID]
	if !ok {
		return nil, fmt.Errorf("pod %s (UID %s) is not in the simulation", klog.KObj(pod), pod.UID)
	}
	if err := s.removePod(e.pod); err != nil {
		return nil, fmt.Errorf("removing pod %s from the simulation: %w", klog.KObj(pod), err)
	}
	return func() {
		// Restoring what was just removed cannot fail unless the cache is broken.
		if err := s.addPod(e.pod); err != nil {
			panic(err)
		}
		if err := s.sync(); err != nil {
			panic(err)
		}
	}, nil
}

// chooseTarget is Predict's choice among the feasible nodes' scores: best
// is the chosen node's index (-1: none the options allow). top is the
// highest score of the nodes the scheduler itself may choose (all but the
// source with LeaveSource; Exclude and Prefer do not narrow them), and
// atTop how many have it.
func chooseTarget(scores []fwk.NodePluginScores, source string, steered bool, opts PredictOptions) (best int, top int64, atTop int) {
	best = -1
	preferred, second := -1, -1
	for i, ns := range scores {
		if ns.Name == source && opts.LeaveSource {
			continue
		}
		// The scheduler's own choice, which Exclude does not narrow.
		switch {
		case atTop == 0 || ns.TotalScore > top:
			top, atTop = ns.TotalScore, 1
		case ns.TotalScore == top:
			atTop++
		}
		// Exclude and Prefer are asked only about a node that would beat
		// the best so far: their callers' rules cost more than a score.
		bestYet := best < 0 || better(ns, scores[best], source)
		steerable := steered && ns.Name != source
		preferredYet := opts.Prefer != nil && steerable && (preferred < 0 || better(ns, scores[preferred], source))
		secondYet := opts.PreferElse != nil && steerable && preferred < 0 && (second < 0 || better(ns, scores[second], source))
		if !bestYet && !preferredYet && !secondYet || opts.Exclude != nil && ns.Name != source && opts.Exclude(ns.Name) {
			continue
		}
		if bestYet {
			best = i
		}
		switch {
		case preferredYet && opts.Prefer(ns.Name):
			preferred = i
		case secondYet && opts.PreferElse(ns.Name):
			second = i
		}
	}
	switch {
	case preferred >= 0:
		best = preferred
	case second >= 0:
		best = second
	}
	return best, top, atTop
}

// unplaceable is Prediction.Unschedulable when Predict finds no node: the
// cycle's diagnosis, or when nodes passed the filters (scores), that none
// is one the pod may go to.
func unplaceable(pred Prediction, scores []fwk.NodePluginScores, res cycle, opts PredictOptions) string {
	why := res.diagnosis
	if len(scores) > 0 {
		// Nodes passed the filters, but none the pod may go to.
		why = fmt.Sprintf("%d/%d nodes pass the filters, none it may go to", len(scores), res.considered)
		if pred.SourceFeasible && opts.LeaveSource {
			why += fmt.Sprintf(": it must leave %s", pred.Source)
			if len(scores) > 1 {
				why += ", and the others are ruled out as targets"
			}
		}
	}
	return why
}

// candidates are the nodes of scores (all feasible nodes) that sc may
// choose by itself: the best, ties included, when it scores them all
// (exhaustive), else each node that is best in some sample of
// nodesToScore(considered) of them. kube-scheduler takes its sample from a
// rotating start in its own node order, which depends on when each node
// joined its cache and is not known here: any sample of that size is
// assumed possible. Scores are taken as scored with every feasible node;
// plugins that normalize over the sample may score a sample a little
// differently.
func (sc *scheduler) candidates(scores []fwk.NodePluginScores, exhaustive bool, considered int) []string {
	sample := len(scores)
	if !exhaustive {
		sample = sc.nodesToScore(considered)
	}
	var out []string
	for _, i := range winners(scores, sample) {
		out = append(out, scores[i].Name)
	}
	return out
}

// winners returns, in order, the indices of the scores that are highest
// (ties included) in some sample of n of them: a score is, when at least
// n-1 others are not above it.
func winners(scores []fwk.NodePluginScores, n int) []int {
	sorted := make([]int64, len(scores))
	for i, s := range scores {
		sorted[i] = s.TotalScore
	}
	slices.Sort(sorted)
	n = min(max(n, 1), len(scores))
	var out []int
	for i, s := range scores {
		// How many scores, this one included, are not above it.
		notAbove, _ := slices.BinarySearch(sorted, s.TotalScore+1)
		if notAbove >= n {
			out = append(out, i)
		}
	}
	return out
}

func better(a, b fwk.NodePluginScores, source string) bool {
	if a.TotalScore != b.TotalScore {
		return a.TotalScore > b.TotalScore
	}
	if (a.Name == source) != (b.Name == source) {
		return a.Name == source
	}
	return a.Name < b.Name
}

// claimsForOneCycle gives candidate, the pod a cycle schedules in pod's
// place, its claims for that cycle only: pod's claims made from templates
// are released, candidate's made anew, as for a replacement. undo reverts
// them.
func (s *Simulator) claimsForOneCycle(pod, candidate *v1.Pod) (_ *v1.Pod, undo func(), err error) {
	if s.dra == nil || len(pod.Spec.ResourceClaims) == 0 {
		return candidate, func() {}, nil
	}
	f := s.Fork()
	undo = func() {
		if err := s.Revert(f); err != nil {
			panic(err)
		}
	}
	s.releaseClaims(pod)
	if candidate, err = s.withClaims(candidate); err != nil {
		undo()
		return nil, nil, err
	}
	return candidate, undo, nil
}

// Resolvable runs a scheduling cycle for the pending pod with its own
// scheduler's profile and returns the nodes that rejected it only in a way
// taking pods off them may resolve (status Unschedulable, such as too
// little of a resource; not UnschedulableAndUnresolvable, such as a taint,
// a node selector or affinity), as kube-scheduler's preemption chooses the
// nodes where preemption might help. A node that rejected it for several
// reasons is judged by the first filter that did, as there. fits says the
// pod fits some node as the cluster is: then no node is listed.
func (s *Simulator) Resolvable(ctx context.Context, pod *v1.Pod) (fits bool, nodes []string, err error) {
	sc, err := s.schedulerOf(pod)
	if err != nil {
		return false, nil, err
	}
	pod, undo, err := s.claimsForOneCycle(pod, pod)
	if err != nil {
		return false, nil, err
	}
	defer undo()
	s.keepCodes = true
	c, err := s.schedule(ctx, sc, pod, nil, nil)
	s.keepCodes = false
	if err != nil || c.fit() > 0 {
		return c.fit() > 0, nil, err
	}
	for i, code := range c.codes {
		if code == fwk.Unschedulable {
			nodes = append(nodes, c.nodes[i].Node().Name)
		}
	}
	return false, nodes, nil
}
