package snapshot

import (
	"fmt"
	"strings"
	"testing"

	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
)

// withStatus is pod web-1 on n1 with status (indented as a pod's status
// fields) before its phase.
func withStatus(status string) string {
	return strings.Replace(pod("default", "web-1", "n1", "Running"), "  status:\n", "  status:\n"+status, 1)
}

// containerStatus is the status of container name reporting resources
// (indented as a container status' fields).
func containerStatus(name, resources string) string {
	return fmt.Sprintf("    - image: nginx\n      imageID: \"\"\n      name: %s\n      ready: true\n      restartCount: 0\n%s", name, resources)
}

// TestDecodeRefusesResizeStatusPastInt64: what the kubelet reports of a
// pod's resources since in-place resize (kube-scheduler counts the larger
// of each container's spec and status) is refused past int64 millicores,
// as the spec is, naming the field: a wrapped-around value would make the
// pod's node look nearly empty. Countable values pass.
func TestDecodeRefusesResizeStatusPastInt64(t *testing.T) {
	n1 := node("n1")
	for _, c := range []struct {
		name, status string
		want         []string // "" : decodes
	}{
		{"allocated to a container", "    containerStatuses:\n" + containerStatus("app", "      allocatedResources:\n        cpu: 1e16\n"),
			[]string{"(Pod default/web-1)", "status.containerStatuses[0].allocatedResources[cpu]", `"10P"`, "too large"}},
		{"a container runs with", "    containerStatuses:\n" + containerStatus("app", "      resources:\n        requests:\n          cpu: 1e16\n"),
			[]string{"(Pod default/web-1)", "status.containerStatuses[0].resources.requests[cpu]", "too large"}},
		{"a container's limit", "    containerStatuses:\n" + containerStatus("app", "      resources:\n        limits:\n          memory: 1e19\n"),
			[]string{"status.containerStatuses[0].resources.limits[memory]", "too large"}},
		{"allocated to an init container", "    initContainerStatuses:\n" + containerStatus("sidecar", "      allocatedResources:\n        cpu: 1e16\n"),
			[]string{"status.initContainerStatuses[0].allocatedResources[cpu]", "too large"}},
		{"allocated to the pod", "    allocatedResources:\n      cpu: 1e16\n",
			[]string{"status.allocatedResources[cpu]", "too large"}},
		{"the pod runs with", "    resources:\n      requests:\n        cpu: 1e16\n",
			[]string{"status.resources.requests[cpu]", "too large"}},
		{"large, but countable", "    containerStatuses:\n" + containerStatus("app", "      allocatedResources:\n        cpu: 9e15\n"),
			nil}, // the larger of the spec's 100m and 9e15, not their sum
		{"countable", "    containerStatuses:\n" + containerStatus("app", "      allocatedResources:\n        cpu: 200m\n      resources:\n        requests:\n          cpu: 200m\n"),
			nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			s, err := Decode("snap.yaml", []byte(list(n1, withStatus(c.status))))
			if c.want == nil {
				if err != nil {
					t.Fatalf("Decode: %v", err)
				}
				if len(s.Pods) != 1 {
					t.Fatalf("decoded %s", s)
				}
				return
			}
			if err == nil {
				t.Fatalf("decoded %s, want an error", s)
			}
			for _, w := range append([]string{"snap.yaml:"}, c.want...) {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error does not say %q:\n%v", w, err)
				}
			}
		})
	}

	// Two containers whose status is countable each, but not in sum: each
	// counts the larger of its spec and its status.
	twice := strings.Replace(withStatus("    containerStatuses:\n"+containerStatus("app", "      allocatedResources:\n        cpu: 5e15\n")+containerStatus("big", "      allocatedResources:\n        cpu: 5e15\n")),
		"    nodeName: n1\n", "    - image: nginx\n      name: big\n    nodeName: n1\n", 1)
	_, err := Decode("snap.yaml", []byte(list(n1, twice)))
	if err == nil || !strings.Contains(err.Error(), "requests[cpu]") || !strings.Contains(err.Error(), "sum to more than") {
		t.Errorf("two containers of 5e15 allocated: %v, want their sum refused", err)
	}
}

// claim is a ResourceClaim namespace/name of one request allocated the
// given results (indented as results).
func claim(namespace, name, results string) string {
	return fmt.Sprintf(`- apiVersion: resource.k8s.io/v1
  kind: ResourceClaim
  metadata:
    name: %s
    namespace: %s
  spec:
    devices:
      requests:
      - name: gpu
        exactly:
          deviceClassName: gpu.example.com
          allocationMode: All
  status:
    allocation:
      devices:
        results:
%s`, name, namespace, results)
}

