package makeroom

import (
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/rebalancer-dev/rebalancer/pkg/requests"
)

// TestShapes: two pods of one ReplicaSet, of other names, UIDs and
// service-account volume names, have one shape; a change to anything that
// decides where a pod fits gives another; a pod with ResourceClaims or a
// generic ephemeral volume has none (its claims are its own).
func TestShapes(t *testing.T) {
	pod := func(name string) *v1.Pod {
		return &v1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "team-a", UID: "uid-1",
				Labels:          map[string]string{"app": "web", "pod-template-hash": "abc"},
				OwnerReferences: []metav1.OwnerReference{{Kind: "ReplicaSet", Name: "web-abc", UID: "rs", Controller: new(bool)}}},
			Spec: v1.PodSpec{
				SchedulerName: "rebalancer-scheduler",
				Containers: []v1.Container{{Name: "app", Image: "web:1", Resources: v1.ResourceRequirements{Requests: v1.ResourceList{
					v1.ResourceCPU: resource.MustParse("4"), v1.ResourceMemory: resource.MustParse("1Gi")}},
					VolumeMounts: []v1.VolumeMount{{Name: "kube-api-access-" + name, MountPath: "/var/run/secrets"}}}},
				Volumes: []v1.Volume{{Name: "kube-api-access-" + name, VolumeSource: v1.VolumeSource{Projected: &v1.ProjectedVolumeSource{}}}},
			},
		}
	}
	shape := func(p *v1.Pod) string { return shapeOf(p, requests.Of(p)) }
	a, b := pod("web-abc-1"), pod("web-abc-2")
	b.UID = "uid-2"
	if shape(a) == "" || shape(a) != shape(b) {
		t.Fatalf("two pods of one ReplicaSet: shapes %q and %q", shape(a), shape(b))
	}
	for name, change := range map[string]func(*v1.Pod){
		"requests":   func(p *v1.Pod) { p.Spec.Containers[0].Resources.Requests[v1.ResourceCPU] = resource.MustParse("3") },
		"overhead":   func(p *v1.Pod) { p.Spec.Overhead = v1.ResourceList{v1.ResourceCPU: resource.MustParse("100m")} },
		"init":       func(p *v1.Pod) { p.Spec.InitContainers = []v1.Container{{Name: "setup"}} },
		"host port":  func(p *v1.Pod) { p.Spec.Containers[0].Ports = []v1.ContainerPort{{ContainerPort: 80, HostPort: 80}} },
		"namespace":  func(p *v1.Pod) { p.Namespace = "team-b" },
		"labels":     func(p *v1.Pod) { p.Labels = map[string]string{"app": "api"} },
		"owner":      func(p *v1.Pod) { p.OwnerReferences[0].UID = "other-rs" },
		"scheduler":  func(p *v1.Pod) { p.Spec.SchedulerName = "default-scheduler" },
		"priority":   func(p *v1.Pod) { p.Spec.Priority = new(int32) },
		"selector":   func(p *v1.Pod) { p.Spec.NodeSelector = map[string]string{"zone": "a"} },
		"tolerating": func(p *v1.Pod) { p.Spec.Tolerations = []v1.Toleration{{Key: "gpu", Operator: v1.TolerationOpExists}} },
		"affinity": func(p *v1.Pod) {
			p.Spec.Affinity = &v1.Affinity{PodAntiAffinity: &v1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []v1.PodAffinityTerm{{TopologyKey: v1.LabelHostname}}}}
		},
		"spread": func(p *v1.Pod) {
			p.Spec.TopologySpreadConstraints = []v1.TopologySpreadConstraint{{MaxSkew: 1, TopologyKey: v1.LabelHostname, WhenUnsatisfiable: v1.DoNotSchedule}}
		},
		"volume": func(p *v1.Pod) {
			p.Spec.Volumes = append(p.Spec.Volumes, v1.Volume{Name: "data", VolumeSource: v1.VolumeSource{PersistentVolumeClaim: &v1.PersistentVolumeClaimVolumeSource{ClaimName: "data"}}})
		},
	} {
		c := pod("web-abc-3")
		change(c)
		if shape(c) == shape(a) {
			t.Errorf("%s changed: same shape", name)
		}
	}
	claims := pod("web-abc-4")
	claims.Spec.ResourceClaims = []v1.PodResourceClaim{{Name: "gpu"}}
	ephemeral := pod("web-abc-5")
	ephemeral.Spec.Volumes = append(ephemeral.Spec.Volumes, v1.Volume{Name: "scratch", VolumeSource: v1.VolumeSource{Ephemeral: &v1.EphemeralVolumeSource{}}})
	for _, p := range []*v1.Pod{claims, ephemeral} {
		if s := shape(p); s != "" {
			t.Errorf("%s: shape %q, want none", p.Name, s)
		}
	}
}
