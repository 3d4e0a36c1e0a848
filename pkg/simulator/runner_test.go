package simulator

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/klog/v2/ktesting"
	"k8s.io/kubernetes/cmd/kube-scheduler/app/options"
	"k8s.io/kubernetes/pkg/scheduler/apis/config"
	"k8s.io/kubernetes/pkg/scheduler/apis/config/latest"

	"github.com/rebalancer-dev/rebalancer/internal/testutil"
	"github.com/rebalancer-dev/rebalancer/pkg/hint"
	"github.com/rebalancer-dev/rebalancer/pkg/snapshot"
)

const gpu = v1.ResourceName("nvidia.com/gpu")

// TestRunnerIsTheFrameworksAnswer is the differential test of the runner:
// node classes off, so that every cycle filters and scores every node
// through it, each cycle must give exactly what the framework's own
// RunFilterPlugins and RunScorePlugins give (WithEveryNode): the same
// feasible nodes in order, per-plugin and total scores, diagnosis, and the
// same predictions and placements as the nodes change. Clusters of unlike
// nodes (five sizes, GPUs on some, pools, zones, taints, a cordoned node,
// images) and pods of every kind, GPU pods and hinted replacements among
// them (RebalanceHint's Filter and Score at work), under kube-scheduler's
// default profile (LeastAllocated, balanced allocation), the shipped
// MostAllocated and RequestedToCapacityRatio pairs, a hint-less packing
// profile and LoadAware.
func TestRunnerIsTheFrameworksAnswer(t *testing.T) {
	def, err := latest.Default()
	if err != nil {
		t.Fatal(err)
	}
	profiles := []struct {
		name string
		prof *config.KubeSchedulerProfile
	}{
		{"kube-scheduler default", &def.Profiles[0]},
		{"binpacking", profile(t, "binpacking-scheduler.yaml")},
		{"balancing", profile(t, "balancing-scheduler.yaml")},
		{"hint-less packing", unsteeredPacking(t)},
		{"load-aware", profile(t, "load-aware-scheduler.yaml")},
	}
	for _, p := range profiles {
		t.Run(p.name, func(t *testing.T) {
			_, ctx := ktesting.NewTestContext(t)
			scored := 0
			for seed := range uint64(3) {
				random := rand.New(rand.NewPCG(seed, 11))
				snap := unlikeCluster(random, p.prof.SchedulerName)
				fast, a, every, b := againstEveryNode(t, ctx, p.prof, snap)
				if a.run == nil || b.run != nil {
					t.Fatal("the runner is not where it should be")
				}
				a.classes = false
				// Per-plugin scores compared on two seeds; the third runs as
				// rebalancer does, with totals alone.
				a.run.pluginScores = seed != 2
				// Hints for a third of the owners: their replacements are
				// scored by RebalanceHint, and its promises turn its Filter on.
				var replacements []*v1.Pod
				for i, pod := range fast.Bound() {
					if i%3 != 0 || NodeBound(pod) {
						continue
					}
					leaving := pod.DeepCopy()
					leaving.Annotations = hint.Hint{Source: pod.Spec.NodeName, Target: snap.Nodes[random.IntN(len(snap.Nodes))].Name, PlanID: "p", Time: time.Now()}.Annotations()
					fast.Leaving(leaving)
					every.Leaving(leaving.DeepCopy())
					replacements = append(replacements, NewReplacement(pod, pod.Name+"-new", pod.UID+"-new", time.Time{}))
				}
				for round := range 3 {
					var drained sets.Set[string]
					if round == 1 {
						drained = sets.New(snap.Nodes[1].Name, snap.Nodes[4].Name)
					}
					pods := replacements
					for i := range 30 {
						pods = append(pods, unlikePod(random, fmt.Sprintf("new-%d-%d-%d", seed, round, i), p.prof.SchedulerName))
					}
					for _, pod := range pods {
						got := sameCycle(t, ctx, fast, a, every, b, pod, drained)
						if got.fit() > 1 {
							scored++
						}
					}
					samePredictions(t, ctx, fast, every, fast.Bound()[:15], PredictOptions{LeaveSource: round == 2, Drained: drained})
					for i := range 20 {
						samePlacement(t, ctx, fast, every, unlikePod(random, fmt.Sprintf("placed-%d-%d-%d", seed, round, i), p.prof.SchedulerName))
					}
				}
			}
			if scored == 0 {
				t.Fatal("no cycle scored more than one node: the test shows nothing")
			}
		})
	}
}

