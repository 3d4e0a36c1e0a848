package simulator

import (
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/rebalancer-dev/rebalancer/internal/testutil"
	"github.com/rebalancer-dev/rebalancer/pkg/requests"
)

// TestResourcesKeyStandsForRequests: pods that share a resources key ask
// for the same, as kube-scheduler counts it (requests.Of), over specs and
// statuses of every kind a pod resized in place shows; a status that says
// nothing of resources (a phase, conditions, IPs, containers without
// resources: every pod a replay places) takes the hand-written key.
func TestResourcesKeyStandsForRequests(t *testing.T) {
	more := v1.ResourceList{v1.ResourceCPU: resource.MustParse("2"), v1.ResourceMemory: resource.MustParse("3Gi")}
	specs := map[string]func(*v1.Pod){
		"plain": func(*v1.Pod) {},
		"larger": func(p *v1.Pod) {
			p.Spec.Containers[0].Resources.Requests = more.DeepCopy()
		},
		"sidecar": func(p *v1.Pod) {
			always := v1.ContainerRestartPolicyAlways
			p.Spec.InitContainers = []v1.Container{{Name: "side", RestartPolicy: &always, Resources: v1.ResourceRequirements{Requests: more.DeepCopy()}}}
		},
	}
	statuses := map[string]func(*v1.Pod){
		"none":  func(*v1.Pod) {},
		"phase": func(p *v1.Pod) { p.Status.Phase = v1.PodPending },
		"running": func(p *v1.Pod) {
			p.Status = v1.PodStatus{Phase: v1.PodRunning, PodIP: "10.0.0.1", Conditions: []v1.PodCondition{{Type: v1.PodReady, Status: v1.ConditionTrue}},
				ContainerStatuses: []v1.ContainerStatus{{Name: p.Spec.Containers[0].Name, Ready: true}}}
		},
		"resize deferred, nothing reported": func(p *v1.Pod) {
			p.Status = v1.PodStatus{Phase: v1.PodRunning, Conditions: []v1.PodCondition{{Type: v1.PodResizePending, Status: v1.ConditionTrue, Reason: v1.PodReasonDeferred}}}
		},
		"resized up, reported": func(p *v1.Pod) {
			p.Status = v1.PodStatus{Phase: v1.PodRunning, ContainerStatuses: []v1.ContainerStatus{{Name: p.Spec.Containers[0].Name,
				Resources: &v1.ResourceRequirements{Requests: more.DeepCopy()}}}}
		},
		"resized up, allocated": func(p *v1.Pod) {
			p.Status = v1.PodStatus{Phase: v1.PodRunning, ContainerStatuses: []v1.ContainerStatus{{Name: p.Spec.Containers[0].Name,
				AllocatedResources: more.DeepCopy(), Resources: &v1.ResourceRequirements{Requests: p.Spec.Containers[0].Resources.Requests.DeepCopy()}}}}
		},
		"resize infeasible": func(p *v1.Pod) {
			p.Status = v1.PodStatus{Phase: v1.PodRunning,
				Conditions:        []v1.PodCondition{{Type: v1.PodResizePending, Status: v1.ConditionTrue, Reason: v1.PodReasonInfeasible}},
				ContainerStatuses: []v1.ContainerStatus{{Name: p.Spec.Containers[0].Name, Resources: &v1.ResourceRequirements{Requests: more.DeepCopy()}}}}
		},
	}
	type keyed struct {
		name string
		reqs v1.ResourceList
	}
	byKey := map[string]keyed{}
	for sn, spec := range specs {
		for stn, status := range statuses {
			p := testutil.BuildTestPod("p", "", "500m", "1Gi")
			spec(p)
			status(p)
			key, ok := podResourcesKey(p, func(v1.ResourceName) bool { return false })
			if !ok {
				t.Fatalf("%s, %s: no key", sn, stn)
			}
			fast := key[0] == 'C'
			if wantFast := stn == "none" || stn == "phase" || stn == "running" || stn == "resize deferred, nothing reported"; fast != wantFast {
				t.Errorf("%s, status %s: hand-written key %v, want %v", sn, stn, fast, wantFast)
			}
			name, reqs := sn+", status "+stn, requests.Of(p)
			if other, ok := byKey[key]; ok && !equalLists(other.reqs, reqs) {
				t.Errorf("%s and %s share a key but ask for %v and %v", other.name, name, other.reqs, reqs)
			}
			byKey[key] = keyed{name, reqs}
		}
	}
	if len(byKey) < len(specs)+2 {
		t.Fatalf("%d keys: the statuses that resize should key apart", len(byKey))
	}
}

func equalLists(a, b v1.ResourceList) bool {
	if len(a) != len(b) {
		return false
	}
	for n, q := range a {
		if r, ok := b[n]; !ok || q.Cmp(r) != 0 {
			return false
		}
	}
	return true
}
