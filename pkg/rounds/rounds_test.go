package rounds

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/ktesting"
	"k8s.io/kubernetes/pkg/scheduler/apis/config"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/descheduler/pkg/api"

	podutil "k8s.io/kubernetes/pkg/api/v1/pod"

	"github.com/rebalancer-dev/rebalancer/internal/testutil"
	"github.com/rebalancer-dev/rebalancer/pkg/inputs"
	"github.com/rebalancer-dev/rebalancer/pkg/planner"
	"github.com/rebalancer-dev/rebalancer/pkg/policy"
	"github.com/rebalancer-dev/rebalancer/pkg/profile"
	"github.com/rebalancer-dev/rebalancer/pkg/rounds/result"
	"github.com/rebalancer-dev/rebalancer/pkg/session"
	"github.com/rebalancer-dev/rebalancer/pkg/snapshot"
	"github.com/rebalancer-dev/rebalancer/pkg/synthetic"
)

func loadPair(t testing.TB, name string) (*api.DeschedulerPolicy, []*config.KubeSchedulerProfile) {
	t.Helper()
	dir := filepath.Join("..", "..", "policies")
	pol, err := policy.Load(filepath.Join(dir, name+"-policy.yaml"), fake.NewClientset(), policy.Registry())
	if err != nil {
		t.Fatal(err)
	}
	_, prof, err := profile.Load(filepath.Join(dir, name+"-scheduler.yaml"), "")
	if err != nil {
		t.Fatal(err)
	}
	return pol, []*config.KubeSchedulerProfile{prof}
}

// testContext logs at -v=1: the scheduler plugins are chatty at higher levels.
func testContext(t *testing.T) context.Context {
	return klog.NewContext(context.Background(), ktesting.NewLogger(t, ktesting.NewConfig(ktesting.Verbosity(1))))
}

func options(strategy string, rounds int) Options {
	return Options{Strategy: strategy, Rounds: rounds, Interval: 10 * time.Minute, Cooldown: 30 * time.Minute}
}

// planning are the planner's options the tests' sessions plan with.
var planning = planner.Options{MinScoreGain: 1}

// runOn runs opts's rounds on snap through a session planning with
// po, on pol and profs.
func runOn(ctx context.Context, pol *api.DeschedulerPolicy, profs []*config.KubeSchedulerProfile, snap *snapshot.Snapshot, opts Options, po planner.Options) (*result.Result, error) {
	sess := session.New(session.Options{Planner: po})
	opened, err := sess.OpenLoaded(ctx, &inputs.Inputs{Policy: pol, Schedulers: profs, Snapshot: snap}, nil)
	if err != nil {
		return nil, err
	}
	return Run(ctx, sess, opened, opts)
}

// owned counts the pods a controller recreates, bound or pending.
func owned(snap *snapshot.Snapshot) int {
	n := 0
	for _, p := range snap.Pods {
		if metav1.GetControllerOf(p) != nil && !podutil.IsPodTerminal(p) {
			n++
		}
	}
	return n
}

