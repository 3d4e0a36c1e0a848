package simulator

import (
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/klog/v2/ktesting"
	"k8s.io/kubernetes/cmd/kube-scheduler/app/options"
	"k8s.io/kubernetes/pkg/scheduler/apis/config"
	"k8s.io/kubernetes/pkg/scheduler/apis/config/latest"

	"github.com/rebalancer-dev/rebalancer/internal/testutil"
	"github.com/rebalancer-dev/rebalancer/pkg/snapshot"
)

// TestNodeClassesAreTheFrameworksAnswer is the differential test of node
// classes: on random clusters of many alike nodes, with random pods of
// every kind (plain, selecting a pool, preferring a zone, tolerating,
// naming a node, with host ports, anti-affinity, spread constraints, no
// requests, images present on some nodes) and drained nodes, every cycle
// by class gives exactly what the framework gives on every node: the same
// feasible nodes in the same order, the same per-plugin and total scores,
// the same diagnosis, and the same predictions for bound pods, also after
// placements change the nodes. Profiles: kube-scheduler's default
// (LeastAllocated, balanced allocation, image locality, taints, affinity,
// spread), the shipped MostAllocated with RebalanceHint and
// RequestedToCapacityRatio ones, a hint-less packing one, LoadAware, and
// one whose added affinity names nodes (never by class).
func TestNodeClassesAreTheFrameworksAnswer(t *testing.T) {
	logger, _ := ktesting.NewTestContext(t)
	load := func(path string) *config.KubeSchedulerProfile {
		cfg, err := options.LoadConfigFromFile(logger, path)
		if err != nil {
			t.Fatal(err)
		}
		return &cfg.Profiles[0]
	}
	def, err := latest.Default()
	if err != nil {
		t.Fatal(err)
	}
	namesNodes := filepath.Join(t.TempDir(), "names-nodes.yaml")
	if err := os.WriteFile(namesNodes, []byte(`apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
profiles:
- schedulerName: default-scheduler
  pluginConfig:
  - name: NodeAffinity
    args:
      addedAffinity:
        requiredDuringSchedulingIgnoredDuringExecution:
          nodeSelectorTerms:
          - matchExpressions:
            - {key: kubernetes.io/hostname, operator: NotIn, values: [n-003]}
  - name: NodeResourcesFit
    args:
      scoringStrategy: {type: MostAllocated}
`), 0o600); err != nil {
		t.Fatal(err)
	}
	profiles := []struct {
		name    string
		prof    *config.KubeSchedulerProfile
		byClass bool // some cycles go by class
	}{
		{"kube-scheduler default", &def.Profiles[0], true},
		{"binpacking", profile(t, "binpacking-scheduler.yaml"), true},
		{"balancing", profile(t, "balancing-scheduler.yaml"), true},
		{"hint-less packing", load(filepath.Join("..", "..", "test", "testdata", "unsteered-packing-scheduler.yaml")), true},
		{"load-aware", profile(t, "load-aware-scheduler.yaml"), false},
		{"added affinity names nodes", load(namesNodes), false},
	}
	for _, p := range profiles {
		t.Run(p.name, func(t *testing.T) {
			_, ctx := ktesting.NewTestContext(t)
			ctx, cancel := context.WithCancel(ctx)
			defer cancel()
			byClass, classHits := 0, 0
			for seed := range uint64(4) {
				random := rand.New(rand.NewPCG(seed, 7))
				snap := alikeCluster(random, p.prof.SchedulerName, seed&1 != 0, seed&2 != 0)
				byNode, a, every, b := againstEveryNode(t, ctx, p.prof, snap)
				a.run.pluginScores = true
				for round := range 3 {
					var drained sets.Set[string]
					if round == 1 {
						drained = sets.New(snap.Nodes[0].Name, snap.Nodes[5].Name, snap.Nodes[6].Name)
					}
					for i := range 25 {
						pod := randomPod(random, fmt.Sprintf("new-%d-%d-%d", seed, round, i), p.prof.SchedulerName)
						before := byNode.byClassCycles
						sameCycle(t, ctx, byNode, a, every, b, pod, drained)
						if byNode.byClassCycles > before && !alikeToPod(pod) {
							t.Fatalf("pod %s (%s) went by class", pod.Name, pod.Labels["kind"])
						}
					}
					samePredictions(t, ctx, byNode, every, byNode.Bound()[:10], PredictOptions{LeaveSource: round == 2, Drained: drained})
					// Change the nodes: the same placements in both.
					for i := range 15 {
						samePlacement(t, ctx, byNode, every, randomPod(random, fmt.Sprintf("placed-%d-%d-%d", seed, round, i), p.prof.SchedulerName))
					}
				}
				byClass += byNode.byClassCycles
				classHits += a.run.passes.hits
				if every.byClassCycles != 0 {
					t.Fatalf("WithEveryNode scored %d cycles by class", every.byClassCycles)
				}
			}
			t.Logf("%d cycles by class, %d answers by class", byClass, classHits)
			if p.byClass != (byClass > 0) {
				t.Errorf("%d cycles by class, want some: %v", byClass, p.byClass)
			}
			// Placements bring nodes into classes seen before: their
			// answers must come from the class memo, and be the same.
			if p.byClass && classHits == 0 {
				t.Error("no answer came from a node's class")
			}
		})
	}
}

