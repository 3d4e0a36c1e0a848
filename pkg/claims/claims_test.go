package claims

import (
	"slices"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
)

func TestPinned(t *testing.T) {
	pod := func(spec []v1.PodResourceClaim, status []v1.PodResourceClaimStatus, ext *v1.PodExtendedResourceClaimStatus) *v1.Pod {
		p := &v1.Pod{}
		p.Namespace = "ml"
		p.Spec.ResourceClaims = spec
		p.Status.ResourceClaimStatuses = status
		p.Status.ExtendedResourceClaimStatus = ext
		return p
	}
	fromTemplate := func(made string) *v1.Pod {
		return pod([]v1.PodResourceClaim{{Name: "gpu", ResourceClaimTemplateName: ptr.To("gpu")}},
			[]v1.PodResourceClaimStatus{{Name: "gpu", ResourceClaimName: ptr.To(made)}}, nil)
	}
	for _, c := range []struct {
		name string
		pod  *v1.Pod
		want []string
	}{
		{"no claims", pod(nil, nil, nil), nil},
		{"a claim by name", pod([]v1.PodResourceClaim{{Name: "gpu", ResourceClaimName: ptr.To("shared-gpu")}}, nil, nil), []string{"ml/shared-gpu"}},
		{"its own claim, from a template", fromTemplate("own"), nil},
		{"a template whose claim is not made yet", pod([]v1.PodResourceClaim{{Name: "gpu", ResourceClaimTemplateName: ptr.To("gpu")}}, nil, nil), nil},
		{"its own claim, sharing a device's capacity", fromTemplate("sharing"), nil},
		{"both, and extended resources backed by devices", pod(
			[]v1.PodResourceClaim{{Name: "a", ResourceClaimTemplateName: ptr.To("gpu")}, {Name: "b", ResourceClaimName: ptr.To("nic")}},
			[]v1.PodResourceClaimStatus{{Name: "a", ResourceClaimName: ptr.To("own")}},
			&v1.PodExtendedResourceClaimStatus{ResourceClaimName: "p-extended-resources"}),
			[]string{"ml/nic", "ml/p-extended-resources"}},
	} {
		if got := Pinned(c.pod); !slices.Equal(got, c.want) {
			t.Errorf("%s: %q, want %q", c.name, got, c.want)
		}
	}
	if got := Generated(fromTemplate("own"), "gpu"); got != "own" {
		t.Errorf("Generated = %q, want own", got)
	}
}
