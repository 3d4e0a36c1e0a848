package requests

import (
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	"k8s.io/utils/ptr"
)

// TestOfIsWhatTheSchedulerCounts: for pods of every shape — plain, with
// init containers and a sidecar, with overhead, with pod-level resources,
// and resized in place up or down (spec, allocated and reported resources
// apart) — Of gives the CPU and memory kube-scheduler's NodeInfo adds to
// the node for the pod.
func TestOfIsWhatTheSchedulerCounts(t *testing.T) {
	rl := func(cpu, memory string) v1.ResourceList {
		return v1.ResourceList{v1.ResourceCPU: resource.MustParse(cpu), v1.ResourceMemory: resource.MustParse(memory)}
	}
	container := func(name, cpu, memory string) v1.Container {
		return v1.Container{Name: name, Resources: v1.ResourceRequirements{Requests: rl(cpu, memory)}}
	}
	resized := func(spec, allocated, reported string) *v1.Pod {
		return &v1.Pod{
			Spec: v1.PodSpec{Containers: []v1.Container{container("app", spec, "1Gi")}},
			Status: v1.PodStatus{ContainerStatuses: []v1.ContainerStatus{{
				Name: "app", AllocatedResources: rl(allocated, "1Gi"),
				Resources: &v1.ResourceRequirements{Requests: rl(reported, "1Gi")},
			}}},
		}
	}
	for name, pod := range map[string]*v1.Pod{
		"plain": {Spec: v1.PodSpec{Containers: []v1.Container{container("app", "1", "1Gi"), container("log", "100m", "64Mi")}}},
		"init and sidecar": {Spec: v1.PodSpec{
			InitContainers: []v1.Container{container("setup", "2", "2Gi"), func() v1.Container {
				c := container("proxy", "200m", "128Mi")
				c.RestartPolicy = ptr.To(v1.ContainerRestartPolicyAlways)
				return c
			}()},
			Containers: []v1.Container{container("app", "1", "1Gi")},
		}},
		"overhead":                      {Spec: v1.PodSpec{Containers: []v1.Container{container("app", "1", "1Gi")}, Overhead: rl("250m", "160Mi")}},
		"pod-level":                     {Spec: v1.PodSpec{Containers: []v1.Container{container("app", "1", "1Gi")}, Resources: &v1.ResourceRequirements{Requests: rl("3", "4Gi")}}},
		"resized down, not yet applied": resized("1", "3", "3"),
		"resized up, allocated":         resized("2", "3", "2"),
		"resized, reported larger":      resized("1", "1", "2500m"),
	} {
		t.Run(name, func(t *testing.T) {
			pod.Name, pod.Namespace, pod.UID = "p", "default", "uid"
			want := framework.NewNodeInfo(pod).GetRequested()
			got := Of(pod)
			if got.Cpu().MilliValue() != want.GetMilliCPU() || got.Memory().Value() != want.GetMemory() {
				t.Errorf("Of: %s CPU, %s memory; the scheduler counts %dm and %d", got.Cpu(), got.Memory(), want.GetMilliCPU(), want.GetMemory())
			}
		})
	}
}
