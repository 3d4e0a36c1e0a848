package planner

import (
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestAntiAffinityViolationsStillPlanned: the anti-affinity plugin is left
// out only where no pod has required anti-affinity; two replicas that must
// not share a node but do are still split, on the same plan whatever else
// the cluster holds.
func TestAntiAffinityViolationsStillPlanned(t *testing.T) {
	c := newCluster()
	c.node("a", "8", "32Gi")
	c.node("b", "8", "32Gi")
	c.node("c", "8", "32Gi")
	apart := &v1.Affinity{PodAntiAffinity: &v1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []v1.PodAffinityTerm{{
		LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "db"}}, TopologyKey: "kubernetes.io/hostname"}}}}
	for range 2 {
		c.pod("default", "db", "StatefulSet", "a", "1", "1Gi").Spec.Affinity = apart
	}
	c.pod("default", "web", "ReplicaSet", "b", "2", "1Gi")
	c.pod("default", "web", "ReplicaSet", "c", "2", "1Gi")
	if nothingToEvict("RemovePodsViolatingInterPodAntiAffinity", c.snap.Pods) {
		t.Fatal("a cluster with anti-affinity pods is said to have nothing for the anti-affinity plugin")
	}
	p := runPlan(t, c, "binpacking", Options{MinScoreGain: 1})
	split := 0
	for _, m := range p.Moves {
		if m.Source == "a" && m.Strategy == "RemovePodsViolatingInterPodAntiAffinity" {
			split++
		}
	}
	if split != 1 {
		t.Errorf("%d db pods moved off a by the anti-affinity plugin, want 1; moves %+v, skipped %+v", split, p.Moves, p.Skipped)
	}

	c.snap.Pods[0].Spec.Affinity, c.snap.Pods[1].Spec.Affinity = nil, nil
	if !nothingToEvict("RemovePodsViolatingInterPodAntiAffinity", c.snap.Pods) {
		t.Error("without anti-affinity pods, the anti-affinity plugin is run")
	}
	if nothingToEvict("RemoveDuplicates", c.snap.Pods) {
		t.Error("another plugin is said to have nothing to evict")
	}
}
