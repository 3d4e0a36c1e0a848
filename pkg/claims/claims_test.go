package claims

import (
	"slices"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
)

func TestOf(t *testing.T) {
	pod := func(spec []v1.PodResourceClaim, status []v1.PodResourceClaimStatus, ext *v1.PodExtendedResourceClaimStatus) *v1.Pod {
		p := &v1.Pod{}
		p.Namespace = "ml"
		p.Spec.ResourceClaims = spec
		p.Status.ResourceClaimStatuses = status
		p.Status.ExtendedResourceClaimStatus = ext
		return p
	}
	for _, c := range []struct {
		name string
		pod  *v1.Pod
		want []string
	}{
		{"no claims", pod(nil, nil, nil), nil},
		{"a claim by name", pod([]v1.PodResourceClaim{{Name: "gpu", ResourceClaimName: ptr.To("shared-gpu")}}, nil, nil), []string{"ml/shared-gpu"}},
		{"a claim made from a template", pod(
			[]v1.PodResourceClaim{{Name: "gpu", ResourceClaimTemplateName: ptr.To("gpu")}},
			[]v1.PodResourceClaimStatus{{Name: "gpu", ResourceClaimName: ptr.To("trainer-0-gpu-x7k2p")}}, nil),
			[]string{"ml/trainer-0-gpu-x7k2p"}},
		{"a template whose claim is not made yet", pod([]v1.PodResourceClaim{{Name: "gpu", ResourceClaimTemplateName: ptr.To("gpu")}}, nil, nil), []string{"template ml/gpu"}},
		{"both, and extended resources backed by devices", pod(
			[]v1.PodResourceClaim{{Name: "a", ResourceClaimTemplateName: ptr.To("gpu")}, {Name: "b", ResourceClaimName: ptr.To("nic")}},
			[]v1.PodResourceClaimStatus{{Name: "b", ResourceClaimName: ptr.To("ignored")}, {Name: "a", ResourceClaimName: ptr.To("p-a-1")}},
			&v1.PodExtendedResourceClaimStatus{ResourceClaimName: "p-extended-resources"}),
			[]string{"ml/p-a-1", "ml/nic", "ml/p-extended-resources"}},
	} {
		if got := Of(c.pod); !slices.Equal(got, c.want) {
			t.Errorf("%s: %q, want %q", c.name, got, c.want)
		}
	}
}
