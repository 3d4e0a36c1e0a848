package simulator

import (
	"context"
	"errors"
	"fmt"

	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/apis/config"
	"k8s.io/kubernetes/pkg/scheduler/framework"

	"github.com/rebalancer-dev/rebalancer/pkg/scheduler/rebalancehint"
)

// scheduler is one scheduler of the cluster: its profile's framework, over
// the simulation's shared cache.
type scheduler struct {
	profile   *config.KubeSchedulerProfile // as configured, sampling included
	framework framework.Framework
	// hints is the profile's RebalanceHint plugin, nil when the profile
	// does not enable it.
	hints *rebalancehint.Plugin
	// devices is the profile's DynamicResources plugin, nil when DRA is
	// off or the profile does not enable it.
	devices devicePlugin
	// steered: the profile scores with RebalanceHint, or rebalancer's
	// extender steers it (modelled as RebalanceHint, see WithExtenders).
	steered bool
	// extender: rebalancer's extender steers this scheduler, which does not
	// follow hints by a plugin of its own.
	extender bool
	// targets is the scheduler whose scoring picks the targets of an
	// extender-steered scheduler's pods (see WithExtenders); nil: its own.
	targets *scheduler
	// next is where this scheduler's next node search starts, as
	// kube-scheduler's nextStartNodeIndex (Replay with a random source only).
	next int
	// hintDecides: RebalanceHint's lead over every other node, times its
	// weight, is more than all the profile's other scores can add up to,
	// so a hinted target that passes the filters wins (see hinted).
	hintDecides bool
	// filterAll filters every node even where kube-scheduler stops early
	// (tests compare the two).
	filterAll bool
	// classes: cycles may run the framework on one node of each class of
	// alike nodes (see classes.go); filters and scores name the profile's
	// Filter and Score plugins.
	classes         bool
	filters, scores []string
	// run runs the profile's Filter and Score plugins as the framework
	// does, at less cost per node (see runner); nil: the framework does.
	run *runner
	// byClass are the lists of a cycle's scores by class (classScores),
	// reused from cycle to cycle: a cycle's scores are read before the
	// scheduler's next cycle, and a list for every node of a large
	// cluster is most of what a cycle would allocate.
	byClass byClassLists
}

// byClassLists are classScores.list's lists.
type byClassLists struct {
	scores []fwk.NodePluginScores
	of     []int
}

// filterer is RunFilterPlugins for pod's cycle of sc over the n nodes of
// the node list: the runner's, with the filters state leaves active, else
// the framework's own. slot is the node's place in the list (-1, and n 0:
// a cycle of one node, which remembers nothing). verdicts are the pass's
// verdicts remembered by node class (none with the framework's own).
func (sc *scheduler) filterer(state fwk.CycleState, pod *v1.Pod, n int) (run func(ctx context.Context, ni fwk.NodeInfo, slot int) *fwk.Status, verdicts classVerdicts) {
	if sc.run == nil {
		return func(ctx context.Context, ni fwk.NodeInfo, _ int) *fwk.Status {
			return sc.framework.RunFilterPlugins(ctx, state, pod, ni)
		}, classVerdicts{}
	}
	fp := sc.run.filterPass(state, pod, n)
	return func(ctx context.Context, ni fwk.NodeInfo, slot int) *fwk.Status {
		return fp.filter(ctx, state, pod, ni, slot)
	}, classVerdicts{memo: &sc.run.passes, memos: fp.memos}
}

// runPreScore is RunPreScorePlugins of sc: the runner's, else the
// framework's own.
func (sc *scheduler) runPreScore(ctx context.Context, state fwk.CycleState, pod *v1.Pod, nodes []fwk.NodeInfo) *fwk.Status {
	if sc.run == nil {
		return sc.framework.RunPreScorePlugins(ctx, state, pod, nodes)
	}
	return sc.run.preScore(ctx, state, pod, nodes)
}

// runScore is RunScorePlugins of sc: the runner's, else the framework's
// own. slots are the nodes' places in the node list of total nodes (nil:
// not known), and classes their classes when the cycle scores by class
// (nil: it does not).
func (sc *scheduler) runScore(ctx context.Context, state fwk.CycleState, pod *v1.Pod, nodes []fwk.NodeInfo, slots, classes []int, total int) ([]fwk.NodePluginScores, *fwk.Status) {
	if sc.run == nil {
		return sc.framework.RunScorePlugins(ctx, state, pod, nodes)
	}
	return sc.run.score(ctx, state, pod, nodes, slots, classes, total)
}

