package simulator

import (
	"context"
	"fmt"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/names"
	"math/rand/v2"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/kubernetes/pkg/scheduler/apis/config"
	"k8s.io/utils/ptr"

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
	counted := 0
	onRandomClusters(t, 40, 3, copiesCluster, func(ctx context.Context, s *Simulator, r *rand.Rand, seed uint64) {
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
	})
	if counted < 60 {
		t.Errorf("only %d pods counted: the test shows little", counted)
	}
}

// onRandomClusters runs each on a simulation, with kube-scheduler's
// default profile, of cluster(r) for every seed below seeds (r drawn from
// seed and salt, and given to each after the cluster).
func onRandomClusters(t *testing.T, seeds, salt uint64, cluster func(*rand.Rand) *snapshot.Snapshot, each func(context.Context, *Simulator, *rand.Rand, uint64)) {
	t.Helper()
	onRandomClustersOf(t, defaultProfile(t), seeds, salt, cluster, each)
}

func defaultProfile(t *testing.T) *config.KubeSchedulerProfile {
	t.Helper()
	cfg, err := schedprofile.Default()
	if err != nil {
		t.Fatal(err)
	}
	return &cfg.Profiles[0]
}

// onRandomClustersOf is onRandomClusters with the profile prof.
func onRandomClustersOf(t *testing.T, prof *config.KubeSchedulerProfile, seeds, salt uint64, cluster func(*rand.Rand) *snapshot.Snapshot, each func(context.Context, *Simulator, *rand.Rand, uint64)) {
	t.Helper()
	_, ctx := testutil.Context(t)
	for seed := range seeds {
		r := rand.New(rand.NewPCG(seed, salt))
		s, err := New(ctx, []*config.KubeSchedulerProfile{prof}, cluster(r))
		if err != nil {
			t.Fatal(err)
		}
		each(ctx, s, r, seed)
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

// TestCountCopiesApartAsPlacedOneByOne: on random clusters (zones, a few
// nodes without a zone or sharing a hostname label, taints, running pods
// of the workload and of others, in its namespace and another), copies
// kept apart by required anti-affinity on the hostname or the zone, or by
// a DoNotSchedule spread on either (maxSkew 1 to 3, either node affinity
// policy), are counted in closed form to the number kube-scheduler's
// default profile binds one cycle at a time; the forms without one
// (several constraints, affinity to itself, minDomains, taints policy
// Honor) count nothing.
func TestCountCopiesApartAsPlacedOneByOne(t *testing.T) {
	counted, reached := 0, 0
	onRandomClusters(t, 60, 7, apartCluster, func(ctx context.Context, s *Simulator, r *rand.Rand, seed uint64) {
		for k := range 6 {
			closed, ok, got := countAgainstOneByOne(t, ctx, s, r, seed, k)
			switch {
			case ok != closed:
				t.Errorf("seed %d, copy %d: counted %v, want %v", seed, k, ok, closed)
			case ok:
				counted++
				if got > 0 && got < apartMax {
					reached++
				}
			}
		}
	})
	if counted < 250 || reached < 150 {
		t.Errorf("only %d pods counted, %d short of the cap and above 0: the test shows little", counted, reached)
	}
}

// TestCountCopiesApartWithoutTheirFilter: a profile that does not filter
// by inter-pod affinity or topology spread places the copies as if they
// had neither, and so does the count.
func TestCountCopiesApartWithoutTheirFilter(t *testing.T) {
	prof := defaultProfile(t)
	prof.Plugins.Filter.Disabled = append(prof.Plugins.Filter.Disabled, config.Plugin{Name: names.InterPodAffinity}, config.Plugin{Name: names.PodTopologySpread})
	counted := 0
	onRandomClustersOf(t, prof, 20, 7, apartCluster, func(ctx context.Context, s *Simulator, r *rand.Rand, seed uint64) {
		for k := range 6 {
			if _, ok, _ := countAgainstOneByOne(t, ctx, s, r, seed, k); ok {
				counted++
			}
		}
	})
	if counted < 60 {
		t.Errorf("only %d pods counted: the test shows little", counted)
	}
}

// apartMax is the most copies the apart tests count.
const apartMax = 300

// countAgainstOneByOne counts copy k of apartCopy on s and, when it is
// counted, checks the count against placing the copies one by one. It
// returns whether apartCopy says the copy has a closed form, whether it
// was counted, and the count.
func countAgainstOneByOne(t *testing.T, ctx context.Context, s *Simulator, r *rand.Rand, seed uint64, k int) (closed, ok bool, got int32) {
	t.Helper()
	p, closed := apartCopy(r, k)
	p.Name = fmt.Sprintf("copy-%d-%d", seed, k)
	got, ok, err := s.CountCopies(ctx, p, apartMax)
	if err != nil {
		t.Fatal(err)
	}
	if ok {
		if want := placeOneByOne(t, ctx, s, p, apartMax); got != want {
			t.Errorf("seed %d, copy %d (%s): counted %d copies, placed one by one %d", seed, k, describe(p), got, want)
		}
	}
	return closed, ok, got
}

func describe(p *v1.Pod) string {
	if a := p.Spec.Affinity; a != nil && a.PodAntiAffinity != nil {
		return "anti-affinity on " + a.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution[0].TopologyKey
	}
	if len(p.Spec.TopologySpreadConstraints) > 0 {
		tc := p.Spec.TopologySpreadConstraints[0]
		return fmt.Sprintf("spread on %s, maxSkew %d, nodeAffinityPolicy %v, selector %v", tc.TopologyKey, tc.MaxSkew, ptr.Deref(tc.NodeAffinityPolicy, ""), tc.LabelSelector.MatchLabels)
	}
	return "plain"
}

func apartCluster(r *rand.Rand) *snapshot.Snapshot {
	snap := &snapshot.Snapshot{}
	zones := []string{"a", "b", "c", "d"}[:2+r.IntN(3)]
	for i := range 4 + r.IntN(18) {
		cpu := []string{"2", "4", "8"}[r.IntN(3)]
		n := testutil.BuildTestNode(fmt.Sprintf("node-%02d", i), cpu, "16Gi")
		if r.IntN(10) > 0 {
			n.Labels["zone"] = zones[r.IntN(len(zones))]
		}
		switch r.IntN(12) {
		case 0:
			delete(n.Labels, v1.LabelHostname)
		case 1:
			n.Labels[v1.LabelHostname] = "shared"
		}
		if r.IntN(6) == 0 {
			n.Spec.Taints = []v1.Taint{{Key: "dedicated", Value: "batch", Effect: v1.TaintEffectNoSchedule}}
		}
		snap.Nodes = append(snap.Nodes, n)
		for j := range r.IntN(5) {
			p := testutil.BuildTestPod(fmt.Sprintf("run-%d-%d", i, j), n.Name, fmt.Sprintf("%dm", 250*(1+r.IntN(4))), "512Mi", testutil.Running)
			switch r.IntN(4) {
			case 0, 1:
				p.Labels = map[string]string{"app": "w"}
			case 2:
				p.Labels = map[string]string{"app": "w"}
				p.Namespace = "other"
			}
			snap.Pods = append(snap.Pods, p)
		}
	}
	return snap
}

// apartCopy is a pod of app w whose copies keep apart, and whether
// CountCopies has a closed form for it.
func apartCopy(r *rand.Rand, k int) (*v1.Pod, bool) {
	p := testutil.BuildTestPod("copy", "", fmt.Sprintf("%dm", 100*(1+r.IntN(10))), "256Mi", func(p *v1.Pod) { p.Status.Phase = v1.PodPending })
	p.Labels = map[string]string{"app": "w"}
	if r.IntN(4) == 0 {
		p.Spec.NodeSelector = map[string]string{"zone": []string{"a", "b"}[r.IntN(2)]}
	}
	if r.IntN(3) == 0 {
		p.Spec.Tolerations = []v1.Toleration{{Key: "dedicated", Operator: v1.TolerationOpExists}}
	}
	key := []string{v1.LabelHostname, "zone"}[r.IntN(2)]
	selector := &metav1.LabelSelector{MatchLabels: map[string]string{"app": "w"}}
	if r.IntN(8) == 0 {
		selector = &metav1.LabelSelector{MatchLabels: map[string]string{"app": "other"}} // not the copies
	}
	anti := v1.PodAffinityTerm{LabelSelector: selector, TopologyKey: key}
	spread := v1.TopologySpreadConstraint{MaxSkew: int32(1 + r.IntN(3)), TopologyKey: key, WhenUnsatisfiable: v1.DoNotSchedule, LabelSelector: selector}
	if r.IntN(2) == 0 {
		spread.NodeAffinityPolicy = ptr.To(v1.NodeInclusionPolicyIgnore)
	}
	switch k % 6 {
	case 0, 1:
		p.Spec.Affinity = &v1.Affinity{PodAntiAffinity: &v1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []v1.PodAffinityTerm{anti}}}
	case 2, 3, 4:
		p.Spec.TopologySpreadConstraints = []v1.TopologySpreadConstraint{spread}
	default:
		switch r.IntN(4) {
		case 0:
			p.Spec.Affinity = &v1.Affinity{PodAffinity: &v1.PodAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []v1.PodAffinityTerm{anti}}}
		case 1:
			p.Spec.Affinity = &v1.Affinity{PodAntiAffinity: &v1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []v1.PodAffinityTerm{anti}}}
			p.Spec.TopologySpreadConstraints = []v1.TopologySpreadConstraint{spread}
		case 2:
			spread.MinDomains = ptr.To(int32(5))
			p.Spec.TopologySpreadConstraints = []v1.TopologySpreadConstraint{spread}
		default:
			spread.NodeTaintsPolicy = ptr.To(v1.NodeInclusionPolicyHonor)
			p.Spec.TopologySpreadConstraints = []v1.TopologySpreadConstraint{spread}
		}
		return p, false
	}
	return p, true
}
