package planner

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/klog/v2"
	"sigs.k8s.io/descheduler/pkg/descheduler/evictions"

	"github.com/rebalancer-dev/rebalancer/pkg/claims"
	"github.com/rebalancer-dev/rebalancer/pkg/disruption"
	"github.com/rebalancer-dev/rebalancer/pkg/gang"
	"github.com/rebalancer-dev/rebalancer/pkg/hint"
	"github.com/rebalancer-dev/rebalancer/pkg/optout"
	"github.com/rebalancer-dev/rebalancer/pkg/plan"
	"github.com/rebalancer-dev/rebalancer/pkg/scheduler/loadaware"
	"github.com/rebalancer-dev/rebalancer/pkg/simulator"
	"github.com/rebalancer-dev/rebalancer/pkg/snapshot"
	"github.com/rebalancer-dev/rebalancer/pkg/wellknown"
)

// maxPerWorkload is the most moves of the owner within the cooldown; 0 is
// no limit.
func (p *planner) maxPerWorkload(owner types.UID) int {
	// Validated with the flags; an invalid value is no limit.
	max, _ := intstr.GetScaledValueFromIntOrPercent(&p.opts.MaxPerWorkload, p.ownerPods[owner], true)
	return max
}

// countOwnerPods counts the pods of each controller.
func countOwnerPods(state *snapshot.Snapshot) map[types.UID]int {
	n := map[types.UID]int{}
	for _, pod := range state.Pods {
		if owner := metav1.GetControllerOf(pod); owner != nil {
			n[owner.UID]++
		}
	}
	return n
}

// full says whether the plan holds the policy's maxNoOfPodsToEvictTotal
// moves: no plugin can add one.
func (p *planner) full() bool {
	max := p.policy.MaxNoOfPodsToEvictTotal
	return max != nil && p.total >= *max
}

// evictionsLeft is how many more pods the policy's maxNoOfPodsToEvictPerNode
// lets the plan evict from node, and that limit in words; -1 without it.
func (p *planner) evictionsLeft(node string) (int, string) {
	limit := p.policy.MaxNoOfPodsToEvictPerNode
	if limit == nil {
		return -1, ""
	}
	return max(0, int(*limit)-int(p.perNode[node])), fmt.Sprintf("maxNoOfPodsToEvictPerNode %d", *limit)
}

// namespaceFull says whether the plan holds the policy's
// maxNoOfPodsToEvictPerNamespace moves of ns's pods.
func (p *planner) namespaceFull(ns string) bool {
	max := p.policy.MaxNoOfPodsToEvictPerNamespace
	return max != nil && p.perNamespace[ns] >= *max
}

// cannotEmpty says why the plan cannot empty the node of asked, the
// first pod a packing plugin asks to evict from it, "" when it may or when
// asked itself must stay (the judge names that reason): a pod on it stays
// (pinnedBy), or the policy's limits cannot take all of its pods. A
// packing plugin's move holds only if the plan empties its source
// (packingChurn), so the first eviction from such a node is refused, and
// the limits are left to the nodes the plugin can free.
func (p *planner) cannotEmpty(asked *v1.Pod, evictable func(*v1.Pod) bool) (why, detail string) {
	if p.full() {
		return "", "" // the judge's refusal stops the plugin
	}
	if why, _ := p.mustStay(asked); why != "" {
		return "", ""
	}
	node := asked.Spec.NodeName
	if pod, why, detail := p.pinnedBy(node, evictable); pod != nil {
		return plan.ReasonNoNodeFreed, fmt.Sprintf("%s stays on %s (%s: %s)", key(pod), node, why, detail)
	}
	pods, err := p.podsOnNode(node, func(pod *v1.Pod) bool { return !simulator.NodeBound(pod) })
	if err != nil {
		return "", "" // the judge finds out
	}
	if detail, _ := p.limitsForbid(node, pods); detail != "" {
		return plan.ReasonLimit, detail
	}
	return "", ""
}