// cycleDiff says how two cycles differ, "" when they do not.
func cycleDiff(got, want cycle) string {
	got.list()
	want.list()
	switch {
	case got.considered != want.considered || got.feasible != want.feasible:
		return fmt.Sprintf("considered %d, feasible %d; want %d, %d", got.considered, got.feasible, want.considered, want.feasible)
	case got.diagnosis != want.diagnosis:
		return fmt.Sprintf("diagnosis %q, want %q", got.diagnosis, want.diagnosis)
	case len(got.scores) != len(want.scores):
		return fmt.Sprintf("%d scored nodes, want %d", len(got.scores), len(want.scores))
	}
	for i := range got.scores {
		g, w := got.scores[i], want.scores[i]
		if g.Scores == nil { // the runner keeps totals alone (pluginScores)
			w.Scores = nil
		}
		if !reflect.DeepEqual(g, w) {
			return fmt.Sprintf("node %d: %+v, want %+v", i, got.scores[i], want.scores[i])
		}
	}
	return ""
}

// alikeCluster is 60 nodes of three shapes in two pools and three zones,
// some tainted, one cordoned, some holding images, about a third running
// pods; preferred and required give some bound pods such anti-affinity,
// which other pods' cycles must then see, among them on nodes otherwise
// alike.
func alikeCluster(random *rand.Rand, scheduler string, preferred, required bool) *snapshot.Snapshot {
	snap := &snapshot.Snapshot{}
	shapes := []struct{ cpu, mem string }{{"4", "16Gi"}, {"8", "32Gi"}, {"16", "64Gi"}}
	for i := range 60 {
		name := fmt.Sprintf("n-%03d", i)
		shape := shapes[i%3]
		rl := v1.ResourceList{v1.ResourceCPU: resource.MustParse(shape.cpu), v1.ResourceMemory: resource.MustParse(shape.mem), v1.ResourcePods: resource.MustParse("20")}
		n := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{
			v1.LabelHostname: name, "pool": []string{"a", "b"}[i/30], v1.LabelTopologyZone: fmt.Sprintf("z%d", i%3+i/20%2),
		}}, Status: v1.NodeStatus{Capacity: rl, Allocatable: rl}}
		switch i % 10 {
		case 7:
			n.Spec.Taints = []v1.Taint{{Key: "spot", Value: "true", Effect: v1.TaintEffectPreferNoSchedule}}
		case 8:
			n.Spec.Taints = []v1.Taint{{Key: "gpu", Effect: v1.TaintEffectNoSchedule}}
		}
		if i == 13 {
			n.Spec.Unschedulable = true
		}
		if i%4 == 1 {
			n.Status.Images = []v1.ContainerImage{{Names: []string{"registry.example.com/big:v1"}, SizeBytes: 900 << 20}}
		}
		snap.Nodes = append(snap.Nodes, n)
	}
	for i := range 40 {
		node := snap.Nodes[random.IntN(20)*3%60]
		p := plainPod(fmt.Sprintf("bound-%d", i), scheduler, []string{"250m", "500m", "1"}[random.IntN(3)], "1Gi")
		p.Spec.NodeName = node.Name
		p.Status.Phase = v1.PodRunning
		term := v1.PodAffinityTerm{TopologyKey: v1.LabelHostname, LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"kind": "plain"}}}
		switch {
		case required && i%16 == 0:
			p.Spec.Affinity = &v1.Affinity{PodAntiAffinity: &v1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []v1.PodAffinityTerm{term}}}
		case preferred && i%16 == 8:
			p.Spec.Affinity = &v1.Affinity{PodAntiAffinity: &v1.PodAntiAffinity{PreferredDuringSchedulingIgnoredDuringExecution: []v1.WeightedPodAffinityTerm{{Weight: 10, PodAffinityTerm: term}}}}
		}
		snap.Pods = append(snap.Pods, p)
	}
	if preferred || required {
		// Twins: nodes alike in everything but one pod's anti-affinity
		// (n-004 and n-010 preferred, n-016 and n-019 required).
		for i, on := range []string{"n-004", "n-010", "n-016", "n-019"} {
			p := plainPod("twin-"+on, scheduler, "500m", "1Gi")
			p.Spec.NodeName, p.Status.Phase = on, v1.PodRunning
			term := v1.PodAffinityTerm{TopologyKey: v1.LabelHostname, LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"kind": "plain"}}}
			switch {
			case i == 0 && preferred:
				p.Spec.Affinity = &v1.Affinity{PodAntiAffinity: &v1.PodAntiAffinity{PreferredDuringSchedulingIgnoredDuringExecution: []v1.WeightedPodAffinityTerm{{Weight: 50, PodAffinityTerm: term}}}}
			case i == 2 && required:
				p.Spec.Affinity = &v1.Affinity{PodAntiAffinity: &v1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []v1.PodAffinityTerm{term}}}
			}
			snap.Pods = append(snap.Pods, p)
		}
	}
	return snap
}

