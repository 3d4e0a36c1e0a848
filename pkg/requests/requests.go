// Package requests is a pod's resource requests as kube-scheduler counts
// them on a node: init containers, sidecars, overhead and pod-level
// resources included, and, while a pod is resized in place, the larger of
// what its spec asks and what its node has allocated or its containers
// report (max(spec, allocated, status)). rebalancer's measures, packing and
// promised room use it, so they agree with the framework's own Filter.
package requests

import (
	v1 "k8s.io/api/core/v1"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	resourcehelper "k8s.io/component-helpers/resource"
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