// pinnedBy returns the first pod that keeps node in use whatever the plan
// does, and why: one evictable refuses (the profile's evictor filters), or
// one the planner would not move (mustStay: opted out, sticky, in its
// cooldown, held by a PDB, evicted by its owner in the background, ...).
func (p *planner) pinnedBy(node string, evictable func(*v1.Pod) bool) (*v1.Pod, string, string) {
	pods, _ := p.podsOnNode(node, nil) // the node is in the simulation: no error
	for _, pod := range pods {
		if simulator.NodeBound(pod) {
			continue
		}
		if !evictable(pod) {
			return pod, plan.ReasonProtected, "the evictor's filters protect it"
		}
		if why, detail := p.mustStay(pod); why != "" {
			return pod, why, detail
		}
	}
	return nil, "", ""
}

// limitsForbid says which of the policy's limits keeps the plan from
// evicting pods, all from node, on top of its moves: a skip detail naming
// the limit, what the pods need and what it leaves, and whether that is
// maxNoOfPodsToEvictPerNode, which the node's pods exceed in any plan,
// rather than the total or a namespace's, which the plan's moves spent.
// "" when the limits take them all, or when the plan is full: the judge's
// refusal then stops the plugin.
func (p *planner) limitsForbid(node string, pods []*v1.Pod) (detail string, perNode bool) {
	if p.full() {
		return "", false
	}
	n := len(pods)
	if left, limit := p.evictionsLeft(node); left >= 0 && n > left {
		return fmt.Sprintf("emptying %s takes %d evictions and %s leaves %d", node, n, limit, left), true
	}
	if max := p.policy.MaxNoOfPodsToEvictTotal; max != nil && int(p.total)+n > int(*max) {
		return fmt.Sprintf("emptying %s takes %d evictions and maxNoOfPodsToEvictTotal %d leaves %d", node, n, *max, int(*max)-int(p.total)), false
	}
	if max := p.policy.MaxNoOfPodsToEvictPerNamespace; max != nil {
		need := map[string]int{}
		for _, pod := range pods {
			need[pod.Namespace]++
		}
		for _, ns := range slices.Sorted(maps.Keys(need)) {
			if int(p.perNamespace[ns])+need[ns] > int(*max) {
				return fmt.Sprintf("emptying %s takes %d evictions in %s and maxNoOfPodsToEvictPerNamespace %d leaves %d", node, need[ns], ns, *max, int(*max)-int(p.perNamespace[ns])), false
			}
		}
	}
	return "", false
}

// errSkipped tells a plugin its eviction was not taken; the plugin moves on
// to its next candidate.
var errSkipped = errors.New("eviction not in the plan")

