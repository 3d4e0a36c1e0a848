package optout_test

import (
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/rebalancer-dev/rebalancer/pkg/optout"
)

// TestAnnotationKeys: the keys are cluster-autoscaler's and Karpenter's,
// spelt as those projects spell them; a typo would silently stop honouring
// them. rebalancer's own is spelt out in the cases below.
func TestAnnotationKeys(t *testing.T) {
	for _, tc := range []struct{ got, want string }{
		{optout.SafeToEvict, "cluster-autoscaler.kubernetes.io/safe-to-evict"},
		{optout.ScaleDownDisabled, "cluster-autoscaler.kubernetes.io/scale-down-disabled"},
		{optout.KarpenterDoNotDisrupt, "karpenter.sh/do-not-disrupt"},
	} {
		if tc.got != tc.want {
			t.Errorf("key %q, want %q", tc.got, tc.want)
		}
	}
}

func TestPod(t *testing.T) {
	for _, tc := range []struct {
		name        string
		annotations map[string]string
		want        string
	}{
		{"no annotations", nil, ""},
		{"unrelated annotation", map[string]string{"example.com/keep": "true"}, ""},
		{"safe-to-evict false", map[string]string{optout.SafeToEvict: "false"}, optout.SafeToEvict + "=false"},
		{"safe-to-evict true", map[string]string{optout.SafeToEvict: "true"}, ""},
		{"safe-to-evict empty", map[string]string{optout.SafeToEvict: ""}, ""},
		{"karpenter do-not-disrupt", map[string]string{optout.KarpenterDoNotDisrupt: "true"}, optout.KarpenterDoNotDisrupt + "=true"},
		{"karpenter do-not-disrupt false", map[string]string{optout.KarpenterDoNotDisrupt: "false"}, ""},
		{"rebalancer do-not-disrupt", map[string]string{"rebalancer.dev/do-not-disrupt": "true"}, "rebalancer.dev/do-not-disrupt=true"},
		{"rebalancer do-not-disrupt false", map[string]string{"rebalancer.dev/do-not-disrupt": "false"}, ""},
		// Values compare exactly, as cluster-autoscaler and Karpenter compare them.
		{"karpenter True", map[string]string{optout.KarpenterDoNotDisrupt: "True"}, ""},
		{"safe-to-evict FALSE", map[string]string{optout.SafeToEvict: "FALSE"}, ""},
		// A node's annotation on a pod means nothing.
		{"scale-down-disabled on a pod", map[string]string{optout.ScaleDownDisabled: "true"}, ""},
		// Several: the first rule wins, whatever the map's order.
		{"all three", map[string]string{
			optout.SafeToEvict:              "false",
			optout.KarpenterDoNotDisrupt:    "true",
			"rebalancer.dev/do-not-disrupt": "true",
		}, optout.SafeToEvict + "=false"},
		{"karpenter and rebalancer", map[string]string{
			optout.KarpenterDoNotDisrupt:    "true",
			"rebalancer.dev/do-not-disrupt": "true",
		}, optout.KarpenterDoNotDisrupt + "=true"},
		{"a later rule when an earlier does not opt out", map[string]string{
			optout.SafeToEvict:              "true",
			"rebalancer.dev/do-not-disrupt": "true",
		}, "rebalancer.dev/do-not-disrupt=true"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", Annotations: tc.annotations}}
			// Repeated: a map's order varies from one range to the next.
			for range 20 {
				if got := optout.Pod(pod); got != tc.want {
					t.Fatalf("Pod() = %q, want %q", got, tc.want)
				}
			}
		})
	}
}

func TestNode(t *testing.T) {
	if got := optout.Pod(nil); got != "" {
		t.Errorf("optout.Pod(nil) = %q, want \"\"", got)
	}
	if got := optout.Node(nil); got != "" {
		t.Errorf("optout.Node(nil) = %q, want \"\"", got)
	}
	for _, tc := range []struct {
		name        string
		annotations map[string]string
		want        string
	}{
		{"no annotations", nil, ""},
		{"scale-down-disabled", map[string]string{optout.ScaleDownDisabled: "true"}, optout.ScaleDownDisabled + "=true"},
		{"scale-down-disabled false", map[string]string{optout.ScaleDownDisabled: "false"}, ""},
		{"karpenter do-not-disrupt", map[string]string{optout.KarpenterDoNotDisrupt: "true"}, optout.KarpenterDoNotDisrupt + "=true"},
		{"rebalancer do-not-disrupt", map[string]string{"rebalancer.dev/do-not-disrupt": "true"}, "rebalancer.dev/do-not-disrupt=true"},
		{"karpenter TRUE", map[string]string{optout.KarpenterDoNotDisrupt: "TRUE"}, ""},
		// A pod's annotation on a node means nothing.
		{"safe-to-evict on a node", map[string]string{optout.SafeToEvict: "false"}, ""},
		{"all three", map[string]string{
			optout.ScaleDownDisabled:        "true",
			optout.KarpenterDoNotDisrupt:    "true",
			"rebalancer.dev/do-not-disrupt": "true",
		}, optout.ScaleDownDisabled + "=true"},
		{"karpenter and rebalancer", map[string]string{
			optout.KarpenterDoNotDisrupt:    "true",
			"rebalancer.dev/do-not-disrupt": "true",
		}, optout.KarpenterDoNotDisrupt + "=true"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			node := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", Annotations: tc.annotations}}
			for range 20 {
				if got := optout.Node(node); got != tc.want {
					t.Fatalf("Node() = %q, want %q", got, tc.want)
				}
			}
		})
	}
}