// TestRunnerStopsWithItsContext: a cycle whose context ends is an error,
// never "no node fits".
func TestRunnerStopsWithItsContext(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	prof := profile(t, "binpacking-scheduler.yaml")
	snap := unlikeCluster(rand.New(rand.NewPCG(1, 1)), prof.SchedulerName)
	s, err := New(ctx, []*config.KubeSchedulerProfile{prof}, snap)
	if err != nil {
		t.Fatal(err)
	}
	sc := s.schedulers[prof.SchedulerName]
	sc.classes = false
	done, cancel := context.WithCancel(ctx)
	cancel()
	c, err := s.schedule(done, sc, plainPod("late", prof.SchedulerName, "100m", "100Mi"), nil, nil)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("cycle with an ended context: %d nodes scored, %q, error %v; want context.Canceled", len(c.scores), c.diagnosis, err)
	}
}

// unlikeCluster is 80 nodes of five sizes, no two alike once pods run on
// them: a quarter with GPUs, two pools, three zones, some tainted, one
// cordoned, some holding an image; about three pods a node, some asking
// for GPUs, every three sharing a ReplicaSet.
func unlikeCluster(random *rand.Rand, scheduler string) *snapshot.Snapshot {
	snap := alikeCluster(random, scheduler, false, false)
	snap.Pods = nil
	for len(snap.Nodes) < 80 {
		n := snap.Nodes[len(snap.Nodes)%60].DeepCopy()
		n.Name = fmt.Sprintf("n-%03d", len(snap.Nodes))
		n.Labels[v1.LabelHostname] = n.Name
		snap.Nodes = append(snap.Nodes, n)
	}
	for i, n := range snap.Nodes {
		cpu := []int64{2, 4, 8, 16, 32}[random.IntN(5)]
		rl := v1.ResourceList{
			v1.ResourceCPU:    *resource.NewQuantity(cpu, resource.DecimalSI),
			v1.ResourceMemory: *resource.NewQuantity(cpu*(2+random.Int64N(6))<<30, resource.BinarySI),
			v1.ResourcePods:   resource.MustParse("20"),
		}
		if i%4 == 2 {
			rl[gpu] = *resource.NewQuantity(int64(4+4*random.IntN(2)), resource.DecimalSI)
		}
		n.Status.Capacity, n.Status.Allocatable = rl, rl
	}
	for i := range 240 {
		p := unlikePod(random, fmt.Sprintf("bound-%d", i), scheduler)
		p.Spec.NodeName = snap.Nodes[random.IntN(len(snap.Nodes))].Name
		p.Status.Phase = v1.PodRunning
		rs := fmt.Sprintf("rs%d", i/3)
		p.OwnerReferences = []metav1.OwnerReference{testutil.ControllerRef("ReplicaSet", rs, types.UID(rs))}
		snap.Pods = append(snap.Pods, p)
	}
	return snap
}

// unlikePod is randomPod, or a pod asking for GPUs, with an init
// container or a sidecar asking for more than its containers, with
// overhead, or with a second container that asks for nothing (which
// scores count as a default request).
func unlikePod(random *rand.Rand, name, scheduler string) *v1.Pod {
	p := randomPod(random, name, scheduler)
	init := v1.Container{Name: "init", Image: "registry.example.com/init:v1", Resources: v1.ResourceRequirements{Requests: v1.ResourceList{
		v1.ResourceCPU: resource.MustParse("4"), v1.ResourceMemory: resource.MustParse("1Gi"),
	}}}
	switch random.IntN(12) {
	case 0:
		p.Labels["kind"] = "init"
		p.Spec.InitContainers = []v1.Container{init}
	case 1:
		p.Labels["kind"] = "sidecar"
		init.RestartPolicy = ptrTo(v1.ContainerRestartPolicyAlways)
		p.Spec.InitContainers = []v1.Container{init}
	case 2:
		p.Labels["kind"] = "overhead"
		p.Spec.Overhead = v1.ResourceList{v1.ResourceCPU: resource.MustParse("1500m"), v1.ResourceMemory: resource.MustParse("2Gi")}
	case 3:
		p.Labels["kind"] = "two-containers"
		p.Spec.Containers = append(p.Spec.Containers, v1.Container{Name: "idle", Image: "registry.example.com/idle:v1"})
	}
	if random.IntN(6) == 0 {
		p.Labels["kind"] = "gpu"
		n := *resource.NewQuantity(int64(1+random.IntN(4)), resource.DecimalSI)
		if p.Spec.Containers[0].Resources.Requests == nil {
			p.Spec.Containers[0].Resources.Requests = v1.ResourceList{}
		}
		p.Spec.Containers[0].Resources.Requests[gpu] = n
		p.Spec.Containers[0].Resources.Limits = v1.ResourceList{gpu: n}
	}
	return p
}

