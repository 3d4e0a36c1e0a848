// Package claims is the one place that knows which of a pod's
// ResourceClaims (Dynamic Resource Allocation) keep it where it is: the
// claims its spec names, the claim kube-scheduler made for extended
// resources that devices back, and claims sharing a device's capacity. A
// claim made for the pod from a template (its status names it, once the
// resourceclaim controller made it) is the pod's own: its replacement gets
// a fresh one.
package claims

import (
	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
)

// Generated is the name of the claim made for the pod's claim entry from
// its template, as the pod's status records it; "" when none is recorded.
func Generated(pod *v1.Pod, entry string) string {
	for _, s := range pod.Status.ResourceClaimStatuses {
		if s.Name == entry && s.ResourceClaimName != nil {
			return *s.ResourceClaimName
		}
	}
	return ""
}

// Pinned lists the claims that keep pod on its node, as Of names them: a
// claim it names (others may share it, and its devices stay allocated
// where they are), the claim kube-scheduler made for extended resources
// that devices back, and a claim made from a template whose devices are
// shared by consumed capacity. A replacement gets fresh claims from the
// pod's other templates. nil when the pod may move.
func Pinned(pod *v1.Pod, allocated func(namespace, name string) *resourceapi.ResourceClaim) []string {
	var out []string
	for _, c := range pod.Spec.ResourceClaims {
		switch {
		case c.ResourceClaimName != nil:
			out = append(out, pod.Namespace+"/"+*c.ResourceClaimName)
		case c.ResourceClaimTemplateName != nil:
			name := Generated(pod, c.Name)
			if name == "" {
				continue
			}
			if claim := allocated(pod.Namespace, name); claim != nil && consumesCapacity(claim) {
				out = append(out, pod.Namespace+"/"+name)
			}
		}
	}
	if s := pod.Status.ExtendedResourceClaimStatus; s != nil && s.ResourceClaimName != "" {
		out = append(out, pod.Namespace+"/"+s.ResourceClaimName)
	}
	return out
}

// consumesCapacity says whether the claim's allocation shares a device by
// consumed capacity, which the simulation does not give back.
func consumesCapacity(claim *resourceapi.ResourceClaim) bool {
	if claim.Status.Allocation == nil {
		return false
	}
	for _, r := range claim.Status.Allocation.Devices.Results {
		if r.ShareID != nil || len(r.ConsumedCapacity) > 0 {
			return true
		}
	}
	return false
}
