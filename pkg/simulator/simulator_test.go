package simulator

import (
	"context"
	"fmt"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2/ktesting"
	"k8s.io/kubernetes/cmd/kube-scheduler/app/options"
	"k8s.io/kubernetes/pkg/scheduler/apis/config"

	"github.com/rebalancer-dev/rebalancer/internal/testutil"
	"github.com/rebalancer-dev/rebalancer/pkg/hint"
	"github.com/rebalancer-dev/rebalancer/pkg/snapshot"
	"github.com/rebalancer-dev/rebalancer/pkg/wellknown"
)

// profile loads a shipped scheduler profile from policies/.
func profile(t testing.TB, file string) *config.KubeSchedulerProfile {
	t.Helper()
	logger, _ := ktesting.NewTestContext(t)
	cfg, err := options.LoadConfigFromFile(logger, filepath.Join("..", "..", "policies", file))
	if err != nil {
		t.Fatal(err)
	}
	return &cfg.Profiles[0]
}

// node is a Ready node of cpu CPUs and 32Gi.
func node(name, cpu string) *v1.Node { return testutil.BuildTestNode(name, cpu, "32Gi") }

// pod is a running pod of cpu CPUs and 1Gi for rebalancer-scheduler.
func pod(name, nodeName, cpu string) *v1.Pod {
	return testutil.BuildTestPod(name, nodeName, cpu, "1Gi", testutil.Running, testutil.WithScheduler("rebalancer-scheduler"))
}

