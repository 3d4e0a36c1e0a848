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

// TestDevicesCapturedAndKept: two pods that claim a GPU through DRA, one
// through a claim made from a template, one through a claim it names, are
// placed by rebalancer-scheduler on the only node that publishes GPUs. The
// live cluster, and its capture, carry the DeviceClass, the ResourceSlice,
// the template and the claims as the scheduler allocated them (so
// rebalancer's validation of them agrees with kube-apiserver's); with that
// node tainted for maintenance, neither pod is moved, live or from the
// capture, and each skip names the pod's claim.
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
			Devices:  []resourcev1.Device{{Name: "gpu-0"}, {Name: "gpu-1"}},
		},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rc.ResourceSlices().Delete(context.Background(), slice, metav1.DeleteOptions{}) })
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
	// trainer's claim is made from the template by kube-controller-manager's
	// resourceclaim controller; shared names the claim made above.
	for app, claim := range map[string]v1.PodResourceClaim{
		"trainer": {Name: "gpu", ResourceClaimTemplateName: ptr.To("gpu")},
		"shared":  {Name: "gpu", ResourceClaimName: ptr.To("gpu")},
	} {
		spec := e.podSpec(schedulerName, resources("1", "1Gi"))
		spec.ResourceClaims = []v1.PodResourceClaim{claim}
		spec.Containers[0].Resources.Claims = []v1.ResourceClaim{{Name: "gpu"}}
		sel := map[string]string{"app": app}
		rs := &appsv1.ReplicaSet{
			ObjectMeta: metav1.ObjectMeta{Name: app, Namespace: e.ns},
			Spec: appsv1.ReplicaSetSpec{
				Replicas: ptr.To[int32](1),
				Selector: &metav1.LabelSelector{MatchLabels: sel},
				Template: v1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: sel}, Spec: spec},
			},
		}
		if _, err := client.AppsV1().ReplicaSets(e.ns).Create(e.ctx, rs, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	claimOf := map[string]string{} // pod name: the claim it must be skipped for
	for _, app := range []string{"trainer", "shared"} {
		bound := e.boundPods(app, 1)[0]
		if bound.Spec.NodeName != gpuNode {
			t.Fatalf("%s is on %s, want on %s, the only node with GPUs", bound.Name, bound.Spec.NodeName, gpuNode)
		}
		claimOf[bound.Name] = e.ns + "/gpu"
		if app == "trainer" {
			e.poll("trainer's claim recorded in its status", func() (bool, error) {
				p, err := client.CoreV1().Pods(e.ns).Get(e.ctx, bound.Name, metav1.GetOptions{})
				if err != nil || len(p.Status.ResourceClaimStatuses) == 0 || p.Status.ResourceClaimStatuses[0].ResourceClaimName == nil {
					return false, err
				}
				claimOf[bound.Name] = e.ns + "/" + *p.Status.ResourceClaimStatuses[0].ResourceClaimName
				return true, nil
			})
		}
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
	for _, want := range []string{"kind: DeviceClass", "name: " + class, "kind: ResourceSlice", "name: " + slice, "kind: ResourceClaim", "kind: ResourceClaimTemplate", "device: gpu-0", "device: gpu-1"} {
		if !strings.Contains(string(data), want) {
			t.Errorf("the capture lacks %q", want)
		}
	}

	for _, source := range [][]string{{"--kubeconfig", kubeconfig}, {"--snapshot", file}} {
		p, out := planJSON(t, ctx, source...)
		for _, m := range p.Moves {
			if _, ok := claimOf[m.Pod]; ok && m.Namespace == e.ns {
				t.Errorf("%s: %s moved %s -> %s; its GPU is on its node", source[0], m.Pod, m.Source, m.Target)
			}
		}
		for name, claim := range claimOf {
			skipped := 0
			for _, s := range p.Skipped {
				if s.Pod != e.ns+"/"+name {
					continue
				}
				skipped++
				if s.Reason != plan.ReasonClaim || !strings.Contains(s.Detail, "ResourceClaim "+claim) {
					t.Errorf("%s: %s skipped as %s: %s; want %s naming %s", source[0], name, s.Reason, s.Detail, plan.ReasonClaim, claim)
				}
			}
			if skipped == 0 {
				t.Errorf("%s: %s is not skipped off the tainted node; plan: %s", source[0], name, out)
			}
		}
	}
}
