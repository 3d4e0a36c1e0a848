// Package rounds runs rebalancing rounds over a snapshot, in memory: each
// round plans, evicts, lets the scheduler profile re-place the evicted pods
// as their owners recreate them, and measures the cluster. One simulated
// cluster is carried from round to round. It runs either rebalancer's
// planner or the upstream descheduler as a baseline, with the same policy
// and scheduler profile, so the two can be compared.
package rounds

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/klog/v2"
	podutil "k8s.io/kubernetes/pkg/api/v1/pod"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/descheduler/pkg/api"

	"github.com/rebalancer-dev/rebalancer/pkg/disruption"
	"github.com/rebalancer-dev/rebalancer/pkg/hint"
	"github.com/rebalancer-dev/rebalancer/pkg/history"
	"github.com/rebalancer-dev/rebalancer/pkg/plan"
	"github.com/rebalancer-dev/rebalancer/pkg/rounds/result"
	"github.com/rebalancer-dev/rebalancer/pkg/session"
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
	// Interval is the time between rounds and Cooldown how long a
	// workload's pods stay on a node it moved pods onto, as `rebalancer run`
	// has them: rebalancer's planner leaves those pods alone, as it does in
	// run mode. For both strategies a pod evicted again within the cooldown
	// counts as ping-pong. Cooldown 0 turns rebalancer's cooldown off.
	Interval, Cooldown time.Duration
	// Start is the simulated time of round 0; round i is Interval*i later.
	// Replacements' creation times, hints and the cooldown count on that
	// clock. The zero time means a fixed date, so results are repeatable.
	Start time.Time
	// Seed seeds the random choices the schedulers make when they place
	// the replacements (ties between equal best nodes, node sampling), so
	// that a run is repeatable.
	Seed uint64
	// Arrivals, when positive, holds the snapshot's pending pods back and
	// lets that many in per round, oldest first, before the round's plan
	// (see arrive). 0: they all wait from round 0.
	Arrivals int
	// Progress, when set, is told of each round once it is measured (round
	// 0: the snapshot as it is), for a command to show how far it is.
	Progress func(strategy string, round int, r result.Round)
	// Replays is how many times each round's plan is also carried out, on
	// a copy of the cluster, with other seeds (each search from a random
	// node): how often the plan holds whatever the schedulers choose
	// (Round.Replays). 0: none.
	Replays int
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
	if o.Replays < 0 {
		return fmt.Errorf("replays %d: must not be negative", o.Replays)
	}
	if o.Arrivals < 0 {
		return fmt.Errorf("arrivals %d: must not be negative", o.Arrivals)
	}
	return nil
}

// testHookRound, set by tests, is given the cluster after each round.
var testHookRound func(round int, state *snapshot.Snapshot)

// eviction is one pod a round evicts, and where rebalancer's plan expects
// the replacement ("" for the upstream baseline, which does not say).
type eviction struct {
	pod    *v1.Pod
	target string
	// anywhere: the plan holds if the replacement lands anywhere but the
	// pod's node (see plan.Move.Anywhere); packed (an unsteered drain): if
	// it lands on a node that was in use and that the plan does not empty.
	anywhere, packed bool
	// drain: the executor taints the pod's node (plan.Move.Drain).
	drain bool
}

// run holds the state carried from round to round.
type run struct {
	o      Options
	policy *api.DeschedulerPolicy
	// sess plans rebalancer's rounds on sim, modelled as opened.
	sess   *session.Session
	opened *session.Opened
	sim    *simulator.Simulator
	clock  *clocktesting.FakePassiveClock
	moves  *history.History // rebalancer's cooldown
	// random is the schedulers' own randomness in placing replacements.
	random *rand.Rand

	// lineage maps a replacement's UID to the UID of the pod its line
	// started with; lastEvicted keeps the round each line was last evicted.
	lineage      map[types.UID]types.UID
	lastEvicted  map[types.UID]int
	replacements int
	// queue holds the pods yet to arrive (Options.Arrivals), oldest first.
	queue []*v1.Pod
}

