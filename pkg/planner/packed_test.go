package planner

import (
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/kubernetes/pkg/scheduler/apis/config"
	"sigs.k8s.io/descheduler/pkg/api"

	"github.com/rebalancer-dev/rebalancer/pkg/history"
	"github.com/rebalancer-dev/rebalancer/pkg/plan"
	"github.com/rebalancer-dev/rebalancer/pkg/simulator"
)

// unsteeredPacking is a packing profile for default-scheduler that
// rebalancer cannot steer, as a managed cluster's scheduler runs it.
func unsteeredPacking(*testing.T) string {
	return filepath.Join("..", "..", "test", "testdata", "unsteered-packing-scheduler.yaml")
}

// TestUnsteeredPackingDrainsHold: with a packing scheduler rebalancer
// cannot steer, a drain is planned when every node its replacements may
// land on (ties, node sampling) stays in use, whatever the scheduler
// chooses. On clusters full of exact ties, below and above the 100 nodes
// where kube-scheduler starts to sample, the plan empties nodes, and in 20
// replays as kube-scheduler may carry it out (ties at random, each search
// from a random node, seeds the planner does not use) every drained node
// ends empty and no node that was empty is used.
func TestUnsteeredPackingDrainsHold(t *testing.T) {
	pol, _ := loadPair(t, "binpacking")
	profs := schedulers(t, unsteeredPacking(t))
	for _, tc := range []struct {
		name    string
		build   func() *cluster
		packs   bool // the plan must free nodes
		seeds   int
		minimum int // nodes in use after, at most
	}{
		{name: "thin-12", build: func() *cluster { return thinCluster(12) }, packs: true},
		{name: "thin-12-with-empty-nodes", build: func() *cluster { return withEmpty(thinCluster(12), 6) }, packs: true},
		{name: "thin-140-sampled", build: func() *cluster { return withEmpty(thinCluster(140), 30) }, packs: true},
		{name: "fragmented-1", build: func() *cluster { return fragmented(1) }},
		{name: "fragmented-2", build: func() *cluster { return fragmented(2) }},
		{name: "fragmented-3", build: func() *cluster { return fragmented(3) }},
		{name: "gpu-1", build: func() *cluster { return gpuShaped(1) }},
		{name: "gpu-2", build: func() *cluster { return gpuShaped(2) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := tc.build()
			for _, ns := range []string{"default", "kube-system", "team-a", "team-b"} {
				c.setScheduler(ns, "default-scheduler")
			}
			p := planWith(t, profs, pol, c.snap)
			checkInvariants(t, c, pol, p)
			packed := 0
			for _, m := range p.Moves {
				if m.Steered {
					t.Errorf("%s planned as steered; its scheduler does not follow hints", m.Pod)
				}
				if m.Candidates > 0 {
					packed++
					if !m.Anywhere || !m.Drain {
						t.Errorf("%s: %d candidates but anywhere %v, drain %v", m.Pod, m.Candidates, m.Anywhere, m.Drain)
					}
				}
			}
			s := p.Summary
			t.Logf("nodes in use %d -> %d (bound %d), %d moves, %d left to the scheduler", s.NodesInUseBefore, s.NodesInUseAfter, s.NodesLowerBound, len(p.Moves), packed)
			if s.NodesInUseAfter > s.NodesInUseBefore {
				t.Errorf("nodes in use %d -> %d: the plan adds nodes", s.NodesInUseBefore, s.NodesInUseAfter)
			}
			if tc.packs && (s.NodesInUseAfter >= s.NodesInUseBefore || packed == 0) {
				t.Fatalf("nodes in use %d -> %d with %d moves left to the scheduler: want nodes freed by drains whose replacements may land on any of several nodes", s.NodesInUseBefore, s.NodesInUseAfter, packed)
			}
			replayAsTheScheduler(t, c, p, 20)
		})
	}
}

