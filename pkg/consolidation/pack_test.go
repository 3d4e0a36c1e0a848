package consolidation

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/kubernetes/pkg/scheduler/framework"

	"github.com/rebalancer-dev/rebalancer/internal/testutil"
	"github.com/rebalancer-dev/rebalancer/pkg/requests"
	"github.com/rebalancer-dev/rebalancer/pkg/simulator"
)

// TestPackHoldsWhatItEmpties: on random clusters of unlike nodes and pods,
// the packing keeps the pinned nodes and a prefix of the keep order, its
// quotas give every pod of the nodes it empties a kept node (shape by
// shape), and no kept node is given more than its free room or slots.
func TestPackHoldsWhatItEmpties(t *testing.T) {
	counted := []v1.ResourceName{v1.ResourceCPU, v1.ResourceMemory}
	cpus := []string{"50m", "100m", "250m", "500m", "1", "2", "4"}
	mems := []string{"64Mi", "256Mi", "1Gi", "4Gi"}
	for seed := range uint64(40) {
		rng := rand.New(rand.NewPCG(seed, 7))
		var order []candidate
		pinned := map[string]bool{}
		n := 3 + rng.IntN(30)
		for i := range n {
			node := testutil.BuildTestNode(fmt.Sprintf("n%d", i), []string{"4", "8", "16", "64"}[rng.IntN(4)], []string{"16Gi", "64Gi", "256Gi"}[rng.IntN(3)])
			node.Status.Allocatable[v1.ResourcePods] = resource.MustParse(fmt.Sprint(10 + rng.IntN(30)))
			var pods []*v1.Pod
			ds := testutil.BuildTestPod(fmt.Sprintf("ds-%d", i), node.Name, "100m", "128Mi")
			ds.OwnerReferences = append(ds.OwnerReferences, testutil.ControllerRef("DaemonSet", "agent", "ds"))
			pods = append(pods, ds)
			// The node's pods fit it, as the scheduler placed them.
			alloc := node.Status.Allocatable
			cpu, mem, slots := alloc.Cpu(), alloc.Memory(), alloc.Pods()
			cpuLeft, memLeft, slotsLeft := cpu.MilliValue()-100, mem.Value()-128<<20, slots.Value()-1
			for j := range rng.IntN(12) {
				p := testutil.BuildTestPod(fmt.Sprintf("p-%d-%d", i, j), node.Name, cpus[rng.IntN(len(cpus))], mems[rng.IntN(len(mems))],
					func(p *v1.Pod) { p.UID = types.UID(fmt.Sprintf("%d-%d", i, j)) })
				req := requests.Of(p)
				if c, m := req.Cpu().MilliValue(), req.Memory().Value(); c <= cpuLeft && m <= memLeft && slotsLeft > 0 {
					cpuLeft, memLeft, slotsLeft = cpuLeft-c, memLeft-m, slotsLeft-1
					pods = append(pods, p)
				}
			}
			ni := framework.NewNodeInfo(pods...)
			ni.SetNode(node)
			order = append(order, candidate{node: node, ni: ni})
			if i < rng.IntN(3) {
				pinned[node.Name] = true
			}
		}

		pk := pack(order, pinned, counted, nil)
		kept := 0
		for i, cand := range order {
			if pk.keep[cand.node.Name] {
				if i != kept {
					t.Fatalf("seed %d: kept %s at %d of the order, not a prefix (%d kept before it)", seed, cand.node.Name, i, kept)
				}
				kept++
			} else if pinned[cand.node.Name] {
				t.Fatalf("seed %d: pinned node %s not kept", seed, cand.node.Name)
			}
		}
		leaving := map[shape]int{}
		for _, cand := range order[kept:] {
			for _, pi := range cand.ni.GetPods() {
				if p := pi.GetPod(); !simulator.NodeBound(p) {
					leaving[pk.shapeOf(p)]++
				}
			}
		}
		given := map[shape]int{}
		for _, cand := range order[:kept] {
			room := make([]int64, len(counted))
			for k, r := range counted {
				used, total := amounts(cand.ni, r, nil)
				room[k] = total - used
			}
			slots := cand.ni.GetAllocatable().GetAllowedPodNumber() - len(cand.ni.GetPods())
			for s, nodes := range pk.room {
				q := nodes[cand.node.Name]
				given[s] += q
				slots -= q
				for k, a := range amountsOf(testShape(t, s), counted) {
					room[k] -= a * int64(q)
				}
			}
			for k, r := range room {
				if r < 0 {
					t.Errorf("seed %d: %s given %v more %s than it has free", seed, cand.node.Name, -r, counted[k])
				}
			}
			if slots < 0 {
				t.Errorf("seed %d: %s given %d more pods than its free slots", seed, cand.node.Name, -slots)
			}
		}
		for s, want := range leaving {
			if given[s] != want {
				t.Errorf("seed %d: %d pods of shape %s leave the emptied nodes, the packing gives %d a kept node", seed, want, s, given[s])
			}
		}
		for s, q := range given {
			if leaving[s] == 0 && q > 0 {
				t.Errorf("seed %d: the packing gives room to %d pods of shape %s, which no emptied node has", seed, q, s)
			}
		}
	}
}

