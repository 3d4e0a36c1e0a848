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
	snap := &snapshot.Snapshot{}
	n := 3 + r.IntN(8)
	for i := range n {
		nd := node(fmt.Sprintf("n%02d", i), "8")
		if r.IntN(6) == 0 {
			nd.Spec.Taints = []v1.Taint{{Key: "maintenance", Effect: v1.TaintEffectNoSchedule}}
		}
		snap.Nodes = append(snap.Nodes, nd)
	}
	cpus := []string{"500m", "1", "2", "3"}
	for i := range 4 * n {
		p := pod(fmt.Sprintf("p%03d", i), snap.Nodes[r.IntN(n)].Name, cpus[r.IntN(len(cpus))])
		p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "rs" + p.Name, UID: types.UID("rs-" + p.Name), Controller: ptrTo(true)}}
		snap.Pods = append(snap.Pods, p)
	}
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
