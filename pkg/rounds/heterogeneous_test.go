package rounds

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/rebalancer-dev/rebalancer/internal/testutil"
	"github.com/rebalancer-dev/rebalancer/pkg/policy"
	"github.com/rebalancer-dev/rebalancer/pkg/requests"
	"github.com/rebalancer-dev/rebalancer/pkg/snapshot"
)

const gpu = v1.ResourceName("nvidia.com/gpu")

// packingPolicy is the policy the openb figures are measured with:
// HighNodeUtilization at 50 %, Consolidation at most 10 nodes a cycle, and
// untolerated taints, within the shipped policy's limits.
const packingPolicy = `apiVersion: descheduler/v1alpha2
kind: DeschedulerPolicy
maxNoOfPodsToEvictPerNode: 10
maxNoOfPodsToEvictPerNamespace: 100
maxNoOfPodsToEvictTotal: 500
profiles:
- name: packing
  pluginConfig:
  - name: DefaultEvictor
    args:
      nodeFit: true
  - name: Consolidation
    args:
      resources: [cpu, memory]
      maxNodesPerCycle: 10
  - name: HighNodeUtilization
    args:
      thresholds:
        cpu: 50
        memory: 50
  - name: RemovePodsViolatingNodeTaints
  plugins:
    balance:
      enabled: [Consolidation, HighNodeUtilization]
    deschedule:
      enabled: [RemovePodsViolatingNodeTaints]
`

// heterogeneous is a fleet of node classes as GPU clusters have them: GPU
// nodes with few CPUs (of two GPU models) beside CPU-only nodes with many;
// CPU pods that fit anywhere, GPU pods that fit only GPU nodes, a third of
// them only one model's. Every pod is its own ReplicaSet's, as in a trace.
// The pods are spread thin: each on a random node with room for it.
func heterogeneous(r *rand.Rand) *snapshot.Snapshot {
	snap := &snapshot.Snapshot{}
	models := []string{"A100", "T4"}
	// GPU nodes of several sizes, few CPUs a GPU; CPU-only nodes of many.
	gpuSizes := []struct {
		cpu, mem string
		gpus     int64
	}{{"8", "32Gi", 1}, {"16", "64Gi", 2}, {"32", "128Gi", 4}, {"96", "512Gi", 8}}
	cpuSizes := []struct{ cpu, mem string }{{"32", "128Gi"}, {"64", "256Gi"}, {"96", "384Gi"}}
	for i := range 6 + r.IntN(12) {
		size, model := gpuSizes[r.IntN(len(gpuSizes))], models[r.IntN(len(models))]
		snap.Nodes = append(snap.Nodes, testutil.BuildTestNode(fmt.Sprintf("gpu-%02d", i), size.cpu, size.mem, func(n *v1.Node) {
			n.Labels["gpu-model"] = model
			n.Status.Capacity[gpu] = *resource.NewQuantity(size.gpus, resource.DecimalSI)
			n.Status.Allocatable[gpu] = *resource.NewQuantity(size.gpus, resource.DecimalSI)
		}))
	}
	for i := range 4 + r.IntN(8) {
		size := cpuSizes[r.IntN(len(cpuSizes))]
		snap.Nodes = append(snap.Nodes, testutil.BuildTestNode(fmt.Sprintf("cpu-%02d", i), size.cpu, size.mem))
	}
	// As in a GPU cluster's trace, most nodes are empty, small GPU ones
	// among them: a profile that scores by requested share ranks them
	// above a large node in use.
	placeable := len(snap.Nodes)
	for i := range 3 * placeable {
		model := models[r.IntN(len(models))]
		snap.Nodes = append(snap.Nodes, testutil.BuildTestNode(fmt.Sprintf("spare-%02d", i), "8", "32Gi", func(n *v1.Node) {
			n.Labels["gpu-model"] = model
			n.Status.Capacity[gpu] = *resource.NewQuantity(1, resource.DecimalSI)
			n.Status.Allocatable[gpu] = *resource.NewQuantity(1, resource.DecimalSI)
		}))
	}
	free := map[string]v1.ResourceList{}
	for _, n := range snap.Nodes {
		free[n.Name] = n.Status.Allocatable.DeepCopy()
	}
	sched := testutil.WithScheduler("rebalancer-scheduler")
	for i := range 2 * placeable {
		name := fmt.Sprintf("pod-%03d", i)
		cpu, mem := int64(1+r.IntN(16))*500, int64(2+r.IntN(15))<<30
		gpus, model := int64(0), ""
		if r.IntN(2) == 0 {
			gpus, cpu = int64(1+r.IntN(2)), int64(2+r.IntN(5))*1000
			if r.IntN(3) == 0 {
				model = models[r.IntN(len(models))]
			}
		}
		pod := testutil.BuildTestPod(name, "", fmt.Sprintf("%dm", cpu), fmt.Sprint(mem), testutil.Running, sched, func(p *v1.Pod) {
			p.OwnerReferences = append(p.OwnerReferences, testutil.ControllerRef("ReplicaSet", name, types.UID("rs-"+name)))
			if gpus > 0 {
				p.Spec.Containers[0].Resources.Requests[gpu] = *resource.NewQuantity(gpus, resource.DecimalSI)
				p.Spec.Containers[0].Resources.Limits = v1.ResourceList{gpu: *resource.NewQuantity(gpus, resource.DecimalSI)}
			}
			if model != "" {
				p.Spec.NodeSelector = map[string]string{"gpu-model": model}
			}
		})
		var fits []*v1.Node
		for _, n := range snap.Nodes[:placeable] {
			if allowedOn(pod, n) && fitsIn(requests.Of(pod), free[n.Name]) {
				fits = append(fits, n)
			}
		}
		if len(fits) == 0 {
			continue
		}
		n := fits[r.IntN(len(fits))]
		pod.Spec.NodeName = n.Name
		take(requests.Of(pod), free[n.Name])
		snap.Pods = append(snap.Pods, pod)
	}
	return snap
}

