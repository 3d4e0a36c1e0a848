// Package claims is the one place that knows which ResourceClaims (Dynamic
// Resource Allocation) a pod uses: the claims its spec names, the claims
// made for it from templates, which its status names once the
// resourceclaim controller created them, and the claim kube-scheduler made
// for extended resources that DRA devices back.
package claims

import (
	v1 "k8s.io/api/core/v1"
)

// Of lists the claims pod uses, as "namespace/name", in the order its spec
// lists them; a template whose claim has not been created yet is listed as
// "template namespace/name". nil for a pod without claims.
func Of(pod *v1.Pod) []string {
	var out []string
	for _, c := range pod.Spec.ResourceClaims {
		switch {
		case c.ResourceClaimName != nil:
			out = append(out, pod.Namespace+"/"+*c.ResourceClaimName)
		case c.ResourceClaimTemplateName != nil:
			if name := generated(pod, c.Name); name != "" {
				out = append(out, pod.Namespace+"/"+name)
			} else {
				out = append(out, "template "+pod.Namespace+"/"+*c.ResourceClaimTemplateName)
			}
		}
	}
	if s := pod.Status.ExtendedResourceClaimStatus; s != nil && s.ResourceClaimName != "" {
		out = append(out, pod.Namespace+"/"+s.ResourceClaimName)
	}
	return out
}

// generated is the name of the claim made for the pod's claim entry from
// its template, as the pod's status records it; "" when none is recorded.
func generated(pod *v1.Pod, entry string) string {
	for _, s := range pod.Status.ResourceClaimStatuses {
		if s.Name == entry && s.ResourceClaimName != nil {
			return *s.ResourceClaimName
		}
	}
	return ""
}
