package planner

import (
	"context"
	"slices"

	v1 "k8s.io/api/core/v1"
	"sigs.k8s.io/descheduler/pkg/framework/plugins/removepodsviolatinginterpodantiaffinity"
	frameworktypes "sigs.k8s.io/descheduler/pkg/framework/types"
)

// idle stands for a deschedule plugin that can ask for no eviction in the
// cluster, so it is not run: RemovePodsViolatingInterPodAntiAffinity sorts
// every node's pods before it looks for a pod with anti-affinity, seconds
// at 150,000 pods, and evicts only such pods.
type idle struct {
	frameworktypes.DeschedulePlugin
}

func (idle) Deschedule(context.Context, []*v1.Node) *frameworktypes.Status { return nil }

// nothingToEvict says whether plugin name surely asks for no eviction of
// pods, which are every pod of the cluster: only a pod with required
// inter-pod anti-affinity can violate it.
func nothingToEvict(name string, pods []*v1.Pod) bool {
	if name != removepodsviolatinginterpodantiaffinity.PluginName {
		return false
	}
	return !slices.ContainsFunc(pods, func(p *v1.Pod) bool {
		a := p.Spec.Affinity
		return a != nil && a.PodAntiAffinity != nil && len(a.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution) > 0
	})
}