// ErrUnknownScheduler is returned for a pod whose scheduler the simulation
// has no profile for: it cannot say where that pod would go.
var ErrUnknownScheduler = errors.New("no profile of this scheduler is modelled")

// SchedulerName is the scheduler that places pod: spec.schedulerName, or
// default-scheduler, as the API server defaults it.
func SchedulerName(pod *v1.Pod) string {
	if pod.Spec.SchedulerName == "" {
		return v1.DefaultSchedulerName
	}
	return pod.Spec.SchedulerName
}

// SchedulerOf is the scheduler that places pod's replacement: the one an
// opt-in gives it (WithOptIn), else the one it names.
func (s *Simulator) SchedulerOf(pod *v1.Pod) string {
	if s.optIn != nil {
		if name := s.optIn(pod, s.namespaces[pod.Namespace]); name != "" {
			return name
		}
	}
	return SchedulerName(pod)
}

func (s *Simulator) schedulerOf(pod *v1.Pod) (*scheduler, error) {
	name := s.SchedulerOf(pod)
	sc, ok := s.schedulers[name]
	if !ok {
		return nil, fmt.Errorf("pod %s, scheduler %q: %w", klog.KObj(pod), name, ErrUnknownScheduler)
	}
	return sc, nil
}

// Scheduler describes one modelled scheduler.
type Scheduler struct {
	Profile *config.KubeSchedulerProfile
	// Steered: the profile follows rebalance hints.
	Steered bool
	// Extender: rebalancer's extender steers it, not a plugin of its own;
	// TargetsBy then names the scheduler whose scoring picks its pods'
	// targets ("" when its own does).
	Extender  bool
	TargetsBy string
	// ScoreWeights is the weight of every Score plugin of the profile, as
	// the framework resolved them from the configuration and its defaults.
	ScoreWeights map[string]int32
}

// Schedulers lists the modelled schedulers in configuration order.
func (s *Simulator) Schedulers() []Scheduler {
	out := make([]Scheduler, 0, len(s.names))
	for _, name := range s.names {
		sc := s.schedulers[name]
		weights := map[string]int32{}
		for _, p := range sc.framework.ListPlugins().Score.Enabled {
			weights[p.Name] = p.Weight
		}
		out = append(out, Scheduler{Profile: sc.profile, Steered: sc.steered, Extender: sc.extender, ScoreWeights: weights})
		if sc.targets != nil {
			out[len(out)-1].TargetsBy = sc.targets.profile.SchedulerName
		}
	}
	return out
}

// scoresAll says whether kube-scheduler, finding feasible of considered
// nodes feasible, scores them all rather than a sample: the condition for
// its choice to be predictable (Prediction.Exhaustive).
func (sc *scheduler) scoresAll(feasible, considered int) bool {
	return feasible <= sc.nodesToScore(considered)
}

// nodesToScore is how many feasible nodes kube-scheduler looks for before
// it stops filtering and scores them, among n nodes (its
// numFeasibleNodesToFind): all below 100 nodes, else the profile's
// percentageOfNodesToScore, adaptive when unset or 0.
func (sc *scheduler) nodesToScore(n int) int {
	const minNodes, minPercentage = 100, 5
	if !sc.framework.HasScorePlugins() {
		return 1 // the first feasible node wins
	}
	if n < minNodes {
		return n
	}
	var pct int32
	if p := sc.profile.PercentageOfNodesToScore; p != nil {
		pct = *p
	}
	if pct >= 100 {
		return n
	}
	if pct == 0 {
		pct = max(int32(50)-int32(n)/125, minPercentage)
	}
	return max(n*int(pct)/100, minNodes)
}

// sample keeps the feasible nodes kube-scheduler would find: walking the
// node list from where its last search stopped, the first nodesToScore
// feasible ones. feasible is indexed like the node list, nil where a node
// failed; the search start moves past the nodes walked, as kube-scheduler's
// nextStartNodeIndex does.
func (sc *scheduler) sample(feasible []fwk.NodeInfo) []fwk.NodeInfo {
	n := len(feasible)
	want := sc.nodesToScore(n)
	out := make([]fwk.NodeInfo, 0, want)
	walked := 0
	for ; walked < n && len(out) < want; walked++ {
		if ni := feasible[(sc.next+walked)%n]; ni != nil {
			out = append(out, ni)
		}
	}
	sc.next = (sc.next + walked) % n
	return out
}