func plainPod(name, scheduler, cpu, mem string) *v1.Pod {
	return testutil.BuildTestPod(name, "", cpu, mem, testutil.WithLabels(map[string]string{"kind": "plain"}), testutil.WithScheduler(scheduler),
		func(p *v1.Pod) { p.Spec.Containers[0].Image = "registry.example.com/app:v1" })
}

// randomPod is a new pod of a random kind, labelled with it.
func randomPod(random *rand.Rand, name, scheduler string) *v1.Pod {
	p := plainPod(name, scheduler, []string{"100m", "500m", "1500m", "3", "7"}[random.IntN(5)], []string{"256Mi", "2Gi", "12Gi"}[random.IntN(3)])
	kind := []string{"plain", "plain", "pool", "zone", "tolerates", "names-node", "host-port", "anti-affinity", "spread", "best-effort", "image"}[random.IntN(11)]
	p.Labels["kind"] = kind
	switch kind {
	case "pool":
		p.Spec.NodeSelector = map[string]string{"pool": "b"}
	case "zone":
		p.Spec.Affinity = &v1.Affinity{NodeAffinity: &v1.NodeAffinity{PreferredDuringSchedulingIgnoredDuringExecution: []v1.PreferredSchedulingTerm{{
			Weight: 20, Preference: v1.NodeSelectorTerm{MatchExpressions: []v1.NodeSelectorRequirement{{Key: v1.LabelTopologyZone, Operator: v1.NodeSelectorOpIn, Values: []string{"z1"}}}},
		}}}}
	case "tolerates":
		p.Spec.Tolerations = []v1.Toleration{{Key: "gpu", Operator: v1.TolerationOpExists}, {Key: "spot", Operator: v1.TolerationOpExists}}
	case "names-node":
		p.Spec.NodeSelector = map[string]string{v1.LabelHostname: fmt.Sprintf("n-%03d", random.IntN(60))}
	case "host-port":
		p.Spec.Containers[0].Ports = []v1.ContainerPort{{ContainerPort: 80, HostPort: 8080}}
	case "anti-affinity":
		p.Spec.Affinity = &v1.Affinity{PodAntiAffinity: &v1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []v1.PodAffinityTerm{{
			TopologyKey: v1.LabelHostname, LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"kind": "plain"}},
		}}}}
	case "spread":
		p.Spec.TopologySpreadConstraints = []v1.TopologySpreadConstraint{{MaxSkew: 1, TopologyKey: v1.LabelTopologyZone, WhenUnsatisfiable: v1.ScheduleAnyway,
			LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"kind": "plain"}}}}
	case "best-effort":
		p.Spec.Containers[0].Resources = v1.ResourceRequirements{}
	case "image":
		p.Spec.Containers[0].Image = "registry.example.com/big:v1"
	}
	return p
}

