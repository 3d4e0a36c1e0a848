//go:build e2e

package e2e

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/rebalancer-dev/rebalancer/pkg/plan"
)

// TestDevicesFollowTheirPods: two pods claim a GPU through DRA on gpu-a,
// trainer through a claim kube-controller-manager made for it from a
// template, shared through a claim it names. gpu-a goes under maintenance
// and gpu-b publishes a free GPU. The cluster, live and captured (the
// capture carries the DeviceClass, the ResourceSlices, the template and the
// claims as the scheduler allocated them, so rebalancer's validation agrees
// with kube-apiserver's), plans trainer onto gpu-b and keeps shared, whose
// claim stays allocated on gpu-a, naming it. One `run --once` carries it
// out: trainer's replacement runs on gpu-b with a claim of its own
// allocated gpu-b's GPU, and its old claim is deleted.
func TestDevicesFollowTheirPods(t *testing.T) {
	needScheduler(t)
	e := newTestEnv(t)
	gpuA, gpuB := e.name+"-a", e.name+"-b"
	e.addNodes("8", gpuA, gpuB)

	class := e.deviceClass("gpu")
	rc := client.ResourceV1()
	gpu := func(name string) resourcev1.Device { return resourcev1.Device{Name: name} }
	e.publishDevices(class, gpuA, gpu("gpu-0"), gpu("gpu-1"))

	request := resourcev1.DeviceClaim{Requests: []resourcev1.DeviceRequest{{
		Name: "gpu", Exactly: &resourcev1.ExactDeviceRequest{DeviceClassName: class},
	}}}
	if _, err := rc.ResourceClaims(e.ns).Create(e.ctx, &resourcev1.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "gpu"}, Spec: resourcev1.ResourceClaimSpec{Devices: request},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := rc.ResourceClaimTemplates(e.ns).Create(e.ctx, &resourcev1.ResourceClaimTemplate{
		ObjectMeta: metav1.ObjectMeta{Name: "gpu"},
		Spec:       resourcev1.ResourceClaimTemplateSpec{Spec: resourcev1.ResourceClaimSpec{Devices: request}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.claimingReplicaSet("trainer", 1, v1.PodResourceClaim{Name: "gpu", ResourceClaimTemplateName: ptr.To("gpu")})
	e.claimingReplicaSet("shared", 1, v1.PodResourceClaim{Name: "gpu", ResourceClaimName: ptr.To("gpu")})
	// claimOf is the claim each pod runs with, from its status for a
	// claim made from the template.
	claimOf := func(p v1.Pod) string {
		if s := p.Status.ResourceClaimStatuses; len(s) > 0 && s[0].ResourceClaimName != nil {
			return *s[0].ResourceClaimName
		}
		return "gpu"
	}
	bound := func(app string) v1.Pod {
		t.Helper()
		var pod v1.Pod
		e.poll(app+" bound with its claim", func() (bool, error) {
			pods := e.boundPods(app, 1)
			p, err := client.CoreV1().Pods(e.ns).Get(e.ctx, pods[0].Name, metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			pod = *p
			return app != "trainer" || claimOf(pod) != "gpu", nil
		})
		return pod
	}
	trainer, shared := bound("trainer"), bound("shared")
	for _, p := range []v1.Pod{trainer, shared} {
		if p.Spec.NodeName != gpuA {
			t.Fatalf("%s is on %s, want on %s, the only node with GPUs", p.Name, p.Spec.NodeName, gpuA)
		}
	}
	e.publishDevices(class, gpuB, gpu("gpu-0"))
	e.taintForMaintenance(gpuA)

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	file := filepath.Join(t.TempDir(), "cluster.yaml")
	capture := exec.CommandContext(ctx, filepath.Join(binDir, "rebalancer"), "snapshot", "capture", "--kubeconfig", kubeconfig, "-o", file)
	if b, err := capture.CombinedOutput(); err != nil {
		t.Fatalf("rebalancer snapshot capture: %v\n%s", err, b)
	}
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"kind: DeviceClass", "name: " + class, "kind: ResourceSlice", "name: " + gpuB + "-" + class,
		"kind: ResourceClaimTemplate", "name: " + claimOf(trainer), "device: gpu-0", "device: gpu-1"} {
		if !strings.Contains(string(data), want) {
			t.Errorf("the capture lacks %q", want)
		}
	}

	check := func(source string, p plan.Plan, out []byte) {
		t.Helper()
		moved := false
		for _, m := range p.Moves {
			if m.Namespace != e.ns {
				continue
			}
			switch {
			case m.Name == trainer.Name && m.Source == gpuA && m.Target == gpuB:
				moved = true
			default:
				t.Errorf("%s: %s planned %s -> %s; want trainer onto %s alone", source, m.Name, m.Source, m.Target, gpuB)
			}
		}
		if !moved {
			t.Errorf("%s: trainer is not planned onto %s; plan: %s", source, gpuB, out)
		}
		skipped := 0
		for _, s := range p.Skipped {
			if s.Pod != e.ns+"/"+shared.Name {
				continue
			}
			skipped++
			if s.Reason != plan.ReasonClaim || !strings.Contains(s.Detail, "ResourceClaim "+e.ns+"/gpu") {
				t.Errorf("%s: shared skipped as %s: %s; want %s naming its claim", source, s.Reason, s.Detail, plan.ReasonClaim)
			}
		}
		if skipped == 0 {
			t.Errorf("%s: shared is not skipped off the tainted node; plan: %s", source, out)
		}
	}
	for _, source := range [][]string{{"--kubeconfig", kubeconfig}, {"--snapshot", file}} {
		p, out := planJSON(t, ctx, source...)
		check(source[0], p, out)
	}

	res := runOnce(t)
	check("run --once", res.Plan, nil)
	var replacement v1.Pod
	e.poll("trainer's replacement bound with a claim of its own", func() (bool, error) {
		pods := e.boundPods("trainer", 1)
		if pods[0].UID == trainer.UID {
			return false, nil
		}
		replacement = bound("trainer")
		return true, nil
	})
	if replacement.Spec.NodeName != gpuB {
		t.Errorf("trainer's replacement runs on %s, want %s", replacement.Spec.NodeName, gpuB)
	}
	claim, err := rc.ResourceClaims(e.ns).Get(e.ctx, claimOf(replacement), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if a := claim.Status.Allocation; a == nil || len(a.Devices.Results) != 1 || a.Devices.Results[0].Pool != gpuB {
		t.Errorf("the replacement's claim %s is allocated %+v, want gpu-b's GPU", claim.Name, claim.Status.Allocation)
	}
	if p, err := client.CoreV1().Pods(e.ns).Get(e.ctx, shared.Name, metav1.GetOptions{}); err != nil || p.Spec.NodeName != gpuA {
		t.Errorf("shared: %v, %v; want it still on %s", p, err, gpuA)
	}
	e.poll("trainer's old claim deleted", func() (bool, error) {
		_, err := rc.ResourceClaims(e.ns).Get(e.ctx, claimOf(trainer), metav1.GetOptions{})
		return err != nil, nil
	})
}

// TestSharedDevicesFollowTheirPods: two pods share gpu-a's one GPU through
// DRA consumable capacity (the GPU may be allocated more than once, 1000
// "milli"; each pod's claim, from a template, asks for 500 of it). gpu-a
// goes under maintenance and gpu-b publishes a GPU like it. `run --once`
// moves both onto gpu-b: their replacements run there, each with a claim of
// its own consuming 500 of gpu-b's GPU, which gives no more than its 1000.
func TestSharedDevicesFollowTheirPods(t *testing.T) {
	needScheduler(t)
	e := newTestEnv(t)
	gpuA, gpuB := e.name+"-a", e.name+"-b"
	e.addNodes("8", gpuA, gpuB)

	class := e.deviceClass("shared")
	rc := client.ResourceV1()
	shared := resourcev1.Device{
		Name: "gpu-0", AllowMultipleAllocations: ptr.To(true),
		Capacity: map[resourcev1.QualifiedName]resourcev1.DeviceCapacity{"milli": {Value: resource.MustParse("1000")}},
	}
	e.publishDevices(class, gpuA, shared)
	if _, err := rc.ResourceClaimTemplates(e.ns).Create(e.ctx, &resourcev1.ResourceClaimTemplate{
		ObjectMeta: metav1.ObjectMeta{Name: "half"},
		Spec: resourcev1.ResourceClaimTemplateSpec{Spec: resourcev1.ResourceClaimSpec{Devices: resourcev1.DeviceClaim{
			Requests: []resourcev1.DeviceRequest{{Name: "gpu", Exactly: &resourcev1.ExactDeviceRequest{
				DeviceClassName: class,
				Capacity:        &resourcev1.CapacityRequirements{Requests: map[resourcev1.QualifiedName]resource.Quantity{"milli": resource.MustParse("500")}},
			}}},
		}}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// The halves are placed one after the other. kube-scheduler v1.36 counts
	// the consumed capacity of a claim twice while its allocation is both
	// written back and still in flight, so a second half filtered in that
	// instant finds the GPU full; and it waits for the unschedulable pods'
	// flush (five minutes), since another pod's claim changing does not
	// requeue it. That is kube-scheduler's placement, not the move tested here.
	e.claimingReplicaSet("half", 1, v1.PodResourceClaim{Name: "gpu", ResourceClaimTemplateName: ptr.To("half")})
	e.boundPods("half", 1)
	scale, err := client.AppsV1().ReplicaSets(e.ns).GetScale(e.ctx, "half", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	scale.Spec.Replicas = 2
	if _, err := client.AppsV1().ReplicaSets(e.ns).UpdateScale(e.ctx, "half", scale, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	// consumedOn sums, by node, what the namespace's claims consume of the
	// GPUs, and fails when a GPU gives more than its 1000.
	consumedOn := func() map[string]int64 {
		t.Helper()
		claims, err := rc.ResourceClaims(e.ns).List(e.ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]int64{}
		for _, c := range claims.Items {
			if c.Status.Allocation == nil || c.DeletionTimestamp != nil {
				continue
			}
			for _, r := range c.Status.Allocation.Devices.Results {
				q := r.ConsumedCapacity["milli"]
				out[r.Pool] += q.Value()
			}
		}
		for node, n := range out {
			if n > 1000 {
				t.Errorf("the GPU of %s gives %d milli", node, n)
			}
		}
		return out
	}
	var before []v1.Pod
	e.poll("both halves bound on "+gpuA+", sharing its GPU", func() (bool, error) {
		before = e.boundPods("half", 2)
		return consumedOn()[gpuA] == 1000, nil
	})
	for _, p := range before {
		if p.Spec.NodeName != gpuA {
			t.Fatalf("%s is on %s, want on %s, the only node with a GPU", p.Name, p.Spec.NodeName, gpuA)
		}
	}
	e.publishDevices(class, gpuB, shared)
	e.taintForMaintenance(gpuA)

	res := runOnce(t)
	moved := 0
	for _, m := range res.Plan.Moves {
		if m.Namespace != e.ns {
			continue
		}
		if m.Source != gpuA || m.Target != gpuB {
			t.Errorf("%s planned %s -> %s, want %s -> %s", m.Name, m.Source, m.Target, gpuA, gpuB)
		}
		moved++
	}
	if moved != 2 {
		t.Fatalf("%d of the two halves planned onto %s; skipped: %+v", moved, gpuB, res.Plan.Skipped)
	}
	e.poll("both replacements bound on "+gpuB+", sharing its GPU", func() (bool, error) {
		after := e.boundPods("half", 2)
		for _, p := range after {
			if p.Spec.NodeName != gpuB {
				return false, nil
			}
		}
		got := consumedOn()
		return got[gpuB] == 1000 && got[gpuA] == 0, nil
	})
}

// deviceClass creates a DeviceClass that takes every device of a driver of
// the same name, of its own for this test run (cluster-scoped), and
// returns the name.
func (e *testEnv) deviceClass(kind string) string {
	e.t.Helper()
	class := e.name + "." + kind + ".example.com"
	rc := client.ResourceV1()
	if _, err := rc.DeviceClasses().Create(e.ctx, &resourcev1.DeviceClass{
		ObjectMeta: metav1.ObjectMeta{Name: class},
		Spec: resourcev1.DeviceClassSpec{Selectors: []resourcev1.DeviceSelector{{
			CEL: &resourcev1.CELDeviceSelector{Expression: `device.driver == "` + class + `"`},
		}}},
	}, metav1.CreateOptions{}); err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { _ = rc.DeviceClasses().Delete(context.Background(), class, metav1.DeleteOptions{}) })
	return class
}

// publishDevices publishes devices on node, as the driver of class does,
// in a ResourceSlice named after both.
func (e *testEnv) publishDevices(class, node string, devices ...resourcev1.Device) {
	e.t.Helper()
	rc := client.ResourceV1()
	slice := &resourcev1.ResourceSlice{
		ObjectMeta: metav1.ObjectMeta{Name: node + "-" + class},
		Spec: resourcev1.ResourceSliceSpec{
			Driver:   class,
			NodeName: ptr.To(node),
			Pool:     resourcev1.ResourcePool{Name: node, Generation: 1, ResourceSliceCount: 1},
			Devices:  devices,
		},
	}
	if _, err := rc.ResourceSlices().Create(e.ctx, slice, metav1.CreateOptions{}); err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { _ = rc.ResourceSlices().Delete(context.Background(), slice.Name, metav1.DeleteOptions{}) })
}

// claimingReplicaSet runs replicas pods named app, of 1 CPU and 1 GiB, on
// rebalancer-scheduler, whose container uses the pod's one claim entry.
func (e *testEnv) claimingReplicaSet(app string, replicas int32, claim v1.PodResourceClaim) {
	e.t.Helper()
	spec := e.podSpec(schedulerName, resources("1", "1Gi"))
	spec.ResourceClaims = []v1.PodResourceClaim{claim}
	spec.Containers[0].Resources.Claims = []v1.ResourceClaim{{Name: claim.Name}}
	sel := map[string]string{"app": app}
	rs := &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{Name: app, Namespace: e.ns},
		Spec: appsv1.ReplicaSetSpec{
			Replicas: ptr.To(replicas),
			Selector: &metav1.LabelSelector{MatchLabels: sel},
			Template: v1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: sel}, Spec: spec},
		},
	}
	if _, err := client.AppsV1().ReplicaSets(e.ns).Create(e.ctx, rs, metav1.CreateOptions{}); err != nil {
		e.t.Fatal(err)
	}
}