// Run simulates opts.Rounds rounds on the snapshot sess opened (o) and
// measures the cluster after each. The simulated cluster is opened by sess,
// modelled as o (the extenders, the webhook's opt-in, the usage window),
// and rebalancer's rounds plan through sess, with its planner options.
// The snapshot is not modified.
func Run(ctx context.Context, sess *session.Session, o *session.Opened, opts Options) (*result.Result, error) {
	if err := opts.validate(); err != nil {
		return nil, err
	}
	policy, snap := o.Inputs.Policy, o.Snapshot
	if opts.Start.IsZero() {
		opts.Start = time.Date(2026, time.January, 1, 0, 0, 0, 0, time.UTC)
	}
	if opts.Strategy == Upstream {
		// The descheduler has none of rebalancer's own plugins.
		policy = upstream.Policy(policy)
	}
	// The simulation's informers run until the last round is measured.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var queue []*v1.Pod
	if opts.Arrivals > 0 {
		snap, queue = holdBack(snap)
	}
	clock := clocktesting.NewFakePassiveClock(opts.Start)
	sim, err := sess.Simulate(ctx, o, snap, simulator.WithClock(clock))
	if err != nil {
		return nil, err
	}
	r := &run{
		o: opts, policy: policy, sess: sess, opened: o, sim: sim, clock: clock, moves: history.New(clock, opts.Cooldown),
		random:  rand.New(rand.NewPCG(opts.Seed, 0)),
		lineage: map[types.UID]types.UID{}, lastEvicted: map[types.UID]int{},
		queue: queue,
	}
	res := &result.Result{Strategy: opts.Strategy}
	round0, nodes, err := r.measure(0)
	if err != nil {
		return nil, err
	}
	res.Rounds = append(res.Rounds, round0)
	res.NodesBefore = nodes
	res.NodesAfter = nodes
	r.progress(round0)
	for i := 1; i <= opts.Rounds; i++ {
		clock.SetTime(opts.Start.Add(time.Duration(i) * opts.Interval))
		round, nodes, err := r.round(ctx, i)
		if err != nil {
			if ctx.Err() != nil {
				// Stopped: the rounds finished are still what they were.
				res.Interrupted = true
				return res, fmt.Errorf("round %d: %w", i, err)
			}
			return nil, fmt.Errorf("round %d: %w", i, err)
		}
		res.Rounds = append(res.Rounds, round)
		res.NodesAfter = nodes
		if testHookRound != nil {
			testHookRound(i, r.sim.State())
		}
		// Converged from the first round of the last run of rounds that
		// evict nothing: a round can evict nothing while every candidate
		// waits out its cooldown, and the next evict again.
		switch {
		case round.Evictions > 0:
			res.ConvergedAt = 0
		case res.ConvergedAt == 0:
			res.ConvergedAt = i
		}
		klog.FromContext(ctx).V(1).Info("Simulated round", "strategy", opts.Strategy, "round", i,
			"evictions", round.Evictions, "pingPong", round.PingPong, "nodesInUse", round.NodesInUse, "unschedulable", round.Unschedulable,
			"arrived", round.Arrived, "placed", round.Placed)
		r.progress(round)
	}
	if opts.Strategy == Rebalancer {
		t := res.Totals()
		res.PlanAccuracy = result.Accuracy(t.Held, t.Evictions)
	}
	return res, nil
}

func (r *run) progress(round result.Round) {
	if r.o.Progress != nil {
		r.o.Progress(r.o.Strategy, round.Round, round)
	}
}