// TestClassesKeptAsNodesChange: the classes the simulation keeps from
// cycle to cycle (classCache), changed node by node as pods are placed and
// evicted, or all forgotten after many changes at once, group the nodes
// exactly as grouping them afresh does, each class's nodes in list order
// and its first node first.
func TestClassesKeptAsNodesChange(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	def, err := latest.Default()
	if err != nil {
		t.Fatal(err)
	}
	prof := &def.Profiles[0]
	random := rand.New(rand.NewPCG(3, 9))
	s, err := New(ctx, []*config.KubeSchedulerProfile{prof}, alikeCluster(random, prof.SchedulerName, false, false))
	if err != nil {
		t.Fatal(err)
	}
	check := func(when string) {
		t.Helper()
		all, err := s.snapshot.NodeInfos().List()
		if err != nil {
			t.Fatal(err)
		}
		cc := &s.nodeClasses
		cc.ready(s, all)
		fresh := &classCache{}
		fresh.ready(s, all)
		group := func(cc *classCache) map[string]bool {
			t.Helper()
			groups := map[string]bool{}
			for k, id := range cc.live {
				m := cc.liveMembers[k]
				if len(m) == 0 || !slices.IsSorted(m) || cc.liveFirst[k] != m[0] || cc.livePlace[id] != k {
					t.Fatalf("%s: class %d at %d: nodes %v, first %d, kept at %d", when, id, k, m, cc.liveFirst[k], cc.livePlace[id])
				}
				for _, i := range m {
					if cc.at[i] != id {
						t.Fatalf("%s: node %d is in class %d, but its class is %d", when, i, id, cc.at[i])
					}
				}
				groups[fmt.Sprint(m)] = true
			}
			return groups
		}
		if kept, afresh := group(cc), group(fresh); !maps.Equal(kept, afresh) {
			t.Fatalf("%s: kept classes %v, afresh %v", when, slices.Sorted(maps.Keys(kept)), slices.Sorted(maps.Keys(afresh)))
		}
	}
	check("at first")
	var bound []*v1.Pod
	for step := range 300 {
		if len(bound) > 0 && random.IntN(3) == 0 {
			i := random.IntN(len(bound))
			if err := s.Evict(bound[i]); err != nil {
				t.Fatal(err)
			}
			bound = slices.Delete(bound, i, i+1)
		} else {
			b, _, err := s.Place(ctx, plainPod(fmt.Sprintf("p-%d", step), prof.SchedulerName, []string{"100m", "500m", "1"}[random.IntN(3)], "256Mi"))
			if err != nil {
				t.Fatal(err)
			}
			if b != nil {
				bound = append(bound, b)
			}
		}
		check(fmt.Sprintf("after step %d", step))
	}
	// More than a quarter of the nodes at once: every class is forgotten.
	for _, b := range bound[:min(len(bound), 40)] {
		if err := s.Evict(b); err != nil {
			t.Fatal(err)
		}
	}
	if !s.nodeClasses.forget && s.nodeClasses.at != nil {
		t.Fatal("40 evictions did not forget the classes: the test shows nothing of it")
	}
	check("after 40 evictions")
}
