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
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/rebalancer-dev/rebalancer/pkg/plan"
)

// TestDevicesCapturedAndKept: a pod that claims a GPU through DRA is placed
// by rebalancer-scheduler on the only node that publishes one. The live
// cluster, and its capture, carry the DeviceClass, the ResourceSlice and the
// claim as the scheduler allocated it (so rebalancer's validation of them
// agrees with kube-apiserver's); with that node tainted for maintenance, the
// pod is not moved, live or from the capture, and the skip names its claim.
func TestDevicesCapturedAndKept(t *testing.T) {
	needScheduler(t)
	e := newTestEnv(t)
	gpuNode, other := e.name+"-gpu", e.name+"-cpu"
	e.addNodes("8", gpuNode, other)

	class := e.name + ".gpu.example.com" // cluster-scoped: one per test run
	rc := client.ResourceV1()
	if _, err := rc.DeviceClasses().Create(e.ctx, &resourcev1.DeviceClass{
		ObjectMeta: metav1.ObjectMeta{Name: class},
		Spec: resourcev1.DeviceClassSpec{Selectors: []resourcev1.DeviceSelector{{
			CEL: &resourcev1.CELDeviceSelector{Expression: `device.driver == "` + class + `"`},
		}}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rc.DeviceClasses().Delete(context.Background(), class, metav1.DeleteOptions{}) })
	slice := gpuNode + "-gpus"
	if _, err := rc.ResourceSlices().Create(e.ctx, &resourcev1.ResourceSlice{
		ObjectMeta: metav1.ObjectMeta{Name: slice},
		Spec: resourcev1.ResourceSliceSpec{
			Driver:   class,
			NodeName: ptr.To(gpuNode),
			Pool:     resourcev1.ResourcePool{Name: gpuNode, Generation: 1, ResourceSliceCount: 1},
			Devices:  []resourcev1.Device{{Name: "gpu-0"}},
		},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rc.ResourceSlices().Delete(context.Background(), slice, metav1.DeleteOptions{}) })
	if _, err := rc.ResourceClaims(e.ns).Create(e.ctx, &resourcev1.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "gpu"},
		Spec: resourcev1.ResourceClaimSpec{Devices: resourcev1.DeviceClaim{Requests: []resourcev1.DeviceRequest{{
			Name: "gpu", Exactly: &resourcev1.ExactDeviceRequest{DeviceClassName: class},
		}}}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	spec := e.podSpec(schedulerName, resources("1", "1Gi"))
	spec.ResourceClaims = []v1.PodResourceClaim{{Name: "gpu", ResourceClaimName: ptr.To("gpu")}}
	spec.Containers[0].Resources.Claims = []v1.ResourceClaim{{Name: "gpu"}}
	sel := map[string]string{"app": "trainer"}
	rs := &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{Name: "trainer", Namespace: e.ns},
		Spec: appsv1.ReplicaSetSpec{
			Replicas: ptr.To[int32](1),
			Selector: &metav1.LabelSelector{MatchLabels: sel},
			Template: v1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: sel}, Spec: spec},
		},
	}
	if _, err := client.AppsV1().ReplicaSets(e.ns).Create(e.ctx, rs, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	bound := e.boundPods("trainer", 1)[0]
	if bound.Spec.NodeName != gpuNode {
		t.Fatalf("trainer is on %s, want on %s, the only node with a GPU", bound.Spec.NodeName, gpuNode)
	}
	e.taintForMaintenance(gpuNode)

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
	for _, want := range []string{"kind: DeviceClass", "name: " + class, "kind: ResourceSlice", "name: " + slice, "kind: ResourceClaim", "device: gpu-0"} {
		if !strings.Contains(string(data), want) {
			t.Errorf("the capture lacks %q", want)
		}
	}

	for _, source := range [][]string{{"--kubeconfig", kubeconfig}, {"--snapshot", file}} {
		p, out := planJSON(t, ctx, source...)
		var skips []plan.Skip
		for _, s := range p.Skipped {
			if strings.HasPrefix(s.Pod, e.ns+"/trainer-") {
				skips = append(skips, s)
			}
		}
		for _, m := range p.Moves {
			if strings.HasPrefix(m.Pod, "trainer-") && m.Namespace == e.ns {
				t.Errorf("%s: trainer moved %s -> %s; its GPU is on its node", source[0], m.Source, m.Target)
			}
		}
		if len(skips) == 0 {
			t.Errorf("%s: trainer is not skipped off the tainted node; plan: %s", source[0], out)
		}
		for _, s := range skips {
			if s.Reason != plan.ReasonClaim || !strings.Contains(s.Detail, "ResourceClaim "+e.ns+"/gpu") {
				t.Errorf("%s: trainer skipped as %s: %s; want %s naming its claim", source[0], s.Reason, s.Detail, plan.ReasonClaim)
			}
		}
	}
}