// round lets pods arrive, plans, evicts, re-places and measures.
func (r *run) round(ctx context.Context, i int) (result.Round, []result.NodeUtil, error) {
	arrived, err := r.arrive(ctx)
	if err != nil {
		return result.Round{}, nil, err
	}
	// The pods waiting for a node as the round plans, but the replacements
	// of earlier rounds: the ones a round may place.
	waiting := sets.New[types.UID]()
	for _, p := range r.sim.Pending() {
		if _, replacement := r.lineage[p.UID]; !replacement {
			waiting.Insert(p.UID)
		}
	}
	evictions, heldEmpty, summary, err := r.plan(ctx, i)
	if err != nil {
		return result.Round{}, nil, err
	}
	// The nodes the plan holds empty carry the drain taint while it is
	// carried out, as the executor taints them.
	r.sim.Hold(sets.New(heldEmpty...))
	defer r.sim.Hold(nil)
	now := r.clock.Now()
	planID := fmt.Sprintf("round-%d", i) // the round's plan, as r.plan names it
	pingPong := 0
	// Where a drain left to its scheduler may land: a node in use before the
	// round that the plan does not empty.
	kept := map[string]bool{}
	usage, err := r.sim.Usage()
	if err != nil {
		return result.Round{}, nil, err
	}
	for _, u := range usage {
		kept[u.Node] = u.InUse
	}
	for _, e := range evictions {
		kept[e.pod.Spec.NodeName] = false
	}
	replay := make([]simulator.Eviction, len(evictions))
	for k, e := range evictions {
		pod := e.pod
		line := r.root(pod.UID)
		if last, ok := r.lastEvicted[line]; ok && time.Duration(i-last)*r.o.Interval < r.o.Cooldown {
			pingPong++
		}
		r.lastEvicted[line] = i
		replay[k].Pod, replay[k].Drain = pod, e.drain
		owner := metav1.GetControllerOf(pod)
		if owner == nil {
			continue // nobody recreates it
		}
		if e.target != "" {
			r.moves.Record(history.Eviction{Owner: owner.UID, Workload: history.Workload(owner.Kind, pod.Namespace, owner.Name), From: pod.Spec.NodeName, To: e.target, Plan: planID})
			// The scheduler sees the pod go with its hint, as in the cluster.
			replay[k].Hint = &hint.Hint{Source: pod.Spec.NodeName, Target: e.target, PlanID: planID}
		}
		replay[k].Replacement = r.replacement(pod, now)
	}
	replays, replaysHeld, err := r.replays(ctx, i, replay, evictions, usage)
	if err != nil {
		return result.Round{}, nil, err
	}
	landed, err := r.sim.Replay(ctx, replay, r.random)
	if err != nil {
		return result.Round{}, nil, err
	}
	held := 0
	for k, e := range evictions {
		if landed[k].Node != "" && landed[k].Node == e.pod.Spec.NodeName {
			pingPong++
		}
		// The executor records where a replacement landed elsewhere than
		// planned (history.Eviction.Landed): its cooldown holds it there.
		if owner := metav1.GetControllerOf(e.pod); owner != nil && e.target != "" && landed[k].Node != "" && landed[k].Node != e.target {
			r.moves.Record(history.Eviction{Owner: owner.UID, Workload: history.Workload(owner.Kind, e.pod.Namespace, owner.Name), To: landed[k].Node, Plan: planID, Landed: true})
		}
		l := landed[k].Node
		switch {
		case e.target == "" || l == "":
		case l == e.target, e.packed && kept[l], e.anywhere && !e.packed && l != e.pod.Spec.NodeName:
			held++
		}
	}
	placed := 0
	for _, p := range r.sim.Bound() {
		if waiting.Has(p.UID) {
			placed++
		}
	}
	round, nodes, err := r.measure(i)
	round.Evictions, round.PingPong, round.Held = len(evictions), pingPong, held
	for _, e := range evictions {
		round.Cost += disruption.Cost(e.pod)
	}
	round.Arrived, round.Placed = arrived, placed
	round.Replays, round.ReplaysHeld = replays, replaysHeld
	if summary != nil {
		round.Skipped, round.Consolidation = summary.SkippedByReason, summary.Consolidation
	}
	if r.o.Strategy == Rebalancer {
		round.PlanAccuracy = result.Accuracy(held, len(evictions))
	}
	return round, nodes, err
}

