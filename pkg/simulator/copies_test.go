package simulator

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/kubernetes/pkg/scheduler/apis/config"

	"github.com/rebalancer-dev/rebalancer/internal/testutil"
	schedprofile "github.com/rebalancer-dev/rebalancer/pkg/profile"
	"github.com/rebalancer-dev/rebalancer/pkg/snapshot"
)

// TestCountCopiesAsPlacedOneByOne: on random clusters (nodes of several
// sizes, pod slots, a GPU resource, taints, zones, running pods) and for
// random pods (node selectors, affinity, tolerations, zero requests),
// counting the copies node by node gives the number kube-scheduler's
// default profile binds one cycle at a time until one finds no node; for
// pods whose copies meet each other through host ports it counts nothing.
func TestCountCopiesAsPlacedOneByOne(t *testing.T) {
	cfg, err := schedprofile.Default()
	if err != nil {
		t.Fatal(err)
	}
	prof := &cfg.Profiles[0]
	_, ctx := testutil.Context(t)
	counted := 0
	for seed := range uint64(40) {
		r := rand.New(rand.NewPCG(seed, 3))
		snap := copiesCluster(r)
		s, err := New(ctx, []*config.KubeSchedulerProfile{prof}, snap)
		if err != nil {
			t.Fatal(err)
		}
		for k := range 4 {
			p := randomCopy(r, fmt.Sprintf("w%d-%d", seed, k))
			const max = 500
			got, ok, err := s.CountCopies(ctx, p, max)
			if err != nil {
				t.Fatal(err)
			}
			want := placeOneByOne(t, ctx, s, p, max)
			meets := len(p.Spec.Containers[0].Ports) > 0
			switch {
			case meets && ok:
				t.Errorf("seed %d, %s: counted %d copies of a pod whose copies meet in the filters", seed, p.Name, got)
			case !meets && !ok:
				t.Errorf("seed %d, %s: not counted", seed, p.Name)
			case ok && got != want:
				t.Errorf("seed %d, %s: counted %d copies, placed one by one %d", seed, p.Name, got, want)
			case ok:
				counted++
			}
		}
	}
	if counted < 60 {
		t.Errorf("only %d pods counted: the test shows little", counted)
	}
}

// placeOneByOne binds copies of p one scheduling cycle at a time, in a
// fork it reverts, until one finds no node or max are bound.
func placeOneByOne(t *testing.T, ctx context.Context, s *Simulator, p *v1.Pod, max int32) int32 {
	t.Helper()
	f := s.Fork()
	defer func() {
		if err := s.Revert(f); err != nil {
			t.Fatal(err)
		}
	}()
	random := rand.New(rand.NewPCG(1, 1))
	for i := range max {
		c := p.DeepCopy()
		c.Name = fmt.Sprintf("%s-%d", p.Name, i)
		c.UID = types.UID("copy-" + c.Name)
		bound, _, err := s.PlaceAsScheduled(ctx, c, random)
		if err != nil {
			t.Fatal(err)
		}
		if bound == nil {
			return i
		}
	}
	return max
}

func copiesCluster(r *rand.Rand) *snapshot.Snapshot {
	if r == nil {
		r = rand.New(rand.NewPCG(1, 1))
	}
	snap := &snapshot.Snapshot{}
	for i := range 6 + r.IntN(20) {
		cpu := []string{"4", "8", "16", "32"}[r.IntN(4)]
		n := testutil.BuildTestNode(fmt.Sprintf("node-%02d", i), cpu, []string{"16Gi", "64Gi"}[r.IntN(2)])
		n.Labels["zone"] = []string{"a", "b", "c"}[r.IntN(3)]
		slots := resource.MustParse(fmt.Sprint(4 + r.IntN(30)))
		n.Status.Allocatable[v1.ResourcePods], n.Status.Capacity[v1.ResourcePods] = slots, slots
		if r.IntN(3) == 0 {
			gpus := resource.MustParse(fmt.Sprint(1 + r.IntN(8)))
			n.Status.Allocatable["example.com/gpu"], n.Status.Capacity["example.com/gpu"] = gpus, gpus
		}
		if r.IntN(5) == 0 {
			n.Spec.Taints = []v1.Taint{{Key: "dedicated", Value: "batch", Effect: v1.TaintEffectNoSchedule}}
		}
		snap.Nodes = append(snap.Nodes, n)
		for j := range r.IntN(4) {
			snap.Pods = append(snap.Pods, testutil.BuildTestPod(fmt.Sprintf("run-%d-%d", i, j), n.Name,
				fmt.Sprintf("%dm", 250*(1+r.IntN(8))), fmt.Sprintf("%dMi", 512*(1+r.IntN(8))), testutil.Running))
		}
	}
	return snap
}

func randomCopy(r *rand.Rand, name string) *v1.Pod {
	cpu, mem := fmt.Sprintf("%dm", 100*r.IntN(20)), fmt.Sprintf("%dMi", 256*r.IntN(16))
	p := testutil.BuildTestPod(name, "", cpu, mem, func(p *v1.Pod) { p.Status.Phase = v1.PodPending })
	p.Labels = map[string]string{"app": name}
	if r.IntN(4) == 0 {
		p.Spec.Containers[0].Resources.Requests["example.com/gpu"] = resource.MustParse(fmt.Sprint(1 + r.IntN(2)))
	}
	if r.IntN(3) == 0 {
		p.Spec.NodeSelector = map[string]string{"zone": []string{"a", "b"}[r.IntN(2)]}
	}
	if r.IntN(3) == 0 {
		p.Spec.Tolerations = []v1.Toleration{{Key: "dedicated", Operator: v1.TolerationOpExists}}
	}
	switch r.IntN(8) {
	case 0:
		p.Spec.Affinity = &v1.Affinity{PodAntiAffinity: &v1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []v1.PodAffinityTerm{{
			LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": name}}, TopologyKey: "kubernetes.io/hostname"}}}}
	case 1:
		p.Spec.TopologySpreadConstraints = []v1.TopologySpreadConstraint{{MaxSkew: 1, TopologyKey: "zone",
			WhenUnsatisfiable: v1.DoNotSchedule, LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": name}}}}
	case 2:
		p.Spec.Containers[0].Ports = []v1.ContainerPort{{ContainerPort: 80, HostPort: 8080}}
	}
	return p
}
