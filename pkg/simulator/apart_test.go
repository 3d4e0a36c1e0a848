package simulator

import (
	"fmt"
	"math/rand/v2"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/kubernetes/pkg/scheduler/apis/config"
	"k8s.io/utils/ptr"

	"github.com/rebalancer-dev/rebalancer/internal/testutil"
	schedprofile "github.com/rebalancer-dev/rebalancer/pkg/profile"
	"github.com/rebalancer-dev/rebalancer/pkg/snapshot"
)

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
	cfg, err := schedprofile.Default()
	if err != nil {
		t.Fatal(err)
	}
	prof := &cfg.Profiles[0]
	_, ctx := testutil.Context(t)
	counted, reached := 0, 0
	for seed := range uint64(60) {
		r := rand.New(rand.NewPCG(seed, 7))
		snap := apartCluster(r)
		s, err := New(ctx, []*config.KubeSchedulerProfile{prof}, snap)
		if err != nil {
			t.Fatal(err)
		}
		for k := range 6 {
			p, closed := apartCopy(r, k)
			p.Name = fmt.Sprintf("copy-%d-%d", seed, k)
			const max = 300
			got, ok, err := s.CountCopies(ctx, p, max)
			if err != nil {
				t.Fatal(err)
			}
			switch {
			case ok != closed:
				t.Errorf("seed %d, copy %d: counted %v, want %v", seed, k, ok, closed)
			case ok:
				if want := placeOneByOne(t, ctx, s, p, max); got != want {
					t.Errorf("seed %d, copy %d (%s): counted %d copies, placed one by one %d", seed, k, describe(p), got, want)
				}
				counted++
				if got > 0 && got < max {
					reached++
				}
			}
		}
	}
	if counted < 250 || reached < 150 {
		t.Errorf("only %d pods counted, %d short of the cap and above 0: the test shows little", counted, reached)
	}
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
