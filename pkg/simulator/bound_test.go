package simulator

import (
	"context"
	"fmt"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/rebalancer-dev/rebalancer/internal/testutil"
	"github.com/rebalancer-dev/rebalancer/pkg/snapshot"
	"github.com/rebalancer-dev/rebalancer/pkg/synthetic"
)

const gpuResource = v1.ResourceName("nvidia.com/gpu")

var gpuTaint = v1.Taint{Key: "nvidia.com/gpu", Effect: v1.TaintEffectNoSchedule}

// gpuNode is a node of 8 CPUs and 8 GPUs of model, tainted for GPU pods.
func gpuNode(name, model string) *v1.Node {
	return testutil.BuildTestNode(name, "8", "64Gi", testutil.WithTaints(gpuTaint), func(n *v1.Node) {
		n.Labels["gpu.model"] = model
		for _, l := range []v1.ResourceList{n.Status.Allocatable, n.Status.Capacity} {
			l[gpuResource] = resource.MustParse("8")
		}
	})
}

// gpuPod asks for cpu CPUs and one GPU of model, tolerating the taint.
func gpuPod(name, nodeName, cpu, model string) *v1.Pod {
	p := pod(name, nodeName, cpu)
	p.OwnerReferences = []metav1.OwnerReference{testutil.ControllerRef("ReplicaSet", "trainer", "rs")}
	p.Spec.NodeSelector = map[string]string{"gpu.model": model}
	p.Spec.Tolerations = []v1.Toleration{{Key: gpuTaint.Key, Operator: v1.TolerationOpExists}}
	p.Spec.Containers[0].Resources.Requests[gpuResource] = resource.MustParse("1")
	return p
}

func daemon(name, nodeName string) *v1.Pod {
	p := pod(name, nodeName, "1")
	p.OwnerReferences = []metav1.OwnerReference{testutil.ControllerRef("DaemonSet", "agent", "ds")}
	p.Spec.Tolerations = []v1.Toleration{{Operator: v1.TolerationOpExists}}
	return p
}