// holdBack takes the pending pods out of the snapshot (a shallow copy; the
// snapshot is not modified) and returns them oldest first: the queue
// Options.Arrivals lets in.
func holdBack(snap *snapshot.Snapshot) (*snapshot.Snapshot, []*v1.Pod) {
	held := *snap
	held.Pods = nil
	var queue []*v1.Pod
	for _, p := range snap.Pods {
		if p.Spec.NodeName == "" && !podutil.IsPodTerminal(p) && p.DeletionTimestamp == nil {
			queue = append(queue, p)
		} else {
			held.Pods = append(held.Pods, p)
		}
	}
	slices.SortStableFunc(queue, func(a, b *v1.Pod) int {
		return cmp.Or(a.CreationTimestamp.Compare(b.CreationTimestamp.Time), cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name))
	})
	return &held, queue
}

// arrive lets the next Options.Arrivals pods of the queue in, as their
// owners create them: kube-scheduler tries each at once with its profile
// (random ties and node sampling, as Replay), and one that fits nowhere
// waits, its PodScheduled condition False, reason Unschedulable, from now:
// MakeRoom makes room for it once it has waited its unschedulableFor. It
// returns how many arrived.
func (r *run) arrive(ctx context.Context) (int, error) {
	n := min(r.o.Arrivals, len(r.queue))
	now := metav1.NewTime(r.clock.Now())
	for _, p := range r.queue[:n] {
		pod := p.DeepCopy()
		pod.CreationTimestamp = now
		pod.Status = v1.PodStatus{Phase: v1.PodPending, Conditions: []v1.PodCondition{{
			Type: v1.PodScheduled, Status: v1.ConditionFalse, Reason: v1.PodReasonUnschedulable, LastTransitionTime: now,
			Message: "no node fits it as it arrives",
		}}}
		if _, _, err := r.sim.PlaceAsScheduled(ctx, pod, r.random); err != nil {
			return 0, fmt.Errorf("pod %s arriving: %w", klog.KObj(pod), err)
		}
	}
	r.queue = r.queue[n:]
	return n, nil
}

// replays carries round i's evictions out Options.Replays times on forks of
// the cluster (before is its usage), with seeds of their own, and counts the replays that hold
// the plan: every node it drains ends empty and no node that was empty is
// used, but one the plan itself moves pods onto.
func (r *run) replays(ctx context.Context, i int, replay []simulator.Eviction, evictions []eviction, before []simulator.NodeUsage) (n, held int, err error) {
	if r.o.Strategy != Rebalancer || r.o.Replays == 0 || len(evictions) == 0 {
		return 0, 0, nil
	}
	inUse := map[string]bool{}
	for _, u := range before {
		inUse[u.Node] = u.InUse
	}
	for _, e := range evictions {
		if e.target != "" {
			inUse[e.target] = true // the plan's own choice, empty or not
		}
	}
	for _, e := range evictions {
		if e.drain {
			inUse[e.pod.Spec.NodeName] = false // must end empty
		}
	}
	for k := range r.o.Replays {
		random := rand.New(rand.NewPCG(r.o.Seed, uint64(i)<<32|uint64(k+1)))
		fork := r.sim.Fork()
		r.sim.StartSearches(random)
		_, err := r.sim.Replay(ctx, replay, random)
		var after []simulator.NodeUsage
		if err == nil {
			after, err = r.sim.Usage()
		}
		if rerr := r.sim.Revert(fork); rerr != nil && err == nil {
			err = rerr
		}
		if err != nil {
			return 0, 0, err
		}
		ok := true
		for _, u := range after {
			ok = ok && (!u.InUse || inUse[u.Node])
		}
		if ok {
			held++
		}
	}
	return r.o.Replays, held, nil
}