// TestRebalancerConverges: on a fragmented cluster the bin-packing pair
// empties nodes round after round without ping-pong, loses no pod, and then
// stops moving pods.
func TestRebalancerConverges(t *testing.T) {
	// 10 pods per node, so the policy's 10 evictions per node can empty one.
	snap, err := synthetic.Generate(synthetic.Options{Nodes: 20, Pods: 200, Seed: 3})
	if err != nil {
		t.Fatal(err)
	}
	pods := owned(snap)
	pol, prof := loadPair(t, "binpacking")
	ctx := testContext(t)
	res, err := runOn(ctx, pol, prof, snap, options(Rebalancer, 8), planning)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Rounds) != 9 {
		t.Fatalf("%d rounds measured, want 9 (round 0 and 8 rounds)", len(res.Rounds))
	}
	first, last := res.Rounds[0], res.Rounds[len(res.Rounds)-1]
	t.Logf("nodes in use %d -> %d, lower bound %d, converged at round %d", first.NodesInUse, last.NodesInUse, last.LowerBound, res.ConvergedAt)
	evictions := 0
	for _, r := range res.Rounds {
		evictions += r.Evictions
		if r.PingPong != 0 {
			t.Errorf("round %d: %d ping-pong", r.Round, r.PingPong)
		}
		if r.Unschedulable > first.Unschedulable {
			t.Errorf("round %d: %d pods unschedulable, %d before the first round", r.Round, r.Unschedulable, first.Unschedulable)
		}
		if r.NodesInUse < r.LowerBound {
			t.Errorf("round %d: %d nodes in use, below the lower bound %d", r.Round, r.NodesInUse, r.LowerBound)
		}
	}
	if evictions == 0 || last.NodesInUse >= first.NodesInUse {
		t.Errorf("%d evictions, nodes in use %d -> %d: want fewer nodes in use", evictions, first.NodesInUse, last.NodesInUse)
	}
	// Converged with two quiet rounds at least (a quiet round can be a
	// pause while candidates wait out their cooldown).
	if res.ConvergedAt == 0 || res.ConvergedAt > len(res.Rounds)-2 {
		t.Fatalf("did not converge in 8 rounds (converged at %d): %+v", res.ConvergedAt, res.Rounds)
	}
	// A packing pair never takes a node into use that it emptied: nodes in
	// use go down round after round, or stay.
	for i := 1; i < len(res.Rounds); i++ {
		if res.Rounds[i].NodesInUse > res.Rounds[i-1].NodesInUse {
			t.Errorf("round %d: %d nodes in use, up from %d", i, res.Rounds[i].NodesInUse, res.Rounds[i-1].NodesInUse)
		}
	}
	for _, r := range res.Rounds[res.ConvergedAt:] {
		if r.Evictions != 0 {
			t.Errorf("round %d evicted %d pods after converging at round %d", r.Round, r.Evictions, res.ConvergedAt)
		}
	}
	if got := owned(snap); got != pods {
		t.Errorf("the input snapshot changed: %d owned pods, had %d", got, pods)
	}
	if len(res.NodesBefore) != len(snap.Nodes) || len(res.NodesAfter) != len(snap.Nodes) {
		t.Errorf("per-node utilization for %d/%d nodes, want %d", len(res.NodesBefore), len(res.NodesAfter), len(snap.Nodes))
	}
}

// TestUpstreamBaseline runs the same pair the upstream way: every eviction
// its plugins ask for, re-placed by the same profile.
func TestUpstreamBaseline(t *testing.T) {
	snap, err := synthetic.Generate(synthetic.Options{Nodes: 40, Pods: 1200, Seed: 3})
	if err != nil {
		t.Fatal(err)
	}
	pol, prof := loadPair(t, "binpacking")
	ctx := testContext(t)
	res, err := runOn(ctx, pol, prof, snap, options(Upstream, 3), planning)
	if err != nil {
		t.Fatal(err)
	}
	evictions := 0
	for _, r := range res.Rounds {
		evictions += r.Evictions
	}
	// The synthetic cluster has tainted nodes whose pods the policy's
	// RemovePodsViolatingNodeTaints evicts upstream too.
	if evictions == 0 {
		t.Fatalf("upstream evicted nothing in 3 rounds: %+v", res.Rounds)
	}
	t.Logf("upstream: %+v", res.Rounds)
}