// judge decides one eviction a plugin asked for. It returns nil when the
// move enters the plan (the plugin then accounts for it as evicted), and an
// error otherwise; limit errors use the descheduler's own types so plugins
// stop asking for more on that node, namespace or at all.
// room, for a move that makes room for a pending pod (MakeRoom), names
// that pod: the replacement leaves its source (simOpts.LeaveSource) for
// the pending pod, which is not a drain (the node is not tainted), gains
// no score, and must be steered (decide).
func (p *planner) judge(ctx context.Context, profile, strategy string, pod *v1.Pod, opts evictions.EvictOptions, simOpts simulator.PredictOptions, room string) error {
	if p.moved.Has(pod.UID) || p.replacements.Has(pod.UID) || p.arriving.Has(pod.UID) {
		return errSkipped // another plugin already moved it in this plan
	}
	skip := func(why, detail string, err error) error {
		p.skip(profile, strategy, pod, why, detail)
		return err
	}
	if why, detail := p.alone(stays(p.sim, pod, pod.Spec.NodeName, p.balancing)); why != "" {
		return skip(why, detail, errSkipped)
	}

	// The policy's limits and ours, in the order the descheduler checks its own.
	if p.full() {
		return skip(plan.ReasonLimit, fmt.Sprintf("maxNoOfPodsToEvictTotal %d reached", *p.policy.MaxNoOfPodsToEvictTotal), evictions.NewEvictionTotalLimitError())
	}
	if left, limit := p.evictionsLeft(pod.Spec.NodeName); left == 0 {
		return skip(plan.ReasonLimit, fmt.Sprintf("%s reached on %s", limit, pod.Spec.NodeName), evictions.NewEvictionNodeLimitError(pod.Spec.NodeName))
	}
	if p.namespaceFull(pod.Namespace) {
		return skip(plan.ReasonLimit, fmt.Sprintf("maxNoOfPodsToEvictPerNamespace %d reached in %s", *p.policy.MaxNoOfPodsToEvictPerNamespace, pod.Namespace), evictions.NewEvictionNamespaceLimitError(pod.Namespace))
	}
	owner := metav1.GetControllerOf(pod)
	if owner != nil {
		if max := p.maxPerWorkload(owner.UID); max > 0 {
			if recent, planned := p.opts.History.Moved(owner.UID), p.perOwner[owner.UID]; recent+planned >= max {
				return skip(plan.ReasonWorkloadLimit, fmt.Sprintf("%s %s: %d of its %d pods moved within the cooldown, %d more in this plan; --max-per-workload %s allows %d",
					owner.Kind, owner.Name, recent, p.ownerPods[owner.UID], planned, p.opts.MaxPerWorkload.String(), max), errSkipped)
			}
		}
	}
	pdb, why, detail := p.heldBack(pod)
	if why != "" {
		return skip(why, detail, errSkipped)
	}

	// No balance move off a node the plan moves pods onto, and no move
	// onto a node it moves pods off: a plan never undoes itself.
	if p.balancing && p.targets[pod.Spec.NodeName] > 0 {
		return skip(plan.ReasonTarget, fmt.Sprintf("the plan moves pods onto %s, so it does not move pods off it", pod.Spec.NodeName), errSkipped)
	}
	if exclude := simOpts.Exclude; len(p.sources) > 0 {
		simOpts.Exclude = func(n string) bool { return p.sources[n] > 0 || (exclude != nil && exclude(n)) }
	}
	// Nor back onto a node a pod of its owner was moved off within the
	// cooldown: across cycles, one plan never undoes another. Such a node
	// is ruled out as a target, and a drain's replacement left to its
	// scheduler may not be able to land there; stray stays nil when
	// nothing else is ruled out (decide: then no drain is left to its
	// scheduler's choice).
	stray := simOpts.Exclude
	if owner != nil {
		simOpts.Exclude = p.notBack(owner.UID, deploymentOf(pod), simOpts.Exclude)
		if stray != nil {
			stray = simOpts.Exclude
		}
	}
	// The nodes the plan drains are tainted before its first eviction.
	simOpts.Drained = p.drainedNodes
	pred, err := p.sim.Predict(ctx, pod, simOpts)
	if errors.Is(err, simulator.ErrUnknownScheduler) {
		p.skipFor(profile, strategy, pod, pred.Scheduler, plan.ReasonUnknownScheduler,
			fmt.Sprintf("no profile of scheduler %q is modelled: give its configuration with --scheduler-config", pred.Scheduler))
		return errSkipped
	}
	if err != nil {
		return fmt.Errorf("simulating %s: %w", klog.KObj(pod), err)
	}
	if p.balancing && p.conflicting[pred.Scheduler].Has(strategy) {
		p.skipFor(profile, strategy, pod, pred.Scheduler, plan.ReasonConflict,
			fmt.Sprintf("scheduler %q does not follow rebalance hints and its profile pulls against %s", pred.Scheduler, strategy))
		return errSkipped
	}
	// A gang's other members leave their nodes with it: no gain of their
	// own, and their nodes are not emptied for it.
	companion := p.group != nil && pod.UID != p.group.asked
	balance, drain := p.balancing && room == "" && !companion, simOpts.LeaveSource && room == "" && !companion
	v := decide(pred, intent{balance: balance, drain: drain, room: room}, stray, p.opts.MinScoreGain)
	switch v.reason {
	case "":
	case plan.ReasonUnsteered:
		p.skipFor(profile, strategy, pod, pred.Scheduler, v.reason, v.detail)
		return errSkipped
	default:
		return skip(v.reason, v.detail, errSkipped)
	}
	if p.survey != nil {
		p.survey.move() // a survey only finds the turns that would move
		return errSkipped
	}

	replacement, err := p.sim.Relocate(ctx, pod, pred.Node)
	if err != nil {
		return fmt.Errorf("applying the move of %s: %w", klog.KObj(pod), err)
	}
	a := applied{target: pred.Node, obj: pod, pod: pod.UID, replacement: replacement.UID, node: pod.Spec.NodeName, namespace: pod.Namespace, podName: pod.Name, pdb: pdb,
		drain: drain}
	if owner != nil {
		a.owner = owner.UID
	}
	p.count(a, 1)
	p.applied = append(p.applied, a)
	m := plan.Move{
		Pod: key(pod), Namespace: pod.Namespace, Name: pod.Name, UID: string(pod.UID),
		Profile: profile, Strategy: strategy, Reason: reason(strategy, opts.Reason),
		Scheduler: pred.Scheduler, Steered: v.steered, Anywhere: v.anywhere, Candidates: v.candidates,
		Source: pred.Source, Target: pred.Node, TargetScore: pred.Score,
		Drain:   drain, // only plugins that empty nodes insist the pod leave
		Room:    room,
		Gang:    p.gangName(),
		Balance: balance,
		Cost:    disruption.Cost(pod),
	}
	if owner != nil {
		m.Owner = &plan.Owner{Kind: owner.Kind, Name: owner.Name, UID: string(owner.UID)}
	}
	req := loadaware.Requests(pod)
	m.Requests = plan.Resources{MilliCPU: req.MilliCPU, Memory: req.Memory}
	if p.sim.HasLoad() {
		used, measured := p.sim.PodLoad(pod)
		m.Usage, m.UsageEstimated = &plan.Resources{MilliCPU: used.MilliCPU, Memory: used.Memory}, !measured
	}
	if pred.SourceFeasible {
		m.SourceScore = &pred.SourceScore
	}
	p.out.Moves = append(p.out.Moves, m)
	p.logger.V(2).Info("Move planned", "pod", klog.KObj(pod), "strategy", strategy, "source", m.Source, "target", m.Target, "targetScore", m.TargetScore)
	return nil
}

