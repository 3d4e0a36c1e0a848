// Package simulate runs rebalancing rounds over a snapshot, in memory: each
// round plans, evicts, lets the scheduler profile re-place the evicted pods
// as their owners recreate them, and measures the cluster. It runs either
// rebalancer's planner or the upstream descheduler as a baseline, with the
// same policy and scheduler profile, so the two can be compared.
package simulate

import (
	"context"
	"fmt"
	"math"
	"sort"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	"k8s.io/kubernetes/pkg/scheduler/apis/config"
	"sigs.k8s.io/descheduler/pkg/api"
	"sigs.k8s.io/descheduler/pkg/framework/pluginregistry"

	"github.com/rebalancer-dev/rebalancer/pkg/hint"
	"github.com/rebalancer-dev/rebalancer/pkg/planner"
	"github.com/rebalancer-dev/rebalancer/pkg/simulator"
	"github.com/rebalancer-dev/rebalancer/pkg/snapshot"
	"github.com/rebalancer-dev/rebalancer/pkg/upstream"
)

// Strategies.
const (
	Rebalancer = "rebalancer"
	Upstream   = "upstream"
)

// Options configure a simulation.
type Options struct {
	// Strategy is Rebalancer or Upstream.
	Strategy string
	Rounds   int
	// Registry holds the descheduler plugins rebalancer's planner may run.
	Registry pluginregistry.Registry
	// Planner tunes rebalancer's planner; its ID is set per round.
	Planner planner.Options
	// Interval is the time between rounds and Cooldown how long a
	// workload's pods stay on a node it moved pods onto, as `rebalancer run`
	// has them: rebalancer's planner leaves those pods alone, as it does in
	// run mode. For both strategies a pod evicted again within the cooldown
	// counts as ping-pong. Cooldown 0 turns rebalancer's cooldown off.
	Interval, Cooldown time.Duration
	// Start is the time of round 0, which replacements' creation times
	// count from; the zero time means a fixed date, so results are
	// repeatable. (Hints carry the real time: RebalanceHint judges their
	// age by the real clock.)
	Start time.Time
}

func (o Options) validate() error {
	if o.Strategy != Rebalancer && o.Strategy != Upstream {
		return fmt.Errorf("strategy %q: must be %q or %q", o.Strategy, Rebalancer, Upstream)
	}
	if o.Rounds < 1 {
		return fmt.Errorf("rounds %d: must be at least 1", o.Rounds)
	}
	if o.Interval <= 0 {
		return fmt.Errorf("interval %v: must be positive", o.Interval)
	}
	if o.Cooldown < 0 {
		return fmt.Errorf("cooldown %v: must not be negative", o.Cooldown)
	}
	return nil
}

// eviction is one pod a round evicts, and where rebalancer's plan expects
// the replacement ("" for the upstream baseline, which does not say).
type eviction struct {
	pod    *v1.Pod
	target string
}

// run holds the state carried from round to round.
type run struct {
	o      Options
	policy *api.DeschedulerPolicy
	prof   *config.KubeSchedulerProfile
	snap   *snapshot.Snapshot // the cluster now; Pods is replaced each round

	// lineage maps a replacement's UID to the UID of the pod its line
	// started with; lastEvicted keeps the round each line was last evicted.
	lineage     map[types.UID]types.UID
	lastEvicted map[types.UID]int
	// landed keeps the round an owner last had a pod moved onto a node
	// (the executor's cooldown).
	landed       map[landing]int
	replacements int
}

// Run simulates opts.Rounds rounds and measures the cluster after each.
// The snapshot is not modified.
func Run(ctx context.Context, policy *api.DeschedulerPolicy, prof *config.KubeSchedulerProfile, snap *snapshot.Snapshot, opts Options) (*Result, error) {
	if err := opts.validate(); err != nil {
		return nil, err
	}
	if opts.Start.IsZero() {
		opts.Start = time.Date(2026, time.January, 1, 0, 0, 0, 0, time.UTC)
	}
	current := *snap
	if opts.Strategy == Upstream {
		// The descheduler has none of rebalancer's own plugins.
		policy = upstream.Policy(policy)
	}
	r := &run{
		o: opts, policy: policy, prof: prof, snap: &current,
		lineage: map[types.UID]types.UID{}, lastEvicted: map[types.UID]int{}, landed: map[landing]int{},
	}
	res := &Result{Strategy: opts.Strategy}
	round0, nodes, err := r.measure(ctx, 0)
	if err != nil {
		return nil, err
	}
	res.Rounds = append(res.Rounds, round0)
	res.NodesBefore = nodes
	res.NodesAfter = nodes
	for i := 1; i <= opts.Rounds; i++ {
		round, nodes, err := r.round(ctx, i)
		if err != nil {
			return nil, fmt.Errorf("round %d: %w", i, err)
		}
		res.Rounds = append(res.Rounds, round)
		res.NodesAfter = nodes
		if round.Evictions == 0 && res.ConvergedAt == 0 {
			res.ConvergedAt = i
		}
		klog.FromContext(ctx).V(1).Info("Simulated round", "strategy", opts.Strategy, "round", i,
			"evictions", round.Evictions, "pingPong", round.PingPong, "nodesInUse", round.NodesInUse, "unschedulable", round.Unschedulable)
	}
	return res, nil
}

