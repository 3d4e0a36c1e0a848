package makeroom

import (
	"encoding/json"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// podShape is what decides where a pod fits, as the simulated scheduler
// profiles see it: its requests and everything a filter or a score
// plugin reads of it (its own labels, as pod affinity and topology spread
// select pods by them; its namespace; its owners, by which rebalance
// hints hold room; its scheduler, priority, node selector, affinity,
// tolerations, spread constraints, runtime class and overhead, host ports
// and volumes). Annotations are in too: no plugin reads a pending pod's,
// but one template gives its pods the same ones, so that costs little.
// Left out are only a pod's identity (name, UID) and the names it gives
// its containers and volumes.
type podShape struct {
	Namespace        string                        `json:"ns,omitempty"`
	Labels           map[string]string             `json:"labels,omitempty"`
	Annotations      map[string]string             `json:"annotations,omitempty"`
	Owners           []metav1.OwnerReference       `json:"owners,omitempty"`
	Requests         v1.ResourceList               `json:"requests,omitempty"`
	SchedulerName    string                        `json:"scheduler,omitempty"`
	Priority         *int32                        `json:"priority,omitempty"`
	NodeName         string                        `json:"nodeName,omitempty"`
	NodeSelector     map[string]string             `json:"nodeSelector,omitempty"`
	Affinity         *v1.Affinity                  `json:"affinity,omitempty"`
	Tolerations      []v1.Toleration               `json:"tolerations,omitempty"`
	Spread           []v1.TopologySpreadConstraint `json:"spread,omitempty"`
	RuntimeClassName *string                       `json:"runtimeClass,omitempty"`
	Overhead         v1.ResourceList               `json:"overhead,omitempty"`
	Resources        *v1.ResourceRequirements      `json:"resources,omitempty"`
	HostNetwork      bool                          `json:"hostNetwork,omitempty"`
	OS               *v1.PodOS                     `json:"os,omitempty"`
	SchedulingGates  []v1.PodSchedulingGate        `json:"gates,omitempty"`
	Containers       []containerShape              `json:"containers,omitempty"`
	InitContainers   []containerShape              `json:"init,omitempty"`
	Volumes          []v1.VolumeSource             `json:"volumes,omitempty"`
}

type containerShape struct {
	Resources     v1.ResourceRequirements    `json:"resources"`
	Ports         []v1.ContainerPort         `json:"ports,omitempty"`
	RestartPolicy *v1.ContainerRestartPolicy `json:"restartPolicy,omitempty"`
}

// shapeOf is pod's shape as a comparable key; "" for a pod whose fit also
// depends on objects of its own, which another pod does not share: its
// ResourceClaims (DRA), or PVCs made for it from generic ephemeral
// volumes. requests is its requests as the plugin counts them.
func shapeOf(pod *v1.Pod, requests v1.ResourceList) string {
	if len(pod.Spec.ResourceClaims) > 0 {
		return ""
	}
	s := podShape{
		Namespace: pod.Namespace, Labels: pod.Labels, Annotations: pod.Annotations, Owners: pod.OwnerReferences,
		Requests:      requests,
		SchedulerName: pod.Spec.SchedulerName, Priority: pod.Spec.Priority, NodeName: pod.Spec.NodeName,
		NodeSelector: pod.Spec.NodeSelector, Affinity: pod.Spec.Affinity, Tolerations: pod.Spec.Tolerations,
		Spread: pod.Spec.TopologySpreadConstraints, RuntimeClassName: pod.Spec.RuntimeClassName,
		Overhead: pod.Spec.Overhead, Resources: pod.Spec.Resources, HostNetwork: pod.Spec.HostNetwork,
		OS: pod.Spec.OS, SchedulingGates: pod.Spec.SchedulingGates,
	}
	for _, c := range pod.Spec.Containers {
		s.Containers = append(s.Containers, containerShape{Resources: c.Resources, Ports: c.Ports, RestartPolicy: c.RestartPolicy})
	}
	for _, c := range pod.Spec.InitContainers {
		s.InitContainers = append(s.InitContainers, containerShape{Resources: c.Resources, Ports: c.Ports, RestartPolicy: c.RestartPolicy})
	}
	for _, v := range pod.Spec.Volumes {
		if v.Ephemeral != nil {
			return ""
		}
		s.Volumes = append(s.Volumes, v.VolumeSource)
	}
	b, err := json.Marshal(s)
	if err != nil {
		return ""
	}
	return string(b)
}
