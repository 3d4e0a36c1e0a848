package simulator

import (
	"context"
	"testing"

	v1 "k8s.io/api/core/v1"

	"github.com/rebalancer-dev/rebalancer/pkg/snapshot"
)

// TestDevicesDecidePlacement: a pod that claims a GPU through DRA goes where
// a GPU is free. In the snapshot gpu-a's only GPU is allocated to
// trainer-0's claim and gpu-b's is free; the shipped bin-packing profile
// would put the waiting pod on gpu-a, the fuller node, if devices did not
// count. With a second GPU published on gpu-a, it goes there.
func TestDevicesDecidePlacement(t *testing.T) {
	for _, c := range []struct {
		name     string
		extraGPU bool
		want     string
	}{
		{"gpu-a's GPU is taken", false, "gpu-b"},
		{"gpu-a has a second, free GPU", true, "gpu-a"},
	} {
		t.Run(c.name, func(t *testing.T) {
			snap, err := snapshot.Load("../../test/testdata/dra-snapshot.yaml")
			if err != nil {
				t.Fatal(err)
			}
			if len(snap.ResourceClaims) != 2 || len(snap.ResourceSlices) != 2 || len(snap.DeviceClasses) != 1 || len(snap.ResourceClaimTemplates) != 1 {
				t.Fatalf("snapshot: %s", snap)
			}
			if c.extraGPU {
				for _, sl := range snap.ResourceSlices {
					if sl.Spec.NodeName != nil && *sl.Spec.NodeName == "gpu-a" {
						extra := sl.Spec.Devices[0]
						extra.Name = "gpu-1"
						sl.Spec.Devices = append(sl.Spec.Devices, extra)
					}
				}
			}
			s := newSim(t, "binpacking-scheduler.yaml", snap)
			var waiting *v1.Pod
			for _, p := range s.Pending() {
				if p.Name == "waiting" {
					waiting = p
				}
			}
			if waiting == nil {
				t.Fatal("the waiting pod is not pending in the simulation")
			}
			bound, why, err := s.Place(context.Background(), waiting)
			if err != nil {
				t.Fatal(err)
			}
			if bound == nil || bound.Spec.NodeName != c.want {
				t.Fatalf("placed %v (%s), want on %s", bound, why, c.want)
			}
		})
	}
}
