package simulator

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2/ktesting"
	"k8s.io/kubernetes/pkg/scheduler/apis/config"

	"github.com/rebalancer-dev/rebalancer/internal/testutil"
	"github.com/rebalancer-dev/rebalancer/pkg/hint"
	"github.com/rebalancer-dev/rebalancer/pkg/snapshot"
)

// TestHintedPlacementIsTheFullCycle: where RebalanceHint outweighs the
// profile's other scores, a hinted replacement is placed by filtering its
// target alone; on random clusters and hints (targets full, tainted,
// drained, or the source) every replacement lands where the whole
// scheduling cycle puts it, as certainly.
func TestHintedPlacementIsTheFullCycle(t *testing.T) {
	for seed := range uint64(20) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			snap, evictions := hintedCluster(seed)
			var landed [2][]Landing
			for i, shortcut := range []bool{true, false} {
				s := newSim(t, "binpacking-scheduler.yaml", snap)
				sc := s.schedulers["rebalancer-scheduler"]
				if !sc.hintDecides {
					t.Fatal("the shipped bin-packing profile's hint does not decide")
				}
				sc.hintDecides = shortcut
				var err error
				if landed[i], err = s.Replay(context.Background(), evictions(), nil); err != nil {
					t.Fatal(err)
				}
			}
			for i := range landed[0] {
				got, want := landed[0][i], landed[1][i]
				if got.Node != want.Node || got.Certain != want.Certain {
					t.Errorf("replacement %d: landed on %q (certain %v), the whole cycle puts it on %q (certain %v)", i, got.Node, got.Certain, want.Node, want.Certain)
				}
			}
		})
	}
}

// hintedCluster is a random cluster of 8-CPU nodes and the evictions of a
// random plan over it, each hinted to a random node.
func hintedCluster(seed uint64) (*snapshot.Snapshot, func() []Eviction) {
	r := rand.New(rand.NewPCG(seed, 1))
	// Owners of three pods: their replacements take the owner's hints in turn.
	snap := randomCluster(r, 3+r.IntN(8), 4, []string{"500m", "1", "2", "3"}, 3)
	n := len(snap.Nodes)
	type move struct {
		pod    *v1.Pod
		target string
		drain  bool
	}
	var moves []move
	for _, p := range snap.Pods {
		if r.IntN(3) == 0 {
			moves = append(moves, move{p, snap.Nodes[r.IntN(n)].Name, r.IntN(4) == 0})
		}
	}
	return snap, func() []Eviction {
		out := make([]Eviction, len(moves))
		for i, m := range moves {
			out[i] = Eviction{Pod: m.pod, Drain: m.drain, Hint: &hint.Hint{Source: m.pod.Spec.NodeName, Target: m.target, PlanID: "p"},
				Replacement: NewReplacement(m.pod, m.pod.Name+"-new", m.pod.UID+"-new", time.Time{})}
		}
		return out
	}
}

// TestSampledSearchStopsEarly: with node sampling, the filters stop once
// they have found the nodes kube-scheduler scores, as its own do; on
// random clusters and searches every replacement lands where it lands
// when every node is filtered, and the next search starts at the same node.
func TestSampledSearchStopsEarly(t *testing.T) {
	prof := profile(t, "binpacking-scheduler.yaml")
	prof.PercentageOfNodesToScore = ptrTo[int32](20)
	for seed := range uint64(6) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			snap, evictions := sampledCluster(seed)
			var landed [2][]Landing
			var next [2]int
			for i, all := range []bool{false, true} {
				_, ctx := ktesting.NewTestContext(t)
				s, err := New(ctx, []*config.KubeSchedulerProfile{prof}, snap)
				if err != nil {
					t.Fatal(err)
				}
				sc := s.schedulers[prof.SchedulerName]
				sc.filterAll = all
				random := rand.New(rand.NewPCG(seed, 7))
				s.StartSearches(random)
				if landed[i], err = s.Replay(context.Background(), evictions(), random); err != nil {
					t.Fatal(err)
				}
				next[i] = sc.next
			}
			placed := 0
			for i := range landed[0] {
				if got, want := landed[0][i].Node, landed[1][i].Node; got != want {
					t.Errorf("replacement %d: landed on %q, on %q with every node filtered", i, got, want)
				}
				if landed[0][i].Node != "" {
					placed++
				}
			}
			if next[0] != next[1] {
				t.Errorf("next search starts at node %d, at %d with every node filtered", next[0], next[1])
			}
			if placed == 0 {
				t.Error("nothing placed: the test shows nothing")
			}
		})
	}
}

// sampledCluster is a random cluster of 150 to 300 nodes, some tainted or
// full, and the evictions of a random plan over it, without hints.
func sampledCluster(seed uint64) (*snapshot.Snapshot, func() []Eviction) {
	r := rand.New(rand.NewPCG(seed, 3))
	snap := randomCluster(r, 150+r.IntN(150), 2, []string{"1", "2", "3", "4"}, 1)
	var moved []*v1.Pod
	var drain []bool
	for _, p := range snap.Pods {
		if r.IntN(10) == 0 {
			moved = append(moved, p)
			drain = append(drain, r.IntN(3) == 0)
		}
	}
	return snap, func() []Eviction {
		out := make([]Eviction, len(moved))
		for i, p := range moved {
			out[i] = Eviction{Pod: p, Drain: drain[i], Replacement: NewReplacement(p, p.Name+"-new", p.UID+"-new", time.Time{})}
		}
		return out
	}
}

// randomCluster is nodes 8-CPU nodes, one in five tainted, with podsPerNode
// pods a node on average, placed at random, of the given CPU requests;
// every perOwner pods share a ReplicaSet.
func randomCluster(r *rand.Rand, nodes, podsPerNode int, cpus []string, perOwner int) *snapshot.Snapshot {
	snap := &snapshot.Snapshot{}
	for i := range nodes {
		nd := node(fmt.Sprintf("n%03d", i), "8")
		if r.IntN(5) == 0 {
			nd.Spec.Taints = []v1.Taint{{Key: "maintenance", Effect: v1.TaintEffectNoSchedule}}
		}
		snap.Nodes = append(snap.Nodes, nd)
	}
	for i := range podsPerNode * nodes {
		p := pod(fmt.Sprintf("p%04d", i), snap.Nodes[r.IntN(nodes)].Name, cpus[r.IntN(len(cpus))])
		rs := fmt.Sprintf("rs%d", i/perOwner)
		p.OwnerReferences = []metav1.OwnerReference{testutil.ControllerRef("ReplicaSet", rs, types.UID(rs))}
		snap.Pods = append(snap.Pods, p)
	}
	return snap
}
