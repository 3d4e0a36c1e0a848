// Package gang is the one place that knows how a pod says it belongs to a
// gang: a group of pods scheduled together, all or nothing, whose job
// often fails or restarts whole when one member goes. Kubernetes' own
// PodGroup (spec.schedulingGroup) and the labels and annotations of the
// common gang schedulers and batch systems are recognised.
package gang

import (
	v1 "k8s.io/api/core/v1"
)

// Keys on a pod that name its group.
const (
	// PodGroupLabel: scheduler-plugins' Coscheduling.
	PodGroupLabel = "scheduling.x-k8s.io/pod-group"
	// LegacyPodGroupLabel: Coscheduling before scheduling.x-k8s.io.
	LegacyPodGroupLabel = "pod-group.scheduling.sigs.k8s.io"
	// GroupNameAnnotation: Volcano's PodGroup.
	GroupNameAnnotation = "scheduling.k8s.io/group-name"
	// VolcanoGroupNameAnnotation: Volcano's PodGroup, its own key.
	VolcanoGroupNameAnnotation = "scheduling.volcano.sh/group-name"
	// KueuePodGroupLabel: Kueue's group of plain pods.
	KueuePodGroupLabel = "kueue.x-k8s.io/pod-group-name"
	// JobSetLabel: a JobSet's pods, which its failure policy restarts
	// together.
	JobSetLabel = "jobset.sigs.k8s.io/jobset-name"
)

var (
	labels      = []string{PodGroupLabel, LegacyPodGroupLabel, KueuePodGroupLabel, JobSetLabel}
	annotations = []string{GroupNameAnnotation, VolcanoGroupNameAnnotation}
)

// Name is the name of the group pod belongs to, as Of finds it, "" when
// it belongs to none. Groups are named within their namespace.
func Name(pod *v1.Pod) string {
	_, name := find(pod)
	return name
}

// Of says which group pod belongs to and how it says so ("label
// scheduling.x-k8s.io/pod-group=train"), "" when it belongs to none.
// A PodGroup's policy may be basic rather than gang; the snapshot does not
// hold PodGroups, so every member counts as a gang's.
func Of(pod *v1.Pod) string {
	how, name := find(pod)
	if name == "" {
		return ""
	}
	return how + name
}

// find returns how pod names its group, and the name.
func find(pod *v1.Pod) (how, name string) {
	if g := pod.Spec.SchedulingGroup; g != nil && g.PodGroupName != nil && *g.PodGroupName != "" {
		return "spec.schedulingGroup.podGroupName ", *g.PodGroupName
	}
	for _, k := range labels {
		if v := pod.Labels[k]; v != "" {
			return "label " + k + "=", v
		}
	}
	for _, k := range annotations {
		if v := pod.Annotations[k]; v != "" {
			return "annotation " + k + "=", v
		}
	}
	return "", ""
}