// plan asks the strategy which pods to evict this round, which empty nodes
// to hold meanwhile (plan.Plan.HeldEmpty), and its plan's summary (nil for
// the baseline), which says why it did not move more; the simulation is
// left as it was.
func (r *run) plan(ctx context.Context, i int) ([]eviction, []string, *plan.Summary, error) {
	state := r.sim.State()
	byUID := make(map[types.UID]*v1.Pod, len(state.Pods))
	for _, p := range state.Pods {
		byUID[p.UID] = p
	}
	var out []eviction
	if r.o.Strategy == Upstream {
		res, err := upstream.Run(ctx, r.policy, state)
		if err != nil {
			return nil, nil, nil, err
		}
		for _, e := range res.Evicted {
			if p, ok := byUID[types.UID(e.UID)]; ok {
				out = append(out, eviction{pod: p})
			}
		}
		return out, nil, nil, nil
	}
	opts := r.sess.Options().Planner
	opts.ID = fmt.Sprintf("round-%d", i)
	// As in run mode: a workload's pods on a node it moved pods onto stay
	// for the cooldown, and the planner knows, so drains do not count on them.
	opts.History = r.moves
	if i > 1 {
		// The planner's warnings (a scheduler that cannot be steered, a
		// conflict) are the same every round: said in round 1, the later
		// rounds' at -v=1.
		ctx = klog.NewContext(ctx, klog.FromContext(ctx).V(1))
	}
	p, err := r.sess.PlanOn(ctx, r.opened, r.sim, opts)
	if err != nil {
		return nil, nil, nil, err
	}
	for _, m := range p.Moves {
		pod, ok := byUID[types.UID(m.UID)]
		if !ok {
			return nil, nil, nil, fmt.Errorf("plan moves pod %s (UID %s), which is not in the cluster", m.Pod, m.UID)
		}
		// An unsteered drain holds wherever its replacements land in nodes
		// the plan keeps (see the planner's replay).
		out = append(out, eviction{pod: pod, target: m.Target, anywhere: m.Anywhere, packed: m.Drain && !m.Steered, drain: m.Drain})
	}
	return out, p.HeldEmpty, &p.Summary, nil
}

func (r *run) root(uid types.UID) types.UID {
	if root, ok := r.lineage[uid]; ok {
		return root
	}
	return uid
}

// replacement is the pod the owner creates for an evicted one.
func (r *run) replacement(pod *v1.Pod, now time.Time) *v1.Pod {
	r.replacements++
	rep := simulator.NewReplacement(pod, fmt.Sprintf("%s-r%d", baseName(pod), r.replacements),
		types.UID(fmt.Sprintf("%s-r%d", r.root(pod.UID), r.replacements)), now)
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

// measure reads the cluster's figures from the simulation.
func (r *run) measure(i int) (result.Round, []result.NodeUtil, error) {
	round := result.Round{Round: i}
	usage, err := r.sim.Usage()
	if err != nil {
		return round, nil, err
	}
	var cpu, mem []float64
	nodes := make([]result.NodeUtil, 0, len(usage))
	for _, u := range usage {
		n := result.NodeUtil{Node: u.Node, CPU: u.CPU, Memory: u.Memory}
		if u.Measured {
			n.UsedCPU, n.UsedMemory = &u.UsedCPU, &u.UsedMemory
		}
		nodes = append(nodes, n)
		if u.InUse {
			round.NodesInUse++
			cpu, mem = append(cpu, u.CPU), append(mem, u.Memory)
		}
	}
	round.CPUUtilMean, round.CPUUtilStddev = meanStddev(cpu)
	round.MemUtilMean, round.MemUtilStddev = meanStddev(mem)
	round.Unschedulable = len(r.sim.Pending())
	bound, err := r.sim.ClassBound()
	round.LowerBound, round.ClassLowerBound = bound.PerResource, bound.Nodes
	return round, nodes, err
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