// unsteeredPacking is the hint-less MostAllocated profile of the tests.
func unsteeredPacking(t *testing.T) *config.KubeSchedulerProfile {
	logger, _ := ktesting.NewTestContext(t)
	cfg, err := options.LoadConfigFromFile(logger, filepath.Join("..", "..", "test", "testdata", "unsteered-packing-scheduler.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	return &cfg.Profiles[0]
}

// TestMemosStayBounded: however many pod shapes a plan asks about, the
// runner's memos together hold at most memoSlots places, the least
// recently used dropped first.
func TestMemosStayBounded(t *testing.T) {
	const nodes = 50_000
	r := &runner{memos: memos{byKey: map[memoKey]*memo{}}}
	r.keys = memoKeys(&config.KubeSchedulerProfile{}, nil, draBacked(nil), r.once)
	var first *memo
	for i := range 100 {
		r.memos.cycle++
		p := plainPod(fmt.Sprint(i), "", "100m", "100Mi")
		p.Spec.NodeName = fmt.Sprintf("n-%d", i) // a key of its own
		m := r.memo("NodeName", "filter", p, nodes)
		if m == nil {
			t.Fatal("NodeName's verdicts are not remembered")
		}
		if i == 0 {
			first = m
		}
		total := 0
		for _, m := range r.memos.byKey {
			total += len(m.gen)
		}
		if total > memoSlots {
			t.Fatalf("after %d keys the memos hold %d places, more than %d", i+1, total, memoSlots)
		}
	}
	for _, m := range r.memos.byKey {
		if m == first {
			t.Fatal("the least recently used memo was kept")
		}
	}
	if len(r.memos.byKey) != memoSlots/nodes {
		t.Fatalf("%d memos kept, want %d", len(r.memos.byKey), memoSlots/nodes)
	}
}

// samePredictions fails t unless a and b predict the same for every pod.
func samePredictions(t *testing.T, ctx context.Context, a, b *Simulator, pods []*v1.Pod, opts PredictOptions) {
	t.Helper()
	for _, pod := range pods {
		got, err := a.Predict(ctx, pod, opts)
		if err != nil {
			t.Fatal(err)
		}
		want, err := b.Predict(ctx, pod, opts)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("prediction for %s: %+v, want %+v", pod.Name, got, want)
		}
	}
}

// samePlacement places pod in a and a copy in b, and fails t unless both
// land on the same node (or neither lands).
func samePlacement(t *testing.T, ctx context.Context, a, b *Simulator, pod *v1.Pod) {
	t.Helper()
	x, _, err := a.Place(ctx, pod)
	if err != nil {
		t.Fatal(err)
	}
	y, _, err := b.Place(ctx, pod.DeepCopy())
	if err != nil {
		t.Fatal(err)
	}
	if (x == nil) != (y == nil) || x != nil && x.Spec.NodeName != y.Spec.NodeName {
		t.Fatalf("placed %s on %v, want %v", pod.Name, x, y)
	}
}

// sameCycle schedules pod with a's scheduler sa and b's sb, and fails t
// unless both cycles give the same answer (cycleDiff); it returns a's.
func sameCycle(t *testing.T, ctx context.Context, a *Simulator, sa *scheduler, b *Simulator, sb *scheduler, pod *v1.Pod, drained sets.Set[string]) cycle {
	t.Helper()
	got, err := a.schedule(ctx, sa, pod, nil, drained)
	if err != nil {
		t.Fatal(err)
	}
	want, err := b.schedule(ctx, sb, pod, nil, drained)
	if err != nil {
		t.Fatal(err)
	}
	// A cycle by class chooses without listing every node's scores.
	if got.fit() > 0 {
		node, ties, score := got.choose(nil)
		wantNode, wantTies, wantScore := choose(want.list(), nil)
		if node != wantNode || ties != wantTies || score != wantScore {
			t.Fatalf("pod %s (%s): chose %s (%d ties at %d), want %s (%d at %d)", pod.Name, pod.Labels["kind"], node, ties, score, wantNode, wantTies, wantScore)
		}
	}
	if diff := cycleDiff(got, want); diff != "" {
		t.Fatalf("pod %s (%s): %s", pod.Name, pod.Labels["kind"], diff)
	}
	return got
}

// againstEveryNode builds two simulations of snap with prof: one as
// rebalancer runs (node classes, the runner) and one WithEveryNode (the
// framework's own runners on every node), with prof's scheduler in each.
func againstEveryNode(t *testing.T, ctx context.Context, prof *config.KubeSchedulerProfile, snap *snapshot.Snapshot) (*Simulator, *scheduler, *Simulator, *scheduler) {
	t.Helper()
	fast, err := New(ctx, []*config.KubeSchedulerProfile{prof}, snap)
	if err != nil {
		t.Fatal(err)
	}
	every, err := New(ctx, []*config.KubeSchedulerProfile{prof}, snap, WithEveryNode())
	if err != nil {
		t.Fatal(err)
	}
	return fast, fast.schedulers[prof.SchedulerName], every, every.schedulers[prof.SchedulerName]
}

// TestResourcesKeyLeavesDRABackedResources: a pod asking for an extended
// resource has a resources key (its verdicts are remembered) unless a
// device class backs that resource, by name or under the device-class
// prefix; native resources always have one.
func TestResourcesKeyLeavesDRABackedResources(t *testing.T) {
	pod := func(r v1.ResourceName) *v1.Pod {
		p := plainPod("p", "", "1", "1Gi")
		if r != "" {
			p.Spec.Containers[0].Resources.Requests[r] = resource.MustParse("1")
		}
		return p
	}
	classes := []*resourceapi.DeviceClass{
		{ObjectMeta: metav1.ObjectMeta{Name: "gpu.example.com"}, Spec: resourceapi.DeviceClassSpec{ExtendedResourceName: ptrTo("example.com/gpu")}},
		{ObjectMeta: metav1.ObjectMeta{Name: "fpga.example.com"}},
	}
	for _, tc := range []struct {
		resource v1.ResourceName
		classes  []*resourceapi.DeviceClass
		want     bool
	}{
		{"", classes, true},
		{v1.ResourceEphemeralStorage, classes, true},
		{gpu, nil, true},
		{gpu, classes, true}, // no class names nvidia.com/gpu
		{"example.com/gpu", classes, false},
		{"example.com/gpu", nil, true},
		{v1.ResourceName(resourceapi.ResourceDeviceClassPrefix + "fpga.example.com"), classes, false},
	} {
		_, ok := resourcesKey(draBacked(tc.classes))(pod(tc.resource))
		if ok != tc.want {
			t.Errorf("a pod asking for %q with %d device classes: keyed %v, want %v", tc.resource, len(tc.classes), ok, tc.want)
		}
	}
}

// TestKeysOnceACycle: a key several plugins share is computed once for a
// pod in a cycle, and again for another pod or in the next cycle (a pod
// may have changed between cycles).
func TestKeysOnceACycle(t *testing.T) {
	r := &runner{}
	calls := 0
	key := r.once(func(p *v1.Pod) (string, bool) {
		calls++
		return p.Spec.NodeName, true
	})
	a, b := plainPod("a", "", "1", "1Gi"), plainPod("b", "", "1", "1Gi")
	a.Spec.NodeName = "n1"
	for range 3 {
		if k, _ := key(a); k != "n1" {
			t.Fatalf("key %q, want n1", k)
		}
	}
	if calls != 1 {
		t.Fatalf("%d computations of one pod's key in a cycle, want 1", calls)
	}
	key(b)
	if calls != 2 {
		t.Fatalf("%d computations after another pod, want 2", calls)
	}
	a.Spec.NodeName = "n2"
	r.memos.cycle++
	if k, _ := key(a); k != "n2" || calls != 3 {
		t.Fatalf("next cycle: key %q after %d computations, want n2 after 3", k, calls)
	}
}