// testShape turns a shape key (CPU millicores, memory bytes) back into
// requests.
func testShape(t *testing.T, s shape) v1.ResourceList {
	t.Helper()
	var cpu, mem int64
	if _, err := fmt.Sscanf(string(s), "%d,%d,", &cpu, &mem); err != nil {
		t.Fatalf("shape %q: %v", s, err)
	}
	return v1.ResourceList{v1.ResourceCPU: *resource.NewMilliQuantity(cpu, resource.DecimalSI), v1.ResourceMemory: *resource.NewQuantity(mem, resource.BinarySI)}
}

// TestPackKeepsOnlyWhatItNeeds: when the pinned nodes hold every other
// node's pods, no other node is kept; when nothing is pinned and one node
// holds everything, it alone is.
func TestPackKeepsOnlyWhatItNeeds(t *testing.T) {
	counted := []v1.ResourceName{v1.ResourceCPU, v1.ResourceMemory}
	cand := func(name, cpu string, pods ...string) candidate { return testCandidate(name, cpu, 0, pods...) }
	order := []candidate{cand("big", "16", "1"), cand("a", "4", "1", "1"), cand("b", "4", "500m")}
	if pk := pack(order, map[string]bool{"big": true}, counted, nil); len(pk.keep) != 1 || !pk.keep["big"] {
		t.Errorf("kept %v, want the pinned node alone", pk.keep)
	}
	if pk := pack(order, nil, counted, nil); len(pk.keep) != 1 || !pk.keep["big"] {
		t.Errorf("kept %v, want the first node of the order alone", pk.keep)
	}
	order = append(order, cand("c", "4", "16"))
	if pk := pack(order, nil, counted, nil); len(pk.keep) != 4 {
		t.Errorf("kept %v, want every node: the last one's pod fits nowhere else", pk.keep)
	}
}

// TestPackGivesLargePodsTheRoomiestSlots: two nodes of 4 pod slots, one
// with 4 CPUs free and one with 1, take the pods of a third: two of 1.5 CPU
// and four of 250m. Filled node by node, the first would take four small
// pods (a fair share of its room per slot) and the large ones would fit
// nowhere; placed largest first where a slot has the most room, the large
// pods go to the first node and the two nodes hold all six.
func TestPackGivesLargePodsTheRoomiestSlots(t *testing.T) {
	counted := []v1.ResourceName{v1.ResourceCPU, v1.ResourceMemory}
	cand := testCandidate
	order := []candidate{cand("roomy", "4", 4), cand("small", "1", 4), cand("source", "8", 10, "1500m", "1500m", "250m", "250m", "250m", "250m")}
	pk := pack(order, nil, counted, nil)
	if len(pk.keep) != 2 || !pk.keep["roomy"] || !pk.keep["small"] {
		t.Fatalf("kept %v, want roomy and small", pk.keep)
	}
	large := pk.shapeOf(testutil.BuildTestPod("large", "", "1500m", "128Mi"))
	if got := pk.room[large]; got["roomy"] != 2 || len(got) != 1 {
		t.Errorf("room for the 1.5-CPU pods: %v, want 2 on roomy", got)
	}
}

