package live

import (
	"strings"
	"testing"

	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/utils/ptr"
)

// TestClusterRefusesADeviceAllocatedTwice: a cluster whose ResourceClaims
// hold one device twice, whole, is refused as a snapshot file with them
// is, the error naming both claims and the device: a plan would count one
// device for two pods. A second claim granted the device for admin access
// holds nothing, and the cluster is read.
func TestClusterRefusesADeviceAllocatedTwice(t *testing.T) {
	held := func(name string, admin bool) *resourcev1.ResourceClaim {
		c := &resourcev1.ResourceClaim{ObjectMeta: objectMetaOf("ml", name)}
		c.Status.Allocation = &resourcev1.AllocationResult{Devices: resourcev1.DeviceAllocationResult{
			Results: []resourcev1.DeviceRequestAllocationResult{{Request: "gpu", Driver: "gpu.example.com", Pool: "n1", Device: "gpu-0"}},
		}}
		if admin {
			c.Status.Allocation.Devices.Results[0].AdminAccess = ptr.To(true)
		}
		return c
	}
	for _, admin := range []bool{false, true} {
		client := fake.NewClientset(liveNode("n1"), held("trainer-0-gpu", false), held("trainer-1-gpu", admin))
		client.Resources = []*metav1.APIResourceList{{GroupVersion: resourcev1.SchemeGroupVersion.String()}}
		snap, _, err := startCluster(t, client).Snapshot()
		if admin {
			if err != nil {
				t.Errorf("with admin access: %v", err)
			}
			continue
		}
		if err == nil {
			t.Fatalf("read %s, want an error", snap)
		}
		for _, w := range []string{"ResourceClaim ml/trainer-1-gpu", "ResourceClaim ml/trainer-0-gpu", "gpu.example.com/n1/gpu-0"} {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("error does not say %q: %v", w, err)
			}
		}
	}
}