func allowedOn(pod *v1.Pod, n *v1.Node) bool {
	for k, v := range pod.Spec.NodeSelector {
		if n.Labels[k] != v {
			return false
		}
	}
	return true
}

func fitsIn(req, free v1.ResourceList) bool {
	for r, q := range req {
		if f, ok := free[r]; (!ok && !q.IsZero()) || f.Cmp(q) < 0 {
			return false
		}
	}
	p := free[v1.ResourcePods]
	return p.Value() >= 1
}

func take(req, free v1.ResourceList) {
	for r, q := range req {
		f := free[r]
		f.Sub(q)
		free[r] = f
	}
	p := free[v1.ResourcePods]
	p.Set(p.Value() - 1)
	free[v1.ResourcePods] = p
}

// emptiable returns a node in use that could be emptied within the
// policy's limits (at most maxPerNode pods) into the room the other nodes
// in use have, each pod onto a node it is allowed on, the fullest that
// fits first, biggest pods first: a placement with a node fewer. "" when
// there is none.
func emptiable(state *snapshot.Snapshot, maxPerNode int) string {
	free := map[string]v1.ResourceList{}
	nodes := map[string]*v1.Node{}
	on := map[string][]*v1.Pod{}
	for _, n := range state.Nodes {
		free[n.Name], nodes[n.Name] = n.Status.Allocatable.DeepCopy(), n
	}
	for _, p := range state.Pods {
		if p.Spec.NodeName == "" {
			continue
		}
		take(requests.Of(p), free[p.Spec.NodeName])
		on[p.Spec.NodeName] = append(on[p.Spec.NodeName], p)
	}
	var inUse []string
	for _, n := range state.Nodes {
		if len(on[n.Name]) > 0 {
			inUse = append(inUse, n.Name)
		}
	}
	for _, src := range inUse {
		pods := slices.Clone(on[src])
		if len(pods) > maxPerNode {
			continue
		}
		requests.BiggestFirst(pods, requests.Of)
		room := map[string]v1.ResourceList{}
		for _, n := range inUse {
			room[n] = free[n].DeepCopy()
		}
		placed := 0
		for _, p := range pods {
			best := ""
			for _, n := range inUse {
				if n == src || !allowedOn(p, nodes[n]) || !fitsIn(requests.Of(p), room[n]) {
					continue
				}
				if a, b := room[n][v1.ResourceCPU], room[best][v1.ResourceCPU]; best == "" || a.Cmp(b) < 0 {
					best = n
				}
			}
			if best == "" {
				break
			}
			take(requests.Of(p), room[best])
			placed++
		}
		if placed == len(pods) {
			return src
		}
	}
	return ""
}

// TestPackingKeepsGoing: on random heterogeneous fleets (GPU and CPU node
// classes, GPU models, pods pinned to a model), rounds of the packing
// policy never add a node, make no ping-pong, and do not stop while a node
// in use could be emptied within the policy's limits into the others'
// room: once the rounds have been quiet for a cooldown, no such node is
// left.
func TestPackingKeepsGoing(t *testing.T) {
	file := filepath.Join(t.TempDir(), "policy.yaml")
	if err := os.WriteFile(file, []byte(packingPolicy), 0o600); err != nil {
		t.Fatal(err)
	}
	pol, err := policy.Load(file, fake.NewClientset(), policy.Registry())
	if err != nil {
		t.Fatal(err)
	}
	_, profs := loadPair(t, "binpacking")
	for seed := range uint64(16) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			snap := heterogeneous(rand.New(rand.NewPCG(seed, 7)))
			var last *snapshot.Snapshot
			testHookRound = func(_ int, state *snapshot.Snapshot) { last = state }
			defer func() { testHookRound = nil }()
			opts := options(Rebalancer, 12)
			res, err := runOn(testContext(t), pol, profs, snap, opts, planning)
			if err != nil {
				t.Fatal(err)
			}
			var inUse []int
			quiet := 0
			for i, r := range res.Rounds {
				inUse = append(inUse, r.NodesInUse)
				if r.PingPong != 0 {
					t.Errorf("round %d: %d ping-pong", i, r.PingPong)
				}
				if i > 0 && r.NodesInUse > res.Rounds[i-1].NodesInUse {
					t.Errorf("round %d: %d nodes in use, up from %d", i, r.NodesInUse, res.Rounds[i-1].NodesInUse)
				}
				if r.Unschedulable > 0 {
					t.Errorf("round %d: %d pods left without a node", i, r.Unschedulable)
				}
				if quiet++; r.Evictions > 0 {
					quiet = 0
				}
			}
			first := res.Rounds[0]
			t.Logf("%d nodes, %d pods: nodes in use by round %v, lower bound %d (by node class %d)", len(snap.Nodes), len(snap.Pods), inUse, first.LowerBound, first.ClassLowerBound)
			if quiet*int(opts.Interval) < int(opts.Cooldown) {
				t.Fatalf("still moving pods after %d rounds (quiet for the last %d): nodes in use by round %v", opts.Rounds, quiet, inUse)
			}
			if n := emptiable(last, 10); n != "" {
				t.Errorf("packing stopped at %d nodes in use while %s could be emptied into the others' room", res.Rounds[len(res.Rounds)-1].NodesInUse, n)
			}
			if end := res.Rounds[len(res.Rounds)-1].NodesInUse; end < first.ClassLowerBound {
				t.Errorf("%d nodes in use, below the lower bound by node class %d", end, first.ClassLowerBound)
			}
		})
	}
}
