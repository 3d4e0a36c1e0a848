// Package claims is the one place that knows which of a pod's
// ResourceClaims (Dynamic Resource Allocation) keep it where it is: the
// claims its spec names and the claim kube-scheduler made for extended
// resources that devices back. A claim made for the pod from a template
// (its status names it, once the resourceclaim controller made it) is the
// pod's own, a share of a device's capacity included: its replacement gets
// a fresh one.
package claims

import (
	v1 "k8s.io/api/core/v1"
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
// where they are) and the claim kube-scheduler made for extended resources
// that devices back. A replacement gets fresh claims from the pod's
// templates (a share of a device's capacity included: the share is given
// back where the pod leaves). nil when the pod may move.
func Pinned(pod *v1.Pod) []string {
	var out []string
	for _, c := range pod.Spec.ResourceClaims {
		if c.ResourceClaimName != nil {
			out = append(out, pod.Namespace+"/"+*c.ResourceClaimName)
		}
	}
	if s := pod.Status.ExtendedResourceClaimStatus; s != nil && s.ResourceClaimName != "" {
		out = append(out, pod.Namespace+"/"+s.ResourceClaimName)
	}
	return out
}
