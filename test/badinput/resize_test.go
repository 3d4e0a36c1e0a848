package badinput

import "testing"

// Snapshots of pods resized in place (test/badinput/testdata/resize-*):
// kube-scheduler counts of each container the larger of its spec and what
// the kubelet reports, so a status past int64 millicores would wrap around
// and make its node look nearly empty. Refused, naming the field, as the
// same value in the spec is (test/testdata/bad/snapshot-request-overflow.yaml).

func TestResizeAllocatedTooLarge(t *testing.T) {
	t.Parallel()
	refusedSnapshot(t, "test/badinput/testdata/resize-allocated-overflow.yaml",
		"(Pod shop/db-1)", "status.containerStatuses[0].allocatedResources[cpu]", `"10e15"`, "too large")
}

func TestResizeStatusRequestsTooLarge(t *testing.T) {
	t.Parallel()
	refusedSnapshot(t, "test/badinput/testdata/resize-status-requests-overflow.yaml",
		"(Pod shop/db-1)", "status.containerStatuses[0].resources.requests[cpu]", `"10e15"`, "too large")
}