// allocated is an allocation result of device gpu-0 of pool n1, with
// extra fields (indented as a result's).
func allocated(extra string) string {
	return "        - {request: gpu, driver: gpu.example.com, pool: n1, device: gpu-0" + extra + "}\n"
}

// TestDecodeRefusesADeviceAllocatedTwice: a device that two claims hold,
// one of them whole (neither a share of a device that allows multiple
// allocations nor admin access), is refused, naming both claims and the
// device; a device shared by shares, or also granted for admin access, is
// not. The same for a snapshot built in code (Admit) and for a live
// cluster's state (CheckDevices).
func TestDecodeRefusesADeviceAllocatedTwice(t *testing.T) {
	n1 := node("n1")
	whole, admin := allocated(""), allocated(", adminAccess: true")
	share := func(id string) string { return allocated(", shareID: " + id) }
	other := strings.Replace(whole, "gpu-0", "gpu-1", 1)
	for _, c := range []struct {
		name     string
		a, b     string // the results of claims ml/a and ml/b
		refused  bool
		resultOf string // of b, the result refused
	}{
		{"both whole", whole, whole, true, "results[0]"},
		{"whole, then a share", whole, share("6f1c2b1e-0c4b-4a44-9d3c-2f7d1e3b8a01"), true, "results[0]"},
		{"a share, then whole", share("6f1c2b1e-0c4b-4a44-9d3c-2f7d1e3b8a01"), other + whole, true, "results[1]"},
		{"two shares", share("6f1c2b1e-0c4b-4a44-9d3c-2f7d1e3b8a01"), share("6f1c2b1e-0c4b-4a44-9d3c-2f7d1e3b8a02"), false, ""},
		{"whole, and admin access", whole, admin, false, ""},
		{"admin access, and whole", admin, whole, false, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			s, err := Decode("snap.yaml", []byte(list(n1, claim("ml", "a", c.a), claim("ml", "b", c.b))))
			if !c.refused {
				if err != nil {
					t.Fatalf("Decode: %v", err)
				}
				if err := s.Admit(); err != nil {
					t.Errorf("Admit: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("decoded %s, want an error", s)
			}
			for _, w := range []string{"snap.yaml:", "items[2] (ResourceClaim ml/b)", "status.allocation.devices.results", c.resultOf, `"gpu.example.com/n1/gpu-0"`, "ResourceClaim ml/a", "whole"} {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error does not say %q:\n%v", w, err)
				}
			}
		})
	}

	// One claim holding the same device twice.
	_, err := Decode("snap.yaml", []byte(list(n1, claim("ml", "a", whole+whole))))
	if err == nil || !strings.Contains(err.Error(), "(ResourceClaim ml/a)") || !strings.Contains(err.Error(), "this claim's status.allocation.devices.results[0]") {
		t.Errorf("a claim holding a device twice: %v", err)
	}

	// Built in code, as a live cluster is read.
	held := func(name string) *resourcev1.ResourceClaim {
		return &resourcev1.ResourceClaim{
			ObjectMeta: metav1.ObjectMeta{Namespace: "ml", Name: name, UID: types.UID(name)},
			Status: resourcev1.ResourceClaimStatus{Allocation: &resourcev1.AllocationResult{Devices: resourcev1.DeviceAllocationResult{
				Results: []resourcev1.DeviceRequestAllocationResult{{Request: "gpu", Driver: "gpu.example.com", Pool: "n1", Device: "gpu-0"}},
			}}},
		}
	}
	s := &Snapshot{ResourceClaims: []*resourcev1.ResourceClaim{held("a"), held("b")}}
	for what, err := range map[string]error{"CheckDevices": s.CheckDevices(), "Admit": s.Admit()} {
		if err == nil || !strings.Contains(err.Error(), "ResourceClaim ml/b") || !strings.Contains(err.Error(), "ResourceClaim ml/a") || !strings.Contains(err.Error(), "gpu.example.com/n1/gpu-0") {
			t.Errorf("%s: %v, want ml/b refused for ml/a's device", what, err)
		}
	}
	s.ResourceClaims[1].Status.Allocation.Devices.Results[0].AdminAccess = ptr.To(true)
	if err := s.CheckDevices(); err != nil {
		t.Errorf("CheckDevices with admin access: %v", err)
	}
}