// notBack adds to ruledOut the nodes pods of the workload (owner, or the
// Deployment deployment) were moved off within the cooldown
// (History.Left): no replacement of its goes there. It returns ruledOut
// itself, nil included, when there are none.
func (p *planner) notBack(owner types.UID, deployment string, ruledOut func(node string) bool) func(node string) bool {
	k := workloadKey{owner, deployment}
	left, ok := p.left[k]
	if !ok {
		left = p.opts.History.Left(owner, deployment)
		if p.left == nil {
			p.left = map[workloadKey][]string{}
		}
		p.left[k] = left
	}
	if len(left) == 0 {
		return ruledOut
	}
	return func(n string) bool { return slices.Contains(left, n) || (ruledOut != nil && ruledOut(n)) }
}

// workloadKey is what History.Left is asked about.
type workloadKey struct {
	owner      types.UID
	deployment string
}

// deploymentOf names the Deployment behind pod's ReplicaSet
// ("namespace/name"), "" for any other pod.
func deploymentOf(pod *v1.Pod) string {
	if name, ok := hint.DeploymentOf(pod); ok {
		return pod.Namespace + "/" + name
	}
	return ""
}

// strayLanding says where the replacement of a move left to its
// scheduler's own choice might land that bad rules out, "" when nowhere:
// bad is asked about every node the scheduler could choose.
func strayLanding(pred simulator.Prediction, bad func(node string) bool) string {
	candidates := pred.Candidates
	if pred.Certain {
		candidates = []string{pred.Node}
	}
	if len(candidates) == 0 {
		return "the nodes it may choose are not known"
	}
	var stray []string
	for _, n := range candidates {
		if bad(n) {
			stray = append(stray, n)
		}
	}
	switch len(stray) {
	case 0:
		return ""
	case 1:
		return fmt.Sprintf("one of the %d nodes it may choose, %s, is not a target the plan accepts (empty, emptied, or ruled out)", len(candidates), stray[0])
	}
	return fmt.Sprintf("%d of the %d nodes it may choose (%s first) are not targets the plan accepts (empty, emptied, or ruled out)", len(stray), len(candidates), stray[0])
}