// round plans, evicts, re-places and measures.
func (r *run) round(ctx context.Context, i int) (Round, []NodeUtil, error) {
	evictions, err := r.plan(ctx, i)
	if err != nil {
		return Round{}, nil, err
	}
	now := r.o.Start.Add(time.Duration(i) * r.o.Interval)
	pingPong := 0
	evicted := map[types.UID]bool{}
	var queue []*v1.Pod              // pods waiting for a node, in queue order
	var leaving []*v1.Pod            // evicted pods as the scheduler sees them go
	source := map[types.UID]string{} // replacement UID -> node its predecessor left
	for _, e := range evictions {
		pod := e.pod
		evicted[pod.UID] = true
		line := r.root(pod.UID)
		if last, ok := r.lastEvicted[line]; ok && time.Duration(i-last)*r.o.Interval < r.o.Cooldown {
			pingPong++
		}
		r.lastEvicted[line] = i
		owner := metav1.GetControllerOf(pod)
		if owner == nil {
			continue // nobody recreates it
		}
		if e.target != "" {
			r.landed[landing{owner.UID, e.target}] = i
		}
		if e.target != "" {
			pod = pod.DeepCopy()
			// Stamped with the real time: RebalanceHint ignores hints older
			// than its TTL by the real clock.
			h := hint.Hint{Source: pod.Spec.NodeName, Target: e.target, PlanID: fmt.Sprintf("round-%d", i), Time: time.Now()}
			if pod.Annotations == nil {
				pod.Annotations = map[string]string{}
			}
			for k, v := range h.Annotations() {
				pod.Annotations[k] = v
			}
			leaving = append(leaving, pod)
		}
		rep := r.replacement(pod, now)
		source[rep.UID] = pod.Spec.NodeName
		queue = append(queue, rep)
	}

	// The pods of the next cluster: those not evicted; pending ones queue
	// first, as they have waited longest.
	var pods, pending []*v1.Pod
	for _, p := range r.snap.Pods {
		switch {
		case evicted[p.UID]:
		case p.Spec.NodeName == "" && !terminal(p):
			pending = append(pending, p)
		default:
			pods = append(pods, p)
		}
	}
	queue = append(pending, queue...)
	// kube-scheduler's queue sorts by priority, then by arrival.
	sort.SliceStable(queue, func(a, b int) bool { return priority(queue[a]) > priority(queue[b]) })

	r.snap.Pods = pods
	sim, err := simulator.New(ctx, r.prof, r.snap)
	if err != nil {
		return Round{}, nil, err
	}
	for _, p := range leaving {
		sim.Leaving(p)
	}
	for _, p := range queue {
		bound, _, err := sim.Place(ctx, p)
		if err != nil {
			return Round{}, nil, err
		}
		if bound == nil {
			pods = append(pods, p)
			continue
		}
		if src, ok := source[p.UID]; ok && bound.Spec.NodeName == src {
			pingPong++
		}
		pods = append(pods, bound)
	}
	r.snap.Pods = pods
	round, nodes, err := measureSim(sim, r.snap, i)
	round.Evictions, round.PingPong = len(evictions), pingPong
	return round, nodes, err
}

// plan asks the strategy which pods to evict this round.
func (r *run) plan(ctx context.Context, i int) ([]eviction, error) {
	byUID := make(map[types.UID]*v1.Pod, len(r.snap.Pods))
	for _, p := range r.snap.Pods {
		byUID[p.UID] = p
	}
	var out []eviction
	if r.o.Strategy == Upstream {
		res, err := upstream.Run(ctx, r.policy, r.snap)
		if err != nil {
			return nil, err
		}
		for _, e := range res.Evicted {
			if p, ok := byUID[types.UID(e.UID)]; ok {
				out = append(out, eviction{pod: p})
			}
		}
		return out, nil
	}
	opts := r.o.Planner
	opts.ID = fmt.Sprintf("round-%d", i)
	// As in run mode: a workload's pods on a node it moved pods onto stay
	// for the cooldown, and the planner knows, so drains do not count on them.
	opts.InCooldown = func(pod *v1.Pod) bool {
		owner := metav1.GetControllerOf(pod)
		if owner == nil {
			return false
		}
		last, ok := r.landed[landing{owner.UID, pod.Spec.NodeName}]
		return ok && time.Duration(i-last)*r.o.Interval < r.o.Cooldown
	}
	p, err := planner.Plan(ctx, r.policy, r.prof, r.snap, r.o.Registry, opts)
	if err != nil {
		return nil, err
	}
	for _, m := range p.Moves {
		pod, ok := byUID[types.UID(m.UID)]
		if !ok {
			return nil, fmt.Errorf("plan moves pod %s (UID %s), which is not in the cluster", m.Pod, m.UID)
		}
		out = append(out, eviction{pod: pod, target: m.Target})
	}
	return out, nil
}