func TestBaseName(t *testing.T) {
	for in, want := range map[string]string{"web-abc12": "web-abc12", "web-abc12-r7": "web-abc12", "web-r": "web-r", "r-r2": "r", "x-r12-r3": "x-r12"} {
		if got := baseName(&v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: in}}); got != want {
			t.Errorf("baseName(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestRoundsHoldWithEachScheduler: fragmented clusters run for rounds with
// the bin-packing policy, their workloads on rebalancer-scheduler (the
// shipped profile) or on default-scheduler configured by a user's own
// MostAllocated profile without RebalanceHint. Replayed as the cluster
// would (all replacements pending together, random ties, each pod's own
// scheduler), no replacement lands back on its source, no round ends with
// more nodes in use than it began with, steered plans hold every time, and
// the rounds converge. (Within 20 rounds: a first plan that packs a hundred
// pods puts their owners' pods in cooldown for three rounds, and the last
// packing moves come as those cooldowns end.)
func TestRoundsHoldWithEachScheduler(t *testing.T) {
	user := filepath.Join(t.TempDir(), "user-scheduler.yaml")
	if err := os.WriteFile(user, []byte("apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\nprofiles:\n- schedulerName: default-scheduler\n  pluginConfig:\n  - name: NodeResourcesFit\n    args:\n      scoringStrategy:\n        type: MostAllocated\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	pol, _ := loadPair(t, "binpacking")
	for seed := int64(1); seed <= 3; seed++ {
		for _, onDefault := range []bool{false, true} {
			snap, err := synthetic.Generate(synthetic.Options{Nodes: 30, Pods: 240, Seed: seed})
			if err != nil {
				t.Fatal(err)
			}
			files := []string{filepath.Join("..", "..", "policies", "binpacking-scheduler.yaml")}
			if onDefault {
				files = append(files, user)
				for _, p := range snap.Pods {
					if p.Spec.SchedulerName == "rebalancer-scheduler" {
						p.Spec.SchedulerName = "default-scheduler"
					}
				}
			}
			profs, _, err := profile.Schedulers(files, "")
			if err != nil {
				t.Fatal(err)
			}
			res, err := runOn(testContext(t), pol, profs, snap, options(Rebalancer, 20), planning)
			if err != nil {
				t.Fatal(err)
			}
			for i := 1; i < len(res.Rounds); i++ {
				r, prev := res.Rounds[i], res.Rounds[i-1]
				if r.PingPong != 0 {
					t.Errorf("seed %d default %v round %d: %d ping-pong", seed, onDefault, i, r.PingPong)
				}
				if r.NodesInUse > prev.NodesInUse {
					t.Errorf("seed %d default %v round %d: nodes in use %d -> %d", seed, onDefault, i, prev.NodesInUse, r.NodesInUse)
				}
				if !onDefault && r.PlanAccuracy != nil && *r.PlanAccuracy != 100 {
					t.Errorf("seed %d round %d: steered plan held for %v%% of moves, want 100%%", seed, i, *r.PlanAccuracy)
				}
			}
			if res.ConvergedAt == 0 {
				t.Errorf("seed %d default %v: not converged in 10 rounds", seed, onDefault)
			}
			last := res.Rounds[len(res.Rounds)-1]
			t.Logf("seed %d default %v: nodes in use %d -> %d (lower bound %d), accuracy %v, converged at %d",
				seed, onDefault, res.Rounds[0].NodesInUse, last.NodesInUse, last.LowerBound, deref(res.PlanAccuracy), res.ConvergedAt)
		}
	}
}

func deref(p *float64) float64 {
	if p == nil {
		return -1
	}
	return *p
}

// TestUnsteeredPackingRoundsHoldInEveryReplay: the shipped bin-packing
// policy with a packing profile that does not follow hints (the shipped one
// without RebalanceHint) and kube-scheduler's adaptive node sampling, on a
// synthetic cluster of more than 100 nodes full of ties: the rounds free
// nodes, never add one, with no ping-pong, and every round's plan holds in
// each of its seeded replays.
func TestUnsteeredPackingRoundsHoldInEveryReplay(t *testing.T) {
	prof := unsteeredPacking(t)
	pol, _ := loadPair(t, "binpacking")
	snap, err := synthetic.Generate(synthetic.Options{Nodes: 120, Pods: 1200, Seed: 5})
	if err != nil {
		t.Fatal(err)
	}
	opts := options(Rebalancer, 3)
	opts.Replays = 5
	res, err := runOn(testContext(t), pol, []*config.KubeSchedulerProfile{prof}, snap, opts, planning)
	if err != nil {
		t.Fatal(err)
	}
	tot := res.Totals()
	t.Logf("nodes in use %d -> %d, %d evictions, %d ping-pong, %d of %d replays held", res.Rounds[0].NodesInUse, tot.NodesInUse, tot.Evictions, tot.PingPong, tot.ReplaysHeld, tot.Replays)
	if tot.Evictions == 0 || tot.NodesInUse >= res.Rounds[0].NodesInUse {
		t.Fatalf("nodes in use %d -> %d with %d evictions: want nodes freed", res.Rounds[0].NodesInUse, tot.NodesInUse, tot.Evictions)
	}
	checkRoundsHold(t, res, 5)
}

// TestHoldingEmptyNodesRounds: small empty nodes beside a synthetic
// cluster placed by a packing scheduler rebalancer cannot steer leave no
// drain certain (a pod fills more of a small node, so any replacement may
// land there). With HoldEmptyNodes each round's plan holds them, and is
// carried out with them tainted: nodes fall, no round adds one, no
// ping-pong, and every seeded replay empties every drained node and uses
// no empty one.
func TestHoldingEmptyNodesRounds(t *testing.T) {
	prof := unsteeredPacking(t)
	pol, _ := loadPair(t, "binpacking")
	snap, err := synthetic.Generate(synthetic.Options{Nodes: 60, Pods: 600, Seed: 5})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 40 {
		small := snap.Nodes[0].DeepCopy()
		small.Name = fmt.Sprintf("small-%02d", i)
		small.Labels = map[string]string{"kubernetes.io/hostname": small.Name}
		for _, l := range []v1.ResourceList{small.Status.Capacity, small.Status.Allocatable} {
			l[v1.ResourceCPU] = resource.MustParse("1")
			l[v1.ResourceMemory] = resource.MustParse("2Gi")
		}
		snap.Nodes = append(snap.Nodes, small)
	}
	run := func(hold bool) *result.Result {
		opts := options(Rebalancer, 3)
		opts.Replays = 5
		po := planning
		po.HoldEmptyNodes = planner.HoldNever
		if hold {
			po.HoldEmptyNodes = planner.HoldAlways
		}
		res, err := runOn(testContext(t), pol, []*config.KubeSchedulerProfile{prof}, snap, opts, po)
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	free, res := run(false), run(true)
	tot := res.Totals()
	t.Logf("nodes in use %d -> %d, %d evictions, %d ping-pong, %d of %d replays held; without holding %d -> %d, %d evictions",
		res.Rounds[0].NodesInUse, tot.NodesInUse, tot.Evictions, tot.PingPong, tot.ReplaysHeld, tot.Replays,
		free.Rounds[0].NodesInUse, free.Totals().NodesInUse, free.Totals().Evictions)
	if tot.NodesInUse >= free.Totals().NodesInUse {
		t.Fatalf("holding the empty nodes ends at %d nodes in use, without at %d: want fewer", tot.NodesInUse, free.Totals().NodesInUse)
	}
	checkRoundsHold(t, res, 5)
}

// unsteeredPacking is the hint-less MostAllocated profile of
// test/testdata, for the synthetic pods' scheduler.
func unsteeredPacking(t *testing.T) *config.KubeSchedulerProfile {
	t.Helper()
	_, prof, err := profile.Load(filepath.Join("..", "..", "test", "testdata", "unsteered-packing-scheduler.yaml"), "")
	if err != nil {
		t.Fatal(err)
	}
	prof.SchedulerName = "rebalancer-scheduler" // the synthetic pods' scheduler
	return prof
}

// checkRoundsHold requires of res, simulated with that many replays per
// round, that no round adds a node in use, every round that evicts holds
// in all its replays and for all its moves, and no pod ping-pongs.
func checkRoundsHold(t *testing.T, res *result.Result, replays int) {
	t.Helper()
	for i := 1; i < len(res.Rounds); i++ {
		r := res.Rounds[i]
		if r.NodesInUse > res.Rounds[i-1].NodesInUse {
			t.Errorf("round %d: nodes in use %d -> %d", i, res.Rounds[i-1].NodesInUse, r.NodesInUse)
		}
		if r.Evictions > 0 && (r.Replays != replays || r.ReplaysHeld != r.Replays) {
			t.Errorf("round %d: %d of %d replays held the plan", i, r.ReplaysHeld, r.Replays)
		}
		if r.PlanAccuracy != nil && *r.PlanAccuracy != 100 {
			t.Errorf("round %d: plan held for %.1f%% of moves", i, *r.PlanAccuracy)
		}
	}
	if tot := res.Totals(); tot.PingPong != 0 {
		t.Errorf("%d ping-pong", tot.PingPong)
	}
}

// TestReplaysHoldOntoAPlannedEmptyNode: Consolidation empties two small
// nodes onto a large empty one (a net saving of one node). Every seeded
// replay carries that out, landing the pods on the node the plan chose,
// and counts as held: a node the plan moves pods onto is no stray landing
// for having been empty before.
func TestReplaysHoldOntoAPlannedEmptyNode(t *testing.T) {
	snap := &snapshot.Snapshot{Nodes: []*v1.Node{
		testutil.BuildTestNode("small-a", "4", "16Gi"),
		testutil.BuildTestNode("small-b", "4", "16Gi"),
		testutil.BuildTestNode("big", "16", "64Gi"),
	}}
	for i, node := range []string{"small-a", "small-a", "small-a", "small-b", "small-b", "small-b"} {
		snap.Pods = append(snap.Pods, testutil.BuildTestPod(fmt.Sprintf("web-%d", i), node, "1", "1Gi", testutil.Running,
			testutil.WithScheduler("rebalancer-scheduler"),
			func(p *v1.Pod) {
				p.OwnerReferences = []metav1.OwnerReference{testutil.ControllerRef("ReplicaSet", "web", "rs-web")}
				if node == "small-a" {
					p.Spec.Priority = ptr.To(int32(1 << 25)) // each eviction costs 2
				}
			}))
	}
	pol, profs := loadPair(t, "binpacking")
	opts := options(Rebalancer, 2)
	opts.Replays = 5
	res, err := runOn(testContext(t), pol, profs, snap, opts, planning)
	if err != nil {
		t.Fatal(err)
	}
	if res.Rounds[1].Evictions != 6 || res.Rounds[1].NodesInUse != 1 {
		t.Fatalf("round 1: %d evictions, %d nodes in use; want the 6 pods onto big", res.Rounds[1].Evictions, res.Rounds[1].NodesInUse)
	}
	if c, tc := res.Rounds[1].Cost, res.Totals().Cost; c != 9 || tc != 9 {
		t.Errorf("round 1 cost %v, all rounds %v; want 9 (three evictions at 2, three at 1)", c, tc)
	}
	var b strings.Builder
	if err := (&result.Comparison{Rebalancer: res}).Print(&b, "table"); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "6 evictions (cost 9), 0 ping-pong") {
		t.Errorf("the table does not say what the evictions cost:\n%s", b.String())
	}
	checkRoundsHold(t, res, 5)
}

// makeRoomPolicy is MakeRoom alone, for pods unschedulable a minute.
func makeRoomPolicy(t *testing.T) *api.DeschedulerPolicy {
	t.Helper()
	pol, err := policy.Load(filepath.Join("..", "..", "test", "testdata", "makeroom-policy.yaml"), fake.NewClientset(), policy.Registry())
	if err != nil {
		t.Fatal(err)
	}
	return pol
}

// fragmented is a cluster of nodes of 8 CPUs, each filled by pods of 500m
// to 3 CPUs to within 2 CPUs or less, so that a pod of more than 2 CPUs
// fits nowhere, and pending pods of 2.5 to 6 CPUs, which the scheduler
// has not tried yet (queued), created a minute apart in reverse order of
// their names.
func fragmented(r *rand.Rand, nodes, queued int) *snapshot.Snapshot {
	snap := &snapshot.Snapshot{}
	owner := func(app string) func(*v1.Pod) {
		return func(p *v1.Pod) {
			p.OwnerReferences = []metav1.OwnerReference{testutil.ControllerRef("ReplicaSet", app, types.UID("rs-"+app))}
		}
	}
	sched := testutil.WithScheduler("rebalancer-scheduler")
	sizes := []int64{500, 1000, 1500, 2000, 3000}
	for i := range nodes {
		node := fmt.Sprintf("node-%02d", i)
		snap.Nodes = append(snap.Nodes, testutil.BuildTestNode(node, "8", "64Gi"))
		free := int64(8000)
		for k := 0; free > 2000; k++ {
			cpu := min(sizes[r.IntN(len(sizes))], free-500*int64(r.IntN(2)))
			free -= cpu
			app := fmt.Sprintf("app%d", r.IntN(6))
			snap.Pods = append(snap.Pods, testutil.BuildTestPod(fmt.Sprintf("%s-%s-%d", app, node, k), node, fmt.Sprintf("%dm", cpu), "1Gi",
				testutil.Running, sched, owner(app)))
		}
	}
	created := time.Date(2025, time.December, 1, 0, 0, 0, 0, time.UTC)
	for i := range queued {
		p := testutil.BuildTestPod(fmt.Sprintf("job-%02d", i), "", fmt.Sprintf("%dm", 2500+500*r.IntN(8)), "2Gi", sched, owner(fmt.Sprintf("job-%02d", i)))
		p.Status.Phase = v1.PodPending
		p.CreationTimestamp = metav1.NewTime(created.Add(time.Duration(queued-i) * time.Minute))
		snap.Pods = append(snap.Pods, p)
	}
	return snap
}

// TestArrivalsAreMadeRoomFor: pods let in a few per round that fit
// nowhere are placed by MakeRoom's moves from the round after their
// arrival (MakeRoom waits out unschedulableFor), and every pod placed
// took moves; no evicted pod ends pending; the upstream baseline, which
// has no such strategy, places none; the snapshot is not modified.
func TestArrivalsAreMadeRoomFor(t *testing.T) {
	_, profs := loadPair(t, "binpacking")
	pol := makeRoomPolicy(t)
	ctx := testContext(t)
	placed := 0
	for seed := uint64(1); seed <= 6; seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			const queued, arrivals = 5, 2
			snap := fragmented(rand.New(rand.NewPCG(seed, 0)), 6+int(seed), queued)
			before := len(snap.Pods)
			opts := options(Rebalancer, 5)
			opts.Arrivals = arrivals
			res, err := runOn(ctx, pol, profs, snap, opts, planning)
			if err != nil {
				t.Fatal(err)
			}
			if len(snap.Pods) != before || snap.Pods[before-1].Status.Conditions != nil {
				t.Fatal("the snapshot was modified")
			}
			if r0 := res.Rounds[0]; r0.Unschedulable != 0 || r0.Arrived != 0 {
				t.Fatalf("round 0: %d unschedulable, %d arrived; want the queue held back", r0.Unschedulable, r0.Arrived)
			}
			if r1 := res.Rounds[1]; r1.Evictions != 0 || r1.Placed != 0 {
				t.Errorf("round 1: %d evictions, %d placed; want none: the first arrivals wait out unschedulableFor", r1.Evictions, r1.Placed)
			}
			arrived := 0
			for i := 1; i < len(res.Rounds); i++ {
				r, prev := res.Rounds[i], res.Rounds[i-1]
				arrived += r.Arrived
				if want := min(arrivals, queued-(arrived-r.Arrived)); r.Arrived != want {
					t.Errorf("round %d: %d arrived, want %d", i, r.Arrived, want)
				}
				// Every pod that arrives fits nowhere; a round can only
				// place them, never leave an evicted pod pending.
				if want := prev.Unschedulable + r.Arrived - r.Placed; r.Unschedulable != want {
					t.Errorf("round %d: %d unschedulable, want %d (%d before, %d arrived, %d placed)", i, r.Unschedulable, want, prev.Unschedulable, r.Arrived, r.Placed)
				}
				if r.Placed > 0 && r.Evictions == 0 {
					t.Errorf("round %d: %d placed without a move, on a cluster only moves change", i, r.Placed)
				}
				if r.PingPong != 0 {
					t.Errorf("round %d: %d ping-pong", i, r.PingPong)
				}
			}
			if tot := res.Totals(); tot.Placed > 0 && tot.Evictions > 3*tot.Placed {
				t.Errorf("%d evictions for %d pods placed; want at most maxMovesPerPod (3) each", tot.Evictions, tot.Placed)
			}
			t.Logf("placed %d with %d evictions; %d still unschedulable", res.Totals().Placed, res.Totals().Evictions, res.Totals().Unschedulable)
			placed += res.Totals().Placed

			opts.Strategy = Upstream
			base, err := runOn(ctx, pol, profs, snap, opts, planning)
			if err != nil {
				t.Fatal(err)
			}
			if bt := base.Totals(); bt.Placed != 0 || bt.Evictions != 0 || bt.Unschedulable != queued {
				t.Errorf("upstream: %d placed, %d evictions, %d unschedulable; want 0, 0, %d", bt.Placed, bt.Evictions, bt.Unschedulable, queued)
			}
		})
	}
	if placed == 0 {
		t.Error("no seed placed an arriving pod: the test shows nothing")
	}
}

// TestHoldBackOldestFirst: the queue is the snapshot's pending pods, oldest
// first; bound and finished pods stay.
func TestHoldBackOldestFirst(t *testing.T) {
	snap := fragmented(rand.New(rand.NewPCG(1, 0)), 2, 4)
	done := testutil.BuildTestPod("done", "", "1", "1Gi")
	done.Status.Phase = v1.PodSucceeded
	snap.Pods = append(snap.Pods, done)
	held, queue := holdBack(snap)
	var names []string
	for _, p := range queue {
		names = append(names, p.Name)
	}
	if want := []string{"job-03", "job-02", "job-01", "job-00"}; !slices.Equal(names, want) {
		t.Errorf("queue %v, want %v", names, want)
	}
	if len(held.Pods) != len(snap.Pods)-4 || !slices.Contains(held.Pods, done) {
		t.Errorf("held back %d of %d pods, or dropped the finished one", len(snap.Pods)-len(held.Pods), len(snap.Pods))
	}
}