// mustStay says why a balance plugin's move of pod would be refused
// whatever the target, by the checks of judge that do not depend on the
// plan's limits: an opt-out, a sticky pod, the cooldown, a PDB that allows
// no disruption; "" when none. A gang's member moves only with its whole
// gang (moveGang): it must stay when any member must (reason gang, naming
// that member). A node holding such a pod stays in use: Consolidation
// prefers it as a target.
func (p *planner) mustStay(pod *v1.Pod) (why, detail string) {
	if gangKey(pod) == "" {
		return p.mustStayAlone(pod)
	}
	return p.gangMustStay(pod)
}

// mustStayAlone is mustStay of pod, its gang (moved whole) aside.
func (p *planner) mustStayAlone(pod *v1.Pod) (why, detail string) {
	why, detail = stays(p.sim, pod, pod.Spec.NodeName, true)
	if why == "" || why == plan.ReasonGang {
		_, why, detail = p.heldBack(pod)
	}
	return why, detail
}

// stays says why pod on node is not moved by anyone (untouchable), or,
// for a balance move, because it is sticky; judge's first checks, and
// Recheck.Validate's before each eviction.
func stays(sim *simulator.Simulator, pod *v1.Pod, node string, balance bool) (why, detail string) {
	why, detail = untouchable(sim, pod, node)
	if why != "" && why != plan.ReasonGang {
		return why, detail
	}
	if balance && hint.IsSticky(pod) {
		return plan.ReasonSticky, fmt.Sprintf("the pod is annotated %s=true: it stays on %s unless a deschedule plugin finds it misplaced", wellknown.StickyAnnotation, node)
	}
	return why, detail // "" or its gang's, which a gang moved whole passes
}

// heldBack says why pod is not moved now: its owner's cooldown, or a
// PodDisruptionBudget as the eviction API applies them; judge checks it
// after the plan's limits, as the descheduler does. pdb is the budgets'
// admission of the eviction, for the plan to spend.
func (p *planner) heldBack(pod *v1.Pod) (pdb *policyv1.PodDisruptionBudget, why, detail string) {
	if owner := metav1.GetControllerOf(pod); owner != nil {
		if _, ok := p.opts.History.InCooldown(owner.UID, pod.Spec.NodeName, time.Time{}); ok {
			return pdb, plan.ReasonCooldown, p.cooldownDetail(pod)
		}
	}
	pdb, err := p.budgets.Admit(pod)
	if err != nil {
		return pdb, plan.ReasonPDB, p.pdbDetail(pod, err)
	}
	return pdb, "", ""
}

// gangDetail says why a gang's member stays: evicted alone, its group may
// fall below the members it needs and its job fail or restart whole.
func gangDetail(group string) string {
	return fmt.Sprintf("the pod belongs to a gang (%s): it is not moved alone", group)
}

// alone passes on why a pod stays, unless the reason is its gang and the
// gang is being moved whole (p.group).
func (p *planner) alone(why, detail string) (string, string) {
	if why == plan.ReasonGang && p.group != nil {
		return "", ""
	}
	return why, detail
}

func (p *planner) cooldownDetail(pod *v1.Pod) string {
	return fmt.Sprintf("a pod of its owner was moved onto %s less than %s ago", pod.Spec.NodeName, p.opts.History.Cooldown())
}

// pdbDetail says why the PDBs covering pod refuse its eviction (err).
func (p *planner) pdbDetail(pod *v1.Pod, err error) string {
	detail := disruption.Reason(err)
	if covering := p.budgets.Covering(pod); len(covering) > 1 {
		names := make([]string, len(covering))
		for i, c := range covering {
			names[i] = c.Name
		}
		detail += " (" + strings.Join(names, ", ") + ")"
	}
	return detail
}

