package simulator

import (
	"math/rand/v2"
	"reflect"
	"testing"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2/ktesting"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/apis/config/latest"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/names"
)

// TestPreScoreRemembersByRequests: NodeResourcesFit's and balanced
// allocation's PreScore run once for the pods of one resources key, and a
// later pod of that key gets the very state they wrote then; every pod
// gets the status, the skipped plugins and the state the framework's own
// RunPreScorePlugins gives it (balanced allocation skips best-effort
// pods). A pod asking for a resource DRA devices back is never answered
// from memory.
func TestPreScoreRemembersByRequests(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	def, err := latest.Default()
	if err != nil {
		t.Fatal(err)
	}
	prof := &def.Profiles[0]
	snap := unlikeCluster(rand.New(rand.NewPCG(5, 7)), prof.SchedulerName)
	// example.com/gpu is backed by a device class; nvidia.com/gpu is not.
	snap.DeviceClasses = []*resourceapi.DeviceClass{{ObjectMeta: metav1.ObjectMeta{Name: "gpu.example.com"},
		Spec: resourceapi.DeviceClassSpec{ExtendedResourceName: ptrTo("example.com/gpu")}}}
	sim, fast, _, every := againstEveryNode(t, ctx, prof, snap)
	nodes, err := sim.snapshot.NodeInfos().List()
	if err != nil {
		t.Fatal(err)
	}
	withRequest := func(p *v1.Pod, name v1.ResourceName) *v1.Pod {
		p.Spec.Containers[0].Resources.Requests[name] = resource.MustParse("1")
		p.Spec.Containers[0].Resources.Limits = v1.ResourceList{name: resource.MustParse("1")}
		return p
	}
	bestEffort := func(p *v1.Pod) *v1.Pod {
		p.Spec.Containers[0].Resources = v1.ResourceRequirements{}
		return p
	}
	sched := prof.SchedulerName
	pods := []*v1.Pod{
		plainPod("small", sched, "500m", "2Gi"),
		bestEffort(plainPod("best-effort", sched, "1", "1Gi")),
		withRequest(plainPod("gpu", sched, "1", "4Gi"), gpu),
		withRequest(plainPod("dra", sched, "1", "4Gi"), "example.com/gpu"),
		plainPod("small-again", sched, "500m", "2Gi"),
		plainPod("large", sched, "3", "12Gi"),
		bestEffort(plainPod("best-effort-again", sched, "1", "1Gi")),
		withRequest(plainPod("gpu-again", sched, "1", "4Gi"), gpu),
		withRequest(plainPod("dra-again", sched, "1", "4Gi"), "example.com/gpu"),
	}
	keys := []fwk.StateKey{fwk.StateKey("PreScore" + names.NodeResourcesFit), fwk.StateKey("PreScore" + names.NodeResourcesBalancedAllocation)}
	written := map[string][]fwk.StateData{}
	for _, pod := range pods {
		got, want := framework.NewCycleState(), framework.NewCycleState()
		gotSt := fast.run.preScore(ctx, got, pod, nodes)
		wantSt := every.framework.RunPreScorePlugins(ctx, want, pod, nodes)
		if gotSt.Code() != wantSt.Code() {
			t.Fatalf("%s: PreScore %v, the framework's %v", pod.Name, gotSt, wantSt)
		}
		if !got.GetSkipScorePlugins().Equal(want.GetSkipScorePlugins()) {
			t.Errorf("%s: skipped %v, the framework %v", pod.Name, got.GetSkipScorePlugins().UnsortedList(), want.GetSkipScorePlugins().UnsortedList())
		}
		for _, key := range keys {
			g, _ := got.Read(key)
			w, _ := want.Read(key)
			if !reflect.DeepEqual(g, w) {
				t.Errorf("%s: %s holds %#v, the framework's %#v", pod.Name, key, g, w)
			}
			written[pod.Name] = append(written[pod.Name], g)
		}
	}
	if skipped := written["best-effort"][1]; skipped != nil {
		t.Fatalf("balanced allocation wrote %#v for a best-effort pod: the test shows no skip", skipped)
	}
	for again, first := range map[string]string{"small-again": "small", "gpu-again": "gpu"} {
		for i, key := range keys {
			if written[again][i] != written[first][i] {
				t.Errorf("%s: %s was written anew, not remembered from %s", again, key, first)
			}
		}
	}
	for i, key := range keys {
		if written["large"][i] == written["small"][i] {
			t.Errorf("large: %s is small's", key)
		}
		if written["dra-again"][i] == written["dra"][i] {
			t.Errorf("dra-again: %s was remembered for a resource DRA devices back", key)
		}
	}
}