func classBound(t *testing.T, snap *snapshot.Snapshot) ClassBound {
	t.Helper()
	b, err := newSim(t, "binpacking-scheduler.yaml", snap).ClassBound()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestClassLowerBound: GPU pods of 6 CPUs select model a, whose nodes have
// 8 CPUs (7 past their DaemonSet pod): one such pod a node. Counted
// resource by resource, two 32-CPU nodes hold every pod's CPUs and one
// GPU node their GPUs; counted where they may go, the three GPU pods
// need three model-a nodes and the CPU pods a node of their own.
func TestClassLowerBound(t *testing.T) {
	snap := &snapshot.Snapshot{Nodes: []*v1.Node{
		node("cpu-0", "32"), node("cpu-1", "32"),
		gpuNode("a-0", "a"), gpuNode("a-1", "a"), gpuNode("a-2", "a"), gpuNode("b-0", "b"), gpuNode("b-1", "b"),
	}}
	for _, n := range snap.Nodes {
		snap.Pods = append(snap.Pods, daemon("ds-"+n.Name, n.Name))
	}
	snap.Pods = append(snap.Pods,
		gpuPod("train-0", "a-0", "6", "a"), gpuPod("train-1", "a-1", "6", "a"), gpuPod("train-2", "", "6", "a"),
		pod("web-0", "cpu-0", "4"), pod("web-1", "cpu-0", "4"), pod("web-2", "cpu-1", "4"), pod("web-3", "", "4"))
	b := classBound(t, snap)
	if b.PerResource != 2 {
		t.Errorf("LowerBound = %d, want 2 (34 CPUs of 31+31)", b.PerResource)
	}
	if b.Nodes != 4 || !b.Result.Solved {
		t.Errorf("ClassLowerBound = %+v, want 4: three model-a nodes, one CPU node", b)
	}
	// Classes: the CPU nodes, the a nodes and the b nodes (one class each,
	// whatever their hostnames); groups: the GPU pods, the CPU pods
	// (running or pending, wherever they run).
	if b.NodeClasses != 3 || b.PodGroups != 2 {
		t.Errorf("%d classes, %d groups, want 3 and 2", b.NodeClasses, b.PodGroups)
	}

	// A fourth GPU pod of model a: no fourth model-a node holds it.
	snap.Pods = append(snap.Pods, gpuPod("train-3", "", "6", "a"))
	if b := classBound(t, snap); b.Nodes != len(snap.Nodes) || !b.Result.Infeasible {
		t.Errorf("four one-a-node pods on three a nodes: %+v, want every node (%d)", b, len(snap.Nodes))
	}
	// Selecting by hostname does not narrow a pod's classes here (a lower
	// bound may only err low); its other requirements do.
	snap.Pods[len(snap.Pods)-1].Spec.NodeSelector = map[string]string{"gpu.model": "b", v1.LabelHostname: "a-0"}
	if b := classBound(t, snap); b.Nodes != 5 {
		t.Errorf("a model-b pod: %+v, want 5", b)
	}
	// A pod that does not tolerate the GPU taint stays off GPU nodes,
	// however it selects: it fits nowhere, and is left out.
	snap.Pods[len(snap.Pods)-1].Spec.Tolerations = nil
	if b := classBound(t, snap); b.Nodes != 4 || b.Result.Unplaceable != 1 {
		t.Errorf("a GPU pod that does not tolerate GPU nodes: %+v, want 4, one pod unplaceable", b)
	}
}

// TestClassLowerBoundStays: a pod may stay on the node it runs on, though
// its selector no longer selects it.
func TestClassLowerBoundStays(t *testing.T) {
	snap := &snapshot.Snapshot{}
	for _, name := range []string{"x", "y", "z"} {
		n := node(name, "4")
		n.Labels["pool"] = name
		snap.Nodes = append(snap.Nodes, n)
	}
	for i, on := range []string{"x", "", ""} {
		p := pod(fmt.Sprint("p", i), on, "2")
		p.Spec.NodeSelector = map[string]string{"pool": "y"}
		snap.Pods = append(snap.Pods, p)
	}
	// Pool y alone cannot hold the three pods; with x, where p0 runs, two
	// nodes do.
	if b := classBound(t, snap); b.Nodes != 2 || b.PodGroups != 2 {
		t.Errorf("%+v, want 2 nodes, 2 groups (p0, the others)", b)
	}
	snap.Pods[0].Spec.NodeName = ""
	if b := classBound(t, snap); b.Nodes != 3 || !b.Result.Infeasible {
		t.Errorf("p0 pending: %+v, want every node (3), no placement", b)
	}
}

// TestClassLowerBoundAffinity: required node affinity narrows classes as
// node selectors do; its terms are ORed; a term that only names a node
// selects everywhere.
func TestClassLowerBoundAffinity(t *testing.T) {
	snap := &snapshot.Snapshot{}
	for i := range 4 {
		n := node(fmt.Sprint("n", i), "4")
		n.Labels["zone"] = fmt.Sprint("z", i%2)
		snap.Nodes = append(snap.Nodes, n)
	}
	affinity := func(terms ...v1.NodeSelectorTerm) *v1.Affinity {
		return &v1.Affinity{NodeAffinity: &v1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &v1.NodeSelector{NodeSelectorTerms: terms}}}
	}
	zone := func(z ...string) v1.NodeSelectorTerm {
		return v1.NodeSelectorTerm{MatchExpressions: []v1.NodeSelectorRequirement{{Key: "zone", Operator: v1.NodeSelectorOpIn, Values: z}}}
	}
	host := v1.NodeSelectorTerm{MatchExpressions: []v1.NodeSelectorRequirement{{Key: v1.LabelHostname, Operator: v1.NodeSelectorOpIn, Values: []string{"n0"}}}}
	for _, tc := range []struct {
		name     string
		affinity *v1.Affinity
		want     int
	}{
		{"none", nil, 3}, // one 3-CPU pod a 4-CPU node
		// three such pods on the two z0 nodes: no placement, every node
		{"zone z0", affinity(zone("z0")), 4},
		{"zone z0 or z1", affinity(zone("z0"), zone("z1")), 3},
		{"zone z0 or a hostname", affinity(zone("z0"), host), 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := &snapshot.Snapshot{Nodes: snap.Nodes}
			for i := range 3 {
				p := pod(fmt.Sprint("p", i), "", "3")
				p.Spec.Affinity = tc.affinity
				s.Pods = append(s.Pods, p)
			}
			if b := classBound(t, s); b.Nodes != tc.want {
				t.Errorf("%+v, want %d", b, tc.want)
			}
		})
	}
}

