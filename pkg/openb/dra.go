package openb

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/google/uuid"
	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
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

// gpuMilli is the capacity of a GPU that pods sharing it consume.
const gpuMilli resourceapi.QualifiedName = "milli"

// gpuSlice is node's ResourceSlice: one device per GPU; with sharing, each
// may be allocated to several claims, up to its 1000 milli.
func gpuSlice(n Node, sharing bool) *resourceapi.ResourceSlice {
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
		if sharing {
			d.AllowMultipleAllocations = ptr.To(true)
			d.Capacity = map[resourceapi.QualifiedName]resourceapi.DeviceCapacity{gpuMilli: {Value: *resource.NewQuantity(1000, resource.DecimalSI)}}
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
// (any when empty), or for milli of each when it shares them (milli under
// 1000), takes its claim from.
func gpuTemplateName(count, milli int64, models []string) string {
	name := "gpu-" + strconv.FormatInt(count, 10)
	if milli < 1000 {
		name += "-m" + strconv.FormatInt(milli, 10)
	}
	for _, m := range models {
		name += "-" + strings.ToLower(m)
	}
	return name
}

func gpuTemplate(count, milli int64, models []string) *resourceapi.ResourceClaimTemplate {
	req := &resourceapi.ExactDeviceRequest{DeviceClassName: GPUDriver, AllocationMode: resourceapi.DeviceAllocationModeExactCount, Count: count}
	if milli < 1000 {
		req.Capacity = &resourceapi.CapacityRequirements{Requests: map[resourceapi.QualifiedName]resource.Quantity{gpuMilli: *resource.NewQuantity(milli, resource.DecimalSI)}}
	}
	if len(models) > 0 {
		quoted := make([]string, len(models))
		for i, m := range models {
			quoted[i] = strconv.Quote(m)
		}
		req.Selectors = []resourceapi.DeviceSelector{{CEL: &resourceapi.CELDeviceSelector{
			Expression: fmt.Sprintf("device.attributes[%q].productName in [%s]", GPUDriver, strings.Join(quoted, ", ")),
		}}}
	}
	name := gpuTemplateName(count, milli, models)
	return &resourceapi.ResourceClaimTemplate{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: Namespace, UID: types.UID("openb-template-" + name), CreationTimestamp: metav1.NewTime(start)},
		Spec: resourceapi.ResourceClaimTemplateSpec{Spec: resourceapi.ResourceClaimSpec{
			Devices: resourceapi.DeviceClaim{Requests: []resourceapi.DeviceRequest{{Name: gpuClaim, Exactly: req}}},
		}},
	}
}

// addDevices puts the GPUs of nodes and the claim templates pods ask for
// in snap, as DRA objects; with sharing, GPUs may be shared (gpuSlice).
func addDevices(snap *snapshot.Snapshot, nodes []Node, pods []Pod, sharing bool) {
	snap.DeviceClasses = append(snap.DeviceClasses, gpuClass())
	for _, n := range nodes {
		if n.GPUs > 0 {
			snap.ResourceSlices = append(snap.ResourceSlices, gpuSlice(n, sharing))
		}
	}
	seen := map[string]bool{}
	for _, p := range pods {
		if p.GPUs == 0 {
			continue
		}
		milli := sharedMilli(p, sharing)
		if name := gpuTemplateName(p.GPUs, milli, p.GPUModels); !seen[name] {
			seen[name] = true
			snap.ResourceClaimTemplates = append(snap.ResourceClaimTemplates, gpuTemplate(p.GPUs, milli, p.GPUModels))
		}
	}
	slices.SortFunc(snap.ResourceClaimTemplates, func(a, b *resourceapi.ResourceClaimTemplate) int { return strings.Compare(a.Name, b.Name) })
}

// sharedMilli is what p asks for of each GPU: its gpu_milli when GPUs are
// shared, else all of one (1000).
func sharedMilli(p Pod, sharing bool) int64 {
	if sharing {
		return p.GPUMilli
	}
	return 1000
}

// claimGPUs makes pod ask for p's GPUs through a claim from its template
// rather than as an extended resource; the template selects the models, so
// the pod has no node affinity for them.
func claimGPUs(pod *v1.Pod, p Pod, sharing bool) {
	c := &pod.Spec.Containers[0]
	c.Resources.Claims = []v1.ResourceClaim{{Name: gpuClaim}}
	pod.Spec.ResourceClaims = []v1.PodResourceClaim{{Name: gpuClaim, ResourceClaimTemplateName: ptr.To(gpuTemplateName(p.GPUs, sharedMilli(p, sharing), p.GPUModels))}}
	pod.Spec.Affinity = nil
}

// stableShares is claim with each share of a device named after the claim
// and the result, not by the random UUID kube-scheduler's allocator draws:
// the same trace then imports to the same file. A claim's results are its
// own, so the names stay unique on every device.
func stableShares(claim *resourceapi.ResourceClaim) *resourceapi.ResourceClaim {
	if claim.Status.Allocation == nil {
		return claim
	}
	c := claim.DeepCopy()
	for i := range c.Status.Allocation.Devices.Results {
		r := &c.Status.Allocation.Devices.Results[i]
		if r.ShareID != nil {
			id := types.UID(uuid.NewSHA1(uuid.NameSpaceURL, []byte(fmt.Sprintf("openb:%s/%d", c.UID, i))).String())
			r.ShareID = &id
		}
	}
	return c
}