// landing is an owner's pods on one node.
type landing struct {
	owner types.UID
	node  string
}

func (r *run) root(uid types.UID) types.UID {
	if root, ok := r.lineage[uid]; ok {
		return root
	}
	return uid
}

// replacement is the pod the owner creates for an evicted one: same
// template, new name and UID, not yet scheduled.
func (r *run) replacement(pod *v1.Pod, now time.Time) *v1.Pod {
	r.replacements++
	rep := pod.DeepCopy()
	rep.Name = fmt.Sprintf("%s-r%d", baseName(pod), r.replacements)
	rep.UID = types.UID(fmt.Sprintf("%s-r%d", r.root(pod.UID), r.replacements))
	rep.Annotations = withoutHint(rep.Annotations)
	rep.CreationTimestamp = metav1.NewTime(now)
	rep.Spec.NodeName = ""
	rep.Status = v1.PodStatus{Phase: v1.PodPending}
	r.lineage[rep.UID] = r.root(pod.UID)
	return rep
}

// baseName strips the suffix an earlier replacement added.
func baseName(pod *v1.Pod) string {
	name := pod.Name
	for i := len(name) - 1; i > 0; i-- {
		c := name[i]
		if c >= '0' && c <= '9' {
			continue
		}
		if c == 'r' && i > 1 && name[i-1] == '-' && i < len(name)-1 {
			return name[:i-1]
		}
		break
	}
	return name
}

func withoutHint(annotations map[string]string) map[string]string {
	out := map[string]string{}
	for k, v := range annotations {
		switch k {
		case hint.SourceNodeAnnotation, hint.TargetNodeAnnotation, hint.PlanIDAnnotation, hint.TimeAnnotation:
		default:
			out[k] = v
		}
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

func priority(p *v1.Pod) int32 {
	if p.Spec.Priority != nil {
		return *p.Spec.Priority
	}
	return 0
}

func terminal(p *v1.Pod) bool {
	return p.Status.Phase == v1.PodSucceeded || p.Status.Phase == v1.PodFailed
}

// measure builds a simulation of the current cluster to measure it.
func (r *run) measure(ctx context.Context, i int) (Round, []NodeUtil, error) {
	sim, err := simulator.New(ctx, r.prof, r.snap)
	if err != nil {
		return Round{}, nil, err
	}
	return measureSim(sim, r.snap, i)
}

// measureSim reads the cluster's figures from a simulation of it.
func measureSim(sim *simulator.Simulator, snap *snapshot.Snapshot, i int) (Round, []NodeUtil, error) {
	round := Round{Round: i}
	infos, err := sim.Nodes()
	if err != nil {
		return round, nil, err
	}
	var cpu, mem []float64
	nodes := make([]NodeUtil, 0, len(infos))
	for _, ni := range infos {
		u := NodeUtil{
			Node:   ni.Node().Name,
			CPU:    percent(ni.GetRequested().GetMilliCPU(), ni.GetAllocatable().GetMilliCPU()),
			Memory: percent(ni.GetRequested().GetMemory(), ni.GetAllocatable().GetMemory()),
		}
		nodes = append(nodes, u)
		for _, pi := range ni.GetPods() {
			if !simulator.NodeBound(pi.GetPod()) {
				round.NodesInUse++
				cpu, mem = append(cpu, u.CPU), append(mem, u.Memory)
				break
			}
		}
	}
	sort.Slice(nodes, func(a, b int) bool { return nodes[a].Node < nodes[b].Node })
	round.CPUUtilMean, round.CPUUtilStddev = meanStddev(cpu)
	round.MemUtilMean, round.MemUtilStddev = meanStddev(mem)
	for _, p := range snap.Pods {
		if p.Spec.NodeName == "" && !terminal(p) {
			round.Unschedulable++
		}
	}
	round.LowerBound = LowerBound(snap)
	return round, nodes, nil
}

func percent(used, total int64) float64 {
	if total <= 0 {
		return 0
	}
	return float64(used) * 100 / float64(total)
}

func meanStddev(xs []float64) (mean, stddev float64) {
	if len(xs) == 0 {
		return 0, 0
	}
	for _, x := range xs {
		mean += x
	}
	mean /= float64(len(xs))
	for _, x := range xs {
		stddev += (x - mean) * (x - mean)
	}
	return round2(mean), round2(math.Sqrt(stddev / float64(len(xs))))
}

func round2(x float64) float64 { return math.Round(x*100) / 100 }