// TestHoldEmptyNodes: where small empty nodes outscore the nodes in use
// for a packing scheduler rebalancer cannot steer (a pod fills more of a
// small node), no drain is certain: any replacement may land on one. With
// HoldEmptyNodes those nodes carry the drain taint for the cycle: the plan
// names them, empties nodes, and in 20 replays as kube-scheduler may carry
// it out, with the held nodes tainted, every drained node ends empty and
// no empty node is used. Below and above the 100 nodes where kube-scheduler
// starts to sample.
func TestHoldEmptyNodes(t *testing.T) {
	pol, _ := loadPair(t, "binpacking")
	profs := schedulers(t, unsteeredPacking(t))
	for _, tc := range []struct {
		name          string
		inUse, spares int
	}{
		{name: "12-in-use-20-small-spares", inUse: 12, spares: 20},
		{name: "60-in-use-200-small-spares-sampled", inUse: 60, spares: 200},
	} {
		t.Run(tc.name, func(t *testing.T) {
			build := func() *cluster {
				c := thinCluster(tc.inUse)
				for i := range tc.spares {
					c.node(fmt.Sprintf("node-%03d-small", i), "2", "8Gi")
				}
				for _, ns := range []string{"default", "kube-system", "team-a", "team-b"} {
					c.setScheduler(ns, "default-scheduler")
				}
				return c
			}
			c := build()
			free := planWithOptions(t, profs, pol, c.snap, Options{MinScoreGain: 1, HoldEmptyNodes: HoldNever})
			if len(free.HeldEmpty) > 0 {
				t.Errorf("with HoldNever the plan holds %d nodes", len(free.HeldEmpty))
			}
			// By default too: the policy packs, and so does the one
			// scheduler of the cluster's pods, which does not follow hints.
			p := planWith(t, profs, pol, c.snap)
			always := planWithOptions(t, profs, pol, c.snap, Options{MinScoreGain: 1, HoldEmptyNodes: HoldAlways})
			if !reflect.DeepEqual(p.Moves, always.Moves) || !slices.Equal(p.HeldEmpty, always.HeldEmpty) {
				t.Errorf("by default %d moves, %d held; with HoldAlways %d moves, %d held", len(p.Moves), len(p.HeldEmpty), len(always.Moves), len(always.HeldEmpty))
			}
			checkInvariants(t, c, pol, p)
			s := p.Summary
			t.Logf("nodes in use %d -> %d (bound %d), %d moves, %d held; without holding: %d -> %d, %d moves",
				s.NodesInUseBefore, s.NodesInUseAfter, s.NodesLowerBound, len(p.Moves), len(p.HeldEmpty),
				free.Summary.NodesInUseBefore, free.Summary.NodesInUseAfter, len(free.Moves))
			if s.NodesInUseAfter >= free.Summary.NodesInUseAfter {
				t.Fatalf("holding the empty nodes frees no more nodes: %d in use after, %d without", s.NodesInUseAfter, free.Summary.NodesInUseAfter)
			}
			if len(p.HeldEmpty) != tc.spares {
				t.Errorf("held %d nodes, want the %d empty ones: %v", len(p.HeldEmpty), tc.spares, p.HeldEmpty)
			}
			for _, n := range p.HeldEmpty {
				if !strings.HasSuffix(n, "-small") {
					t.Errorf("held %s, which is in use", n)
				}
			}
			for _, m := range p.Moves {
				if strings.HasSuffix(m.Target, "-small") {
					t.Errorf("%s planned onto %s, a node held empty", m.Pod, m.Target)
				}
			}
			// Rechecked before each eviction, the held nodes tainted too.
			if refused := recheckAll(t, profs, pol, c.snap, p); len(refused) > 0 {
				t.Errorf("rechecked on the cluster it was planned on, %d of %d moves refused: %q", len(refused), len(p.Moves), refused)
			}
			replayAsTheScheduler(t, c, p, 20)
		})
	}
}