// TestNodesThatRefuseNewPodsAreKeptLast: a large node under a NoSchedule
// taint the pods do not tolerate, and a large cordoned one, have the most
// room, but no replacement may go there: they come last in keep order (the
// first emptied), and a packing that keeps them gives them no pods. A node
// whose taint every pod tolerates (as KWOK's) is open to them.
func TestNodesThatRefuseNewPodsAreKeptLast(t *testing.T) {
	tolerated := v1.Taint{Key: "pool", Value: "fake", Effect: v1.TaintEffectNoSchedule}
	cand := func(name, cpu string, pods ...string) candidate {
		c := testCandidate(name, cpu, 0, pods...)
		c.node.Spec.Taints = []v1.Taint{tolerated}
		for _, pi := range c.ni.GetPods() {
			pi.GetPod().Spec.Tolerations = []v1.Toleration{{Key: "pool", Operator: v1.TolerationOpExists}}
		}
		return c
	}
	tainted, cordoned := cand("tainted", "64", "1"), cand("cordoned", "64", "1")
	tainted.node.Spec.Taints = append(tainted.node.Spec.Taints, v1.Taint{Key: "maintenance", Effect: v1.TaintEffectNoSchedule})
	cordoned.node.Spec.Unschedulable = true
	candidates := []candidate{tainted, cand("a", "4", "1"), cordoned, cand("b", "4", "1")}
	markClosed(candidates)
	c := &Consolidation{args: &Args{Resources: []v1.ResourceName{v1.ResourceCPU, v1.ResourceMemory}}}
	order, counted := c.keepOrder(candidates, nil)
	var names []string
	for _, o := range order {
		names = append(names, o.node.Name)
	}
	if !slices.Equal(names[2:], []string{"tainted", "cordoned"}) && !slices.Equal(names[2:], []string{"cordoned", "tainted"}) {
		t.Errorf("keep order %v, want the tainted and the cordoned node last", names)
	}
	// Kept first (say, pinned), they take nothing of the others.
	candidates = []candidate{candidates[0], candidates[2], candidates[1], candidates[3]}
	pk := pack(candidates, map[string]bool{"tainted": true, "cordoned": true}, counted, nil)
	if !pk.keep["a"] || pk.keep["b"] {
		t.Errorf("kept %v, want a (b's pod goes there) and not b", pk.keep)
	}
	for s, nodes := range pk.room {
		if nodes["tainted"] > 0 || nodes["cordoned"] > 0 {
			t.Errorf("the packing gives pods of shape %s room on nodes that refuse new pods: %v", s, nodes)
		}
	}
}

// TestPackKeepsUnderTheCeiling: with targetUtilizationCeiling 50, a kept
// node of 4 CPUs holding 1 has room for 1 more, not 3: the pods of a third
// node (2 of 1 CPU) need both others kept, where without a ceiling one
// holds them.
func TestPackKeepsUnderTheCeiling(t *testing.T) {
	counted := []v1.ResourceName{v1.ResourceCPU, v1.ResourceMemory}
	cand := func(name string, pods ...string) candidate { return testCandidate(name, "4", 0, pods...) }
	order := []candidate{cand("a", "1"), cand("b", "1"), cand("source", "1", "1")}
	if pk := pack(order, nil, counted, nil); len(pk.keep) != 1 {
		t.Errorf("no ceiling: kept %v, want a alone", pk.keep)
	}
	pk := pack(order, nil, counted, map[v1.ResourceName]int32{v1.ResourceCPU: 50})
	if len(pk.keep) != 2 || !pk.keep["a"] || !pk.keep["b"] {
		t.Errorf("ceiling 50%%: kept %v, want a and b", pk.keep)
	}
}

// testCandidate is a node of cpu CPUs, 64 GiB and, when slots is not 0,
// that many pod slots, holding pods of the given CPU requests and 128 MiB.
func testCandidate(name, cpu string, slots int, pods ...string) candidate {
	node := testutil.BuildTestNode(name, cpu, "64Gi")
	if slots > 0 {
		node.Status.Allocatable[v1.ResourcePods] = *resource.NewQuantity(int64(slots), resource.DecimalSI)
	}
	var ps []*v1.Pod
	for i, c := range pods {
		ps = append(ps, testutil.BuildTestPod(fmt.Sprintf("%s-%d", name, i), name, c, "128Mi"))
	}
	ni := framework.NewNodeInfo(ps...)
	ni.SetNode(node)
	return candidate{node: node, ni: ni}
}