// TestClassLowerBoundAsLowerBound: where nodes are alike and every pod may
// go anywhere, the bound is LowerBound's (the scenarios of
// TestLowerBoundTaints).
func TestClassLowerBoundAsLowerBound(t *testing.T) {
	dedicated := v1.Taint{Key: "dedicated", Value: "batch", Effect: v1.TaintEffectNoSchedule}
	tolerating := []v1.Toleration{{Key: "dedicated", Operator: v1.TolerationOpEqual, Value: "batch", Effect: v1.TaintEffectNoSchedule}}
	cluster := func(tolerations []v1.Toleration, cordoned int, taints ...v1.Taint) *snapshot.Snapshot {
		snap := &snapshot.Snapshot{}
		for i := range 4 {
			n := testutil.BuildTestNode(fmt.Sprint("n", i), "4", "8Gi", testutil.WithTaints(taints...))
			n.Spec.Unschedulable = i < cordoned
			snap.Nodes = append(snap.Nodes, n)
			p := pod(fmt.Sprint("p", i), n.Name, "2")
			p.UID = types.UID(fmt.Sprint("u", i))
			p.Spec.Tolerations = tolerations
			snap.Pods = append(snap.Pods, p)
		}
		return snap
	}
	for _, tc := range []struct {
		name string
		snap *snapshot.Snapshot
		want int
	}{
		{"no taints", cluster(nil, 0), 2},
		{"every node tainted, the taint tolerated", cluster(tolerating, 0, dedicated), 2},
		// LowerBound counts no node that no pod tolerates: every node.
		{"every node tainted, the taint not tolerated", cluster(nil, 0, dedicated), 4},
		{"PreferNoSchedule keeps no pod off", cluster(nil, 0, v1.Taint{Key: "soft", Effect: v1.TaintEffectPreferNoSchedule}), 2},
		{"three nodes cordoned: 8 CPUs of one 4-CPU node", cluster(nil, 3), 4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := classBound(t, tc.snap)
			if b.Nodes != tc.want || b.Nodes < b.PerResource {
				t.Errorf("%+v, want %d", b, tc.want)
			}
		})
	}
}

// TestClassLowerBoundDevices: DRA devices count as LowerBound counts them
// (the scenario of TestDevicesDecidePlacement: once the waiting pod is
// placed, two pods hold a GPU each, and each node has one).
func TestClassLowerBoundDevices(t *testing.T) {
	snap, err := snapshot.Load("../../test/testdata/dra-snapshot.yaml")
	if err != nil {
		t.Fatal(err)
	}
	s := newSim(t, "binpacking-scheduler.yaml", snap)
	for _, p := range s.Pending() {
		if p.Name == "waiting" {
			if b, why, err := s.Place(context.Background(), p); err != nil || b == nil {
				t.Fatalf("waiting not placed: %s %v", why, err)
			}
		}
	}
	b, err := s.ClassBound()
	if err != nil {
		t.Fatal(err)
	}
	if b.Nodes != 2 || b.Result.Nodes != 2 {
		t.Errorf("%+v, want 2 by devices", b)
	}
}

// BenchmarkClassLowerBound bounds a generated cluster of 5,000 nodes and
// 150,000 pods:
//
//	go test ./pkg/simulator -run '^$' -bench ClassLowerBound -benchtime 3x
func BenchmarkClassLowerBound(b *testing.B) {
	snap, err := synthetic.Generate(synthetic.Options{Nodes: 5000, Pods: 150000, Seed: 1})
	if err != nil {
		b.Fatal(err)
	}
	s := newSim(b, "binpacking-scheduler.yaml", snap)
	var res ClassBound
	for b.Loop() {
		if res, err = s.ClassBound(); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(res.Nodes), "nodes")
	b.ReportMetric(float64(res.PerResource), "per-resource")
	b.ReportMetric(float64(res.NodeClasses), "classes")
	b.ReportMetric(float64(res.PodGroups), "groups")
}