// TestHoldingByDefault: by default a plan holds the empty nodes only where
// it packs for schedulers it cannot steer: a packing policy, and every
// scheduler of the cluster's pods packs without following hints. Elsewhere
// (a steered scheduler among them, one that spreads, a policy that
// spreads) it plans exactly as with holding off, on a cluster where
// holding would change the plan.
func TestHoldingByDefault(t *testing.T) {
	packing, _ := loadPair(t, "binpacking")
	balancing, _ := loadPair(t, "balancing")
	build := func(schedulerOf map[string]string) *cluster {
		c := thinCluster(12)
		for i := range 6 {
			c.node(fmt.Sprintf("node-%03d-small", i), "2", "8Gi")
		}
		for ns, name := range schedulerOf {
			c.setScheduler(ns, name)
		}
		return c
	}
	allDefault := map[string]string{"default": "default-scheduler", "kube-system": "default-scheduler", "team-a": "default-scheduler", "team-b": "default-scheduler"}
	mixed := map[string]string{"kube-system": "default-scheduler", "team-a": "default-scheduler"} // team-b stays on rebalancer-scheduler
	for _, tc := range []struct {
		name        string
		policy      *api.DeschedulerPolicy
		profiles    []*config.KubeSchedulerProfile
		schedulerOf map[string]string
		holds       bool
	}{
		{name: "packing policy, hint-less packing scheduler", policy: packing, profiles: schedulers(t, unsteeredPacking(t)), schedulerOf: allDefault, holds: true},
		{name: "packing policy, a user's MostAllocated profile", policy: packing, profiles: schedulers(t, mostAllocated(t)), schedulerOf: allDefault, holds: true},
		{name: "packing policy, the shipped steered pair", policy: packing, profiles: schedulers(t)},
		{name: "packing policy, steered and hint-less schedulers", policy: packing, profiles: schedulers(t, unsteeredPacking(t)), schedulerOf: mixed},
		{name: "packing policy, kube-scheduler's default profile", policy: packing, profiles: schedulers(t), schedulerOf: allDefault},
		{name: "balancing policy, hint-less packing scheduler", policy: balancing, profiles: schedulers(t, unsteeredPacking(t)), schedulerOf: allDefault},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := build(tc.schedulerOf)
			_, sim := simulation(t, tc.profiles, c.snap)
			rule := &planner{policy: tc.policy, sim: sim}
			if got := rule.holds(rule.schedulersInUse(sim.State())); got != tc.holds {
				t.Fatalf("holds the empty nodes by default: %v, want %v", got, tc.holds)
			}
			auto := planWithOptions(t, tc.profiles, tc.policy, c.snap, Options{MinScoreGain: 1, AllowConflicting: true})
			always := planWithOptions(t, tc.profiles, tc.policy, c.snap, Options{MinScoreGain: 1, AllowConflicting: true, HoldEmptyNodes: HoldAlways})
			never := planWithOptions(t, tc.profiles, tc.policy, c.snap, Options{MinScoreGain: 1, AllowConflicting: true, HoldEmptyNodes: HoldNever})
			want := never
			if tc.holds {
				want = always
			}
			t.Logf("by default %d moves, %d held; always %d moves, %d held; never %d moves", len(auto.Moves), len(auto.HeldEmpty), len(always.Moves), len(always.HeldEmpty), len(never.Moves))
			if !reflect.DeepEqual(auto.Moves, want.Moves) || !slices.Equal(auto.HeldEmpty, want.HeldEmpty) {
				t.Errorf("by default %d moves, %d held; want %d moves, %d held (holding %v)", len(auto.Moves), len(auto.HeldEmpty), len(want.Moves), len(want.HeldEmpty), tc.holds)
			}
			if tc.holds && len(auto.HeldEmpty) != 6 {
				t.Errorf("held %v, want the 6 small empty nodes", auto.HeldEmpty)
			}
		})
	}
}

// withEmpty adds n empty nodes, named to sort among the others, so that a
// replacement that strays finds one.
func withEmpty(c *cluster, n int) *cluster {
	for i := range n {
		c.node(fmt.Sprintf("node-%02d-spare", i), "8", "32Gi")
	}
	return c
}

// replayAsTheScheduler carries p out on a simulation of c as kube-scheduler
// may, replays times, and requires every drained node to end empty and
// every node in use after to have been in use before.
func replayAsTheScheduler(t *testing.T, c *cluster, p *plan.Plan, replays int, checks ...func(replay int, landed []simulator.Landing)) {
	t.Helper()
	if len(p.Moves) == 0 {
		return
	}
	profs := schedulers(t, unsteeredPacking(t))
	ctx, sim := simulation(t, profs, c.snap)
	byUID := podsByUID(c.snap)
	before, err := sim.Usage()
	if err != nil {
		t.Fatal(err)
	}
	inUse := map[string]bool{}
	for _, u := range before {
		inUse[u.Node] = u.InUse
	}
	// The nodes the plan holds empty carry the drain taint, as the
	// executor taints them for the cycle.
	sim.Hold(sets.New(p.HeldEmpty...))
	for seed := range replays {
		random := rand.New(rand.NewPCG(uint64(1000+seed), 7))
		fork := sim.Fork()
		sim.StartSearches(random)
		var evictions []simulator.Eviction
		for i, m := range p.Moves {
			pod := byUID[m.UID]
			e := simulator.Eviction{Pod: pod, Drain: m.Drain}
			if metav1.GetControllerOf(pod) != nil {
				e.Replacement = simulator.NewReplacement(pod, fmt.Sprintf("%s-new", pod.Name), types.UID(fmt.Sprintf("new-%d", i)), time.Time{})
			}
			evictions = append(evictions, e)
		}
		landed, err := sim.Replay(ctx, evictions, random)
		if err != nil {
			t.Fatal(err)
		}
		after, err := sim.Usage()
		if err != nil {
			t.Fatal(err)
		}
		for i, m := range p.Moves {
			if evictions[i].Replacement != nil && landed[i].Node == "" {
				t.Errorf("replay %d: %s's replacement is pending", seed, m.Pod)
			}
		}
		for _, check := range checks {
			check(seed, landed)
		}
		for _, u := range after {
			if u.InUse && !inUse[u.Node] {
				t.Errorf("replay %d: %s was empty and is in use after the plan", seed, u.Node)
			}
		}
		for _, m := range p.Moves {
			if !m.Drain {
				continue
			}
			for _, u := range after {
				if u.Node == m.Source && u.InUse {
					t.Errorf("replay %d: %s was drained and is still in use", seed, m.Source)
				}
			}
		}
		if err := sim.Revert(fork); err != nil {
			t.Fatal(err)
		}
		if t.Failed() {
			return
		}
	}
}

