// Package requests is a pod's resource requests as kube-scheduler counts
// them on a node: init containers, sidecars, overhead and pod-level
// resources included, and, while a pod is resized in place, the larger of
// what its spec asks and what its node has allocated or its containers
// report (max(spec, allocated, status)). rebalancer's measures, packing and
// promised room use it, so they agree with the framework's own Filter.
package requests

import (
	"cmp"
	"slices"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	resourcehelper "k8s.io/component-helpers/resource"
	fwk "k8s.io/kube-scheduler/framework"
	v1helper "k8s.io/kubernetes/pkg/apis/core/v1/helper"
	"k8s.io/kubernetes/pkg/features"
)

// Of returns pod's requests with the options kube-scheduler's NodeInfo
// uses, under the process's feature gates.
func Of(pod *v1.Pod) v1.ResourceList {
	return resourcehelper.PodRequests(pod, resourcehelper.PodResourcesOptions{
		UseStatusResources: utilfeature.DefaultFeatureGate.Enabled(features.InPlacePodVerticalScaling),
		InPlacePodLevelResourcesVerticalScalingEnabled: utilfeature.DefaultMutableFeatureGate.Enabled(features.InPlacePodLevelResourcesVerticalScaling),
		SkipPodLevelResources:                          !utilfeature.DefaultFeatureGate.Enabled(features.PodLevelResources),
		UseDRANodeAllocatableResourceClaimStatus:       utilfeature.DefaultFeatureGate.Enabled(features.DRANodeAllocatableResources),
	})
}

// Schedulable says whether a resource is one a node's allocatable holds and
// the scheduler's resource fit counts: cpu, memory, ephemeral-storage, pods,
// hugepages-<size> or an extended resource (a domain-qualified name).
func Schedulable(r v1.ResourceName) bool {
	switch r {
	case v1.ResourceCPU, v1.ResourceMemory, v1.ResourceEphemeralStorage, v1.ResourcePods:
		return true
	}
	return v1helper.IsHugePageResourceName(r) || v1helper.IsExtendedResourceName(r)
}

// Units is q in the units kube-scheduler counts r in on a node:
// millicores for CPU, whole units for everything else.
func Units(r v1.ResourceName, q resource.Quantity) int64 {
	if r == v1.ResourceCPU {
		return q.MilliValue()
	}
	return q.Value()
}

// OnNode is how much of r the node's pods request and how much the node
// has, in Units (pods: the pods it runs and its pod slots), as
// NodeResourcesFit reads them from its NodeInfo.
func OnNode(ni fwk.NodeInfo, r v1.ResourceName) (requested, allocatable int64) {
	if r == v1.ResourcePods {
		return int64(len(ni.GetPods())), int64(ni.GetAllocatable().GetAllowedPodNumber())
	}
	return Amount(ni.GetRequested(), r), Amount(ni.GetAllocatable(), r)
}

// Amount is how much of r res holds as kube-scheduler keeps it, in Units
// (pods: its pod slots).
func Amount(res fwk.Resource, r v1.ResourceName) int64 {
	switch r {
	case v1.ResourceCPU:
		return res.GetMilliCPU()
	case v1.ResourceMemory:
		return res.GetMemory()
	case v1.ResourceEphemeralStorage:
		return res.GetEphemeralStorage()
	case v1.ResourcePods:
		return int64(res.GetAllowedPodNumber())
	}
	return res.GetScalarResources()[r]
}

// BiggestFirst sorts pods by how much they ask for, biggest first, stably:
// millicores × 1024 plus MiB of memory, of the requests of gives (Of, or a
// memo of it), computed once a pod rather than once a comparison.
func BiggestFirst(pods []*v1.Pod, of func(*v1.Pod) v1.ResourceList) {
	size := make(map[*v1.Pod]int64, len(pods))
	for _, p := range pods {
		r := of(p)
		size[p] = r.Cpu().MilliValue()*1024 + r.Memory().Value()/(1<<20)
	}
	slices.SortStableFunc(pods, func(a, b *v1.Pod) int { return cmp.Compare(size[b], size[a]) })
}