func newSim(t testing.TB, file string, snap *snapshot.Snapshot) *Simulator {
	t.Helper()
	_, ctx := testutil.Context(t)
	s, err := New(ctx, []*config.KubeSchedulerProfile{profile(t, file)}, snap)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// thin: three 8-CPU nodes at 7, 3 and 1 CPUs requested.
func thin() *snapshot.Snapshot {
	return &snapshot.Snapshot{
		Nodes: []*v1.Node{node("a", "8"), node("b", "8"), node("c", "8")},
		Pods:  []*v1.Pod{pod("a1", "a", "5"), pod("a2", "a", "2"), pod("b1", "b", "3"), pod("c1", "c", "1")},
	}
}

func TestPredictMostAllocated(t *testing.T) {
	s := newSim(t, "binpacking-scheduler.yaml", thin())
	ctx := context.Background()

	// c1 (1 CPU) on the emptiest node: the fullest node with room is a.
	p, err := s.Predict(ctx, pod("c1", "c", "1"), PredictOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if p.Node != "a" || p.Source != "c" || !p.SourceFeasible {
		t.Fatalf("prediction %+v, want node a from feasible source c", p)
	}
	if p.Score <= p.SourceScore {
		t.Fatalf("target score %d not above source score %d", p.Score, p.SourceScore)
	}

	// a2 (2 CPU) already sits on the fullest node it fits: it stays.
	p, err = s.Predict(ctx, pod("a2", "a", "2"), PredictOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if p.Node != "a" {
		t.Fatalf("a2 predicted to %s, want to stay on a", p.Node)
	}

	// Excluding a sends c1 to b, the next fullest.
	p, err = s.Predict(ctx, pod("c1", "c", "1"), PredictOptions{Exclude: func(n string) bool { return n == "a" }})
	if err != nil {
		t.Fatal(err)
	}
	if p.Node != "b" {
		t.Fatalf("with a excluded c1 predicted to %s, want b", p.Node)
	}
}

// TestPredictPreferences: a steered pod goes to the best node Prefer
// holds for, else to the best PreferElse holds for, else to the
// scheduler's best; Exclude rules nodes out of all three.
func TestPredictPreferences(t *testing.T) {
	snap := thin()
	snap.Nodes = append(snap.Nodes, node("d", "8"))
	snap.Pods = append(snap.Pods, pod("d1", "d", "2"))
	s := newSim(t, "binpacking-scheduler.yaml", snap)
	is := func(names ...string) func(string) bool {
		return func(n string) bool { return slices.Contains(names, n) }
	}
	for _, tc := range []struct {
		name string
		opts PredictOptions
		want string
	}{
		{"the scheduler's best", PredictOptions{}, "a"},
		{"the best preferred", PredictOptions{Prefer: is("b", "d")}, "b"},
		{"the preferred one", PredictOptions{Prefer: is("d"), PreferElse: is("b")}, "d"},
		{"the second choice when no node is preferred", PredictOptions{Prefer: is("x"), PreferElse: is("b", "d")}, "b"},
		{"the second choice when the preferred is excluded", PredictOptions{Prefer: is("d"), PreferElse: is("d", "b"), Exclude: is("d")}, "b"},
		{"the scheduler's best of the rest", PredictOptions{Prefer: is("x"), PreferElse: is("y")}, "a"},
	} {
		p, err := s.Predict(context.Background(), pod("c1", "c", "1"), tc.opts)
		if err != nil {
			t.Fatal(err)
		}
		if p.Node != tc.want {
			t.Errorf("%s: predicted %s, want %s", tc.name, p.Node, tc.want)
		}
	}
}

func TestPredictBalancing(t *testing.T) {
	s := newSim(t, "balancing-scheduler.yaml", thin())
	p, err := s.Predict(context.Background(), pod("a2", "a", "2"), PredictOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// Taken off the hot node a (7 of 8 CPUs), a2 goes to the least loaded node c.
	if p.Node != "c" {
		t.Fatalf("balancing profile predicted %s, want c", p.Node)
	}
}

func TestPredictNoFit(t *testing.T) {
	s := newSim(t, "binpacking-scheduler.yaml", thin())
	p, err := s.Predict(context.Background(), pod("big", "", "9"), PredictOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if p.Node != "" {
		t.Fatalf("a 9-CPU pod fit somewhere: %+v", p)
	}
	if !strings.Contains(p.Unschedulable, "0/3 nodes are available") || !strings.Contains(p.Unschedulable, "Insufficient cpu") {
		t.Fatalf("reason %q does not explain the misfit", p.Unschedulable)
	}
}

func TestPredictTaintedSourceIsInfeasible(t *testing.T) {
	snap := thin()
	snap.Nodes[2].Spec.Taints = []v1.Taint{{Key: "maintenance", Effect: v1.TaintEffectNoSchedule}}
	s := newSim(t, "binpacking-scheduler.yaml", snap)
	p, err := s.Predict(context.Background(), pod("c1", "c", "1"), PredictOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if p.SourceFeasible || p.Node != "a" {
		t.Fatalf("prediction %+v, want source c infeasible and target a", p)
	}
}

// TestPredictLeavesStateUnchanged: a prediction takes the pod off its node
// only for the cycle.
func TestPredictLeavesStateUnchanged(t *testing.T) {
	s := newSim(t, "binpacking-scheduler.yaml", thin())
	before := requested(t, s)
	for i := 0; i < 3; i++ {
		if _, err := s.Predict(context.Background(), pod("b1", "b", "3"), PredictOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if after := requested(t, s); after != before {
		t.Fatalf("requests changed by Predict: %s -> %s", before, after)
	}
}

func TestMoveIsSeenByLaterPredictions(t *testing.T) {
	s := newSim(t, "binpacking-scheduler.yaml", thin())
	ctx := context.Background()
	// Move c1 to a (a full at 8/8); then b1 (3 CPU) no longer fits on a, and
	// b and c tie: the tie goes to the pod's own node.
	r, err := s.Relocate(context.Background(), pod("c1", "c", "1"), "a")
	if err != nil {
		t.Fatal(err)
	}
	if r.Spec.NodeName != "a" || r.UID == "uid-c1" {
		t.Fatalf("replacement %s/%s on %s", r.Name, r.UID, r.Spec.NodeName)
	}
	if got := requested(t, s); got != "a=8000 b=3000 c=0" {
		t.Fatalf("requests after move: %s", got)
	}
	p, err := s.Predict(ctx, pod("b1", "b", "3"), PredictOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if p.Node != "b" {
		t.Fatalf("b1 predicted to %s after a filled up, want b", p.Node)
	}
	onA, err := s.PodsOn("a")
	if err != nil {
		t.Fatal(err)
	}
	if len(onA) != 3 {
		t.Fatalf("%d pods on a, want 3", len(onA))
	}
	// Moving a pod the simulation no longer holds is an error, not a corruption.
	if _, err := s.Relocate(context.Background(), pod("c1", "c", "1"), "b"); err == nil {
		t.Fatal("moved a pod twice")
	}
}

func requested(t testing.TB, s *Simulator) string {
	t.Helper()
	nodes, err := s.Nodes()
	if err != nil {
		t.Fatal(err)
	}
	m := map[string]int64{}
	for _, ni := range nodes {
		m[ni.Node().Name] = ni.GetRequested().GetMilliCPU()
	}
	return fmt.Sprintf("a=%d b=%d c=%d", m["a"], m["b"], m["c"])
}

// TestForkRevertCommit: forks nest; Revert undoes exactly the changes made
// since its fork (moves, evictions, placements), Commit keeps them.
func TestForkRevertCommit(t *testing.T) {
	snap := thin()
	pending := pod("p1", "", "1")
	snap.Pods = append(snap.Pods, pending)
	s := newSim(t, "binpacking-scheduler.yaml", snap)
	ctx := context.Background()
	initial := requested(t, s)
	state := func() string {
		var names []string
		for _, p := range s.State().Pods {
			names = append(names, p.Name+"@"+p.Spec.NodeName)
		}
		return strings.Join(names, " ")
	}
	before := state()

	outer := s.Fork()
	if _, err := s.Relocate(context.Background(), pod("c1", "c", "1"), "a"); err != nil {
		t.Fatal(err)
	}
	inner := s.Fork()
	if err := s.Evict(pod("b1", "b", "3")); err != nil {
		t.Fatal(err)
	}
	if bound, _, err := s.Place(ctx, pending); err != nil || bound == nil {
		t.Fatalf("placing p1: %v %v", bound, err)
	}
	if got := requested(t, s); got != "a=8000 b=1000 c=0" {
		t.Fatalf("after move, evict and place: %s", got)
	}
	if err := s.Revert(inner); err != nil {
		t.Fatal(err)
	}
	if got := requested(t, s); got != "a=8000 b=3000 c=0" {
		t.Fatalf("after reverting the inner fork: %s, want only the move left", got)
	}
	if len(s.Pending()) != 1 || s.Pending()[0] != pending {
		t.Fatalf("pending after revert: %v", s.Pending())
	}
	if err := s.Revert(outer); err != nil {
		t.Fatal(err)
	}
	if got := requested(t, s); got != initial {
		t.Fatalf("after reverting everything: %s, want %s", got, initial)
	}
	if got := state(); got != before {
		t.Fatalf("state after revert:\n%s\nwant\n%s", got, before)
	}

	// Committed changes stay, and a revert of a later fork does not touch them.
	f := s.Fork()
	if err := s.Evict(pod("c1", "c", "1")); err != nil {
		t.Fatal(err)
	}
	s.Commit(f)
	g := s.Fork()
	if _, err := s.Relocate(context.Background(), pod("b1", "b", "3"), "c"); err != nil {
		t.Fatal(err)
	}
	if err := s.Revert(g); err != nil {
		t.Fatal(err)
	}
	if got := requested(t, s); got != "a=7000 b=3000 c=0" {
		t.Fatalf("after commit and a reverted fork: %s", got)
	}
}

// TestPlaceUnfitStaysPending: a pod that fits nowhere waits in the cluster,
// in arrival order.
func TestPlaceUnfitStaysPending(t *testing.T) {
	s := newSim(t, "binpacking-scheduler.yaml", thin())
	big, small := pod("big", "", "9"), pod("small", "", "1")
	bound, why, err := s.Place(context.Background(), big)
	if err != nil || bound != nil || !strings.Contains(why, "Insufficient cpu") {
		t.Fatalf("Place(big) = %v, %q, %v", bound, why, err)
	}
	if bound, _, err = s.Place(context.Background(), small); err != nil || bound == nil || bound.Spec.NodeName != "a" {
		t.Fatalf("Place(small) = %v, %v; want it on a", bound, err)
	}
	if p := s.Pending(); len(p) != 1 || p[0] != big {
		t.Fatalf("pending = %v, want big", p)
	}
	n, err := s.LowerBound()
	if err != nil || n != 3 {
		t.Fatalf("lower bound %d (%v), want 3 with the pending 9-CPU pod counted", n, err)
	}
}

// TestReplayStickyPodReturns: a sticky pod that leaves without a hint
// (its owner recreates it after a crash, a rollout, a delete) comes back
// to its node in the simulation as in rebalancer-scheduler, although the
// profile prefers another; a pod that is not sticky goes where the
// profile puts it, and a sticky pod with a rebalance hint where the hint
// says.
func TestReplayStickyPodReturns(t *testing.T) {
	owned := func(p *v1.Pod, sticky bool) *v1.Pod {
		p.OwnerReferences = []metav1.OwnerReference{testutil.ControllerRef("ReplicaSet", "rs-"+p.Name, types.UID("rs-"+p.Name))}
		if sticky {
			p.Annotations = map[string]string{wellknown.StickyAnnotation: "true"}
		}
		return p
	}
	for _, tc := range []struct {
		name   string
		sticky bool
		hint   *hint.Hint
		want   string
	}{
		{"sticky", true, nil, "c"},
		{"not sticky", false, nil, "a"},
		{"sticky, moved by the plan", true, &hint.Hint{Source: "c", Target: "b", PlanID: "p1"}, "b"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			snap := thin()
			c1 := owned(snap.Pods[3], tc.sticky) // 1 CPU on c; bin-packing prefers a
			s := newSim(t, "binpacking-scheduler.yaml", snap)
			landed, err := s.Replay(context.Background(), []Eviction{{Pod: c1, Hint: tc.hint, Replacement: NewReplacement(c1, "c1-new", "uid-c1-new", time.Time{})}}, nil)
			if err != nil {
				t.Fatal(err)
			}
			if landed[0].Node != tc.want {
				t.Errorf("replacement landed on %q, want %q", landed[0].Node, tc.want)
			}
		})
	}
}

// TestResolvable: the nodes where taking pods off may let a pending pod in
// are those that refused it for resources only; a node it is kept off by
// a taint or its node selector is not one, however much room moves would
// free, and a pod that fits somewhere has none.
func TestResolvable(t *testing.T) {
	snap := thin() // a: 7 of 8 CPUs, b: 3, c: 1
	tainted := node("d", "8")
	tainted.Spec.Taints = []v1.Taint{{Key: "dedicated", Value: "x", Effect: v1.TaintEffectNoSchedule}}
	snap.Nodes = append(snap.Nodes, tainted)
	snap.Pods = append(snap.Pods, pod("d1", "d", "7"))
	for _, n := range snap.Nodes {
		n.Labels["pool"] = map[string]string{"a": "x", "b": "y", "c": "y", "d": "x"}[n.Name]
	}
	s := newSim(t, "binpacking-scheduler.yaml", snap)
	ctx := context.Background()

	big := pod("big", "", "8") // fits nowhere
	fits, nodes, err := s.Resolvable(ctx, big)
	if err != nil || fits || !reflect.DeepEqual(nodes, []string{"a", "b", "c"}) {
		t.Fatalf("Resolvable(8 CPUs) = %v, %v, %v; want a, b and c: d is tainted", fits, nodes, err)
	}
	big.Spec.NodeSelector = map[string]string{"pool": "x"}
	if fits, nodes, err = s.Resolvable(ctx, big); err != nil || fits || !reflect.DeepEqual(nodes, []string{"a"}) {
		t.Fatalf("Resolvable(8 CPUs, pool x) = %v, %v, %v; want a alone", fits, nodes, err)
	}
	if fits, nodes, err = s.Resolvable(ctx, pod("small", "", "2")); err != nil || !fits || nodes != nil {
		t.Fatalf("Resolvable(2 CPUs) = %v, %v, %v; want it to fit", fits, nodes, err)
	}
	if p := s.Pending(); len(p) != 0 {
		t.Fatalf("Resolvable left pods pending in the simulation: %v", p)
	}
}