// TestUnsteeredDrainsStayOffNodesTheOwnerLeft: within the cooldown, a
// drain left to a scheduler rebalancer cannot steer is planned only when
// none of the nodes its replacement may land on is one a pod of its owner
// was moved off, or a cycle could undo another's move. Half the owners
// the first plan moves are given the node their replacement went to as a
// node they left: the second plan still empties nodes, plans none of
// theirs onto it, and in 20 replays as kube-scheduler may carry it out no
// replacement of theirs lands there.
func TestUnsteeredDrainsStayOffNodesTheOwnerLeft(t *testing.T) {
	pol, _ := loadPair(t, "binpacking")
	profs := schedulers(t, unsteeredPacking(t))
	c := thinCluster(12)
	for _, ns := range []string{"default", "kube-system", "team-a", "team-b"} {
		c.setScheduler(ns, "default-scheduler")
	}
	first := planWith(t, profs, pol, c.snap)
	moves := history.New(nil, time.Hour)
	left := map[string]string{}
	for i, m := range first.Moves {
		if i%2 == 0 && m.Owner != nil {
			left[m.Owner.UID] = m.Target
			moves.Record(history.Eviction{Owner: types.UID(m.Owner.UID), From: m.Target, To: "node-elsewhere"})
		}
	}
	if len(left) == 0 {
		t.Fatalf("the first plan moves nothing (%d moves): the test shows nothing", len(first.Moves))
	}
	p := planWithOptions(t, profs, pol, c.snap, Options{MinScoreGain: 1, History: moves})
	checkInvariants(t, c, pol, p)
	if p.Summary.NodesInUseAfter >= p.Summary.NodesInUseBefore {
		t.Errorf("nodes in use %d -> %d: the owners without a history still pack", p.Summary.NodesInUseBefore, p.Summary.NodesInUseAfter)
	}
	for _, m := range p.Moves {
		if m.Owner != nil && left[m.Owner.UID] == m.Target {
			t.Errorf("%s planned onto %s, which a pod of its owner left within the cooldown", m.Pod, m.Target)
		}
	}
	replayAsTheScheduler(t, c, p, 20, func(replay int, landed []simulator.Landing) {
		for i, m := range p.Moves {
			if m.Owner != nil && left[m.Owner.UID] == landed[i].Node {
				t.Errorf("replay %d: %s's replacement landed on %s, which a pod of its owner left within the cooldown", replay, m.Pod, landed[i].Node)
			}
		}
	})
}

// TestRecheckUnsteeredDrains: an unsteered packing plan, rechecked move by
// move on the cluster as it was planned, holds whole. On a cluster that has
// since gained a small empty node, one the scheduler would now choose for
// the replacements (a pod fills more of it), its drains are refused: their
// replacements could land on a node that was empty.
func TestRecheckUnsteeredDrains(t *testing.T) {
	pol, _ := loadPair(t, "binpacking")
	profs := schedulers(t, unsteeredPacking(t))
	c := thinCluster(12)
	for _, ns := range []string{"kube-system", "team-a", "team-b"} {
		c.setScheduler(ns, "default-scheduler")
	}
	p := planWith(t, profs, pol, c.snap)
	if countMoves(p, func(m plan.Move) bool { return m.Candidates > 0 }) == 0 {
		t.Fatalf("no move left to the scheduler's choice in %d moves", len(p.Moves))
	}
	if refused := recheckAll(t, profs, pol, c.snap, p); len(refused) > 0 {
		t.Errorf("rechecked on the cluster it was planned on, %d of %d moves refused: %q", len(refused), len(p.Moves), refused)
	}
	c.node("small-new", "2", "4Gi")
	refused := recheckAll(t, profs, pol, c.snap, p)
	if len(refused) == 0 {
		t.Fatal("with a new empty node the scheduler prefers, no move refused")
	}
	for _, r := range refused {
		if !strings.Contains(r, "small-new") || !strings.Contains(r, plan.ReasonTargetChanged) {
			t.Errorf("refused for another reason: %s", r)
		}
	}
}