// untouchable says why no move of pod on node is made by anyone, at plan
// time or before its eviction: its owner evicts it in the background, it
// or its node opts out, it uses devices through a ResourceClaim that cannot
// follow it, or it belongs to a gang (which moves only whole, see
// moveGang); a plan reason and its detail, "" when none. judge, mustStay
// and Recheck.Validate begin with it.
func untouchable(sim *simulator.Simulator, pod *v1.Pod, node string) (why, detail string) {
	if evictingInBackground(pod) {
		return plan.ReasonEvicting, evictingDetail(pod)
	}
	if annotation := optedOut(sim, pod, node); annotation != "" {
		return plan.ReasonOptOut, annotation
	}
	if c := claims.Pinned(pod); len(c) > 0 {
		return plan.ReasonClaim, fmt.Sprintf("the pod uses devices through ResourceClaim %s, which stays allocated where it is (a claim the pod names, which others may share, or one for extended resources): it stays on %s", plan.Abbreviate(c, 3), node)
	}
	// Last: a gang moved whole passes every other check.
	if g := gang.Of(pod); g != "" {
		return plan.ReasonGang, gangDetail(g)
	}
	return "", ""
}

// optedOut says which annotation keeps the pod on node, on the pod or on
// the node as sim has it; "" when none does.
func optedOut(sim *simulator.Simulator, pod *v1.Pod, node string) string {
	if a := optout.Pod(pod); a != "" {
		return "the pod is annotated " + a
	}
	if ni, err := sim.Node(node); err == nil {
		if a := optout.Node(ni.Node()); a != "" {
			return fmt.Sprintf("its node %s is annotated %s", node, a)
		}
	}
	return ""
}

// skip records an eviction the plan refuses.
func (p *planner) skip(profile, strategy string, pod *v1.Pod, why, detail string) {
	p.skipFor(profile, strategy, pod, "", why, detail)
}

// skipFor records an eviction the plan refuses because of the pod's
// scheduler. While a gang is judged, the first refusal is its own.
// A move skipped as unsteered is counted for the plan's warning. In a
// survey the record waits until the source's turn is taken.
func (p *planner) skipFor(profile, strategy string, pod *v1.Pod, scheduler, why, detail string) {
	record := func() {
		if why == plan.ReasonUnsteered {
			p.unsteered[scheduler]++
		}
		if p.group != nil {
			p.group.refuse(pod, why, detail)
			return
		}
		p.out.Skipped = append(p.out.Skipped, plan.Skip{Pod: key(pod), UID: string(pod.UID), Profile: profile, Strategy: strategy, Scheduler: scheduler, Reason: why, Detail: detail})
		p.logger.V(3).Info("Eviction skipped", "pod", klog.KObj(pod), "strategy", strategy, "why", why, "detail", detail)
	}
	if p.survey != nil {
		p.survey.keep(record)
		return
	}
	record()
}

func key(pod *v1.Pod) string { return pod.Namespace + "/" + pod.Name }

// reason says in a few words why a strategy moves a pod. The descheduler's
// plugins leave EvictOptions.Reason empty; when one sets it, it wins.
func reason(strategy, given string) string {
	if given != "" {
		return given
	}
	if r, ok := reasons[strategy]; ok {
		return r
	}
	return strategy
}

var reasons = map[string]string{
	"HighNodeUtilization":                         "node underutilized",
	"LowNodeUtilization":                          "node overutilized",
	"RemoveDuplicates":                            "duplicate of its workload on the node",
	"RemovePodsViolatingNodeTaints":               "untolerated node taint",
	"RemovePodsViolatingNodeAffinity":             "node affinity no longer met",
	"RemovePodsViolatingInterPodAntiAffinity":     "inter-pod anti-affinity violated",
	"RemovePodsViolatingTopologySpreadConstraint": "topology spread violated",
	"RemovePodsHavingTooManyRestarts":             "too many restarts",
	"PodLifeTime":                                 "exceeded its lifetime",
	"RemoveFailedPods":                            "failed pod",
}
