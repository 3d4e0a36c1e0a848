package openb

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/rebalancer-dev/rebalancer/pkg/snapshot"
)

// GPUs as DRA devices (Options.DRA): each GPU node publishes its GPUs in a
// ResourceSlice of driver GPUDriver, each with the node's model as its
// productName attribute, and a pod asks for its num_gpu GPUs through a
// ResourceClaimTemplate (one per count and model list), which selects the
// models its gpu_spec allows. The device class GPUDriver takes every device
// of the driver.
const (
	// GPUDriver is the DRA driver, and the DeviceClass, of the GPUs.
	GPUDriver = "gpu.nvidia.com"
	// gpuClaim is the name of a pod's GPU claim, in its spec.
	gpuClaim = "gpu"
)

// gpuSlice is node's ResourceSlice: one device per GPU.
func gpuSlice(n Node) *resourceapi.ResourceSlice {
	s := &resourceapi.ResourceSlice{
		ObjectMeta: metav1.ObjectMeta{Name: n.Name + "-" + GPUDriver, UID: types.UID("openb-slice-" + n.Name), CreationTimestamp: metav1.NewTime(start)},
		Spec: resourceapi.ResourceSliceSpec{
			Driver:   GPUDriver,
			NodeName: ptr.To(n.Name),
			Pool:     resourceapi.ResourcePool{Name: n.Name, Generation: 1, ResourceSliceCount: 1},
		},
	}
	for i := range n.GPUs {
		d := resourceapi.Device{Name: "gpu-" + strconv.FormatInt(i, 10)}
		if n.GPUModel != "" {
			d.Attributes = map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{"productName": {StringValue: ptr.To(n.GPUModel)}}
		}
		s.Spec.Devices = append(s.Spec.Devices, d)
	}
	return s
}

func gpuClass() *resourceapi.DeviceClass {
	return &resourceapi.DeviceClass{
		ObjectMeta: metav1.ObjectMeta{Name: GPUDriver, UID: "openb-deviceclass", CreationTimestamp: metav1.NewTime(start)},
		Spec: resourceapi.DeviceClassSpec{Selectors: []resourceapi.DeviceSelector{{
			CEL: &resourceapi.CELDeviceSelector{Expression: fmt.Sprintf("device.driver == %q", GPUDriver)},
		}}},
	}
}

// gpuTemplateName is the template a pod asking for count GPUs of models
// (any when empty) takes its claim from.
func gpuTemplateName(count int64, models []string) string {
	name := "gpu-" + strconv.FormatInt(count, 10)
	for _, m := range models {
		name += "-" + strings.ToLower(m)
	}
	return name
}

func gpuTemplate(count int64, models []string) *resourceapi.ResourceClaimTemplate {
	req := &resourceapi.ExactDeviceRequest{DeviceClassName: GPUDriver, AllocationMode: resourceapi.DeviceAllocationModeExactCount, Count: count}
	if len(models) > 0 {
		quoted := make([]string, len(models))
		for i, m := range models {
			quoted[i] = strconv.Quote(m)
		}
		req.Selectors = []resourceapi.DeviceSelector{{CEL: &resourceapi.CELDeviceSelector{
			Expression: fmt.Sprintf("device.attributes[%q].productName in [%s]", GPUDriver, strings.Join(quoted, ", ")),
		}}}
	}
	name := gpuTemplateName(count, models)
	return &resourceapi.ResourceClaimTemplate{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: Namespace, UID: types.UID("openb-template-" + name), CreationTimestamp: metav1.NewTime(start)},
		Spec: resourceapi.ResourceClaimTemplateSpec{Spec: resourceapi.ResourceClaimSpec{
			Devices: resourceapi.DeviceClaim{Requests: []resourceapi.DeviceRequest{{Name: gpuClaim, Exactly: req}}},
		}},
	}
}

// addDevices puts the GPUs of nodes and the claim templates pods ask for
// in snap, as DRA objects.
func addDevices(snap *snapshot.Snapshot, nodes []Node, pods []Pod) {
	snap.DeviceClasses = append(snap.DeviceClasses, gpuClass())
	for _, n := range nodes {
		if n.GPUs > 0 {
			snap.ResourceSlices = append(snap.ResourceSlices, gpuSlice(n))
		}
	}
	seen := map[string]bool{}
	for _, p := range pods {
		if p.GPUs == 0 {
			continue
		}
		if name := gpuTemplateName(p.GPUs, p.GPUModels); !seen[name] {
			seen[name] = true
			snap.ResourceClaimTemplates = append(snap.ResourceClaimTemplates, gpuTemplate(p.GPUs, p.GPUModels))
		}
	}
	slices.SortFunc(snap.ResourceClaimTemplates, func(a, b *resourceapi.ResourceClaimTemplate) int { return strings.Compare(a.Name, b.Name) })
}

// claimGPUs makes pod ask for p's GPUs through a claim from its template
// rather than as an extended resource; the template selects the models, so
// the pod has no node affinity for them.
func claimGPUs(pod *v1.Pod, p Pod) {
	c := &pod.Spec.Containers[0]
	delete(c.Resources.Requests, GPUResource)
	delete(c.Resources.Limits, GPUResource)
	if len(c.Resources.Limits) == 0 {
		c.Resources.Limits = nil
	}
	c.Resources.Claims = []v1.ResourceClaim{{Name: gpuClaim}}
	pod.Spec.ResourceClaims = []v1.PodResourceClaim{{Name: gpuClaim, ResourceClaimTemplateName: ptr.To(gpuTemplateName(p.GPUs, p.GPUModels))}}
	pod.Spec.Affinity = nil
}
