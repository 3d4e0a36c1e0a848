package simulator

import (
	"context"
	"fmt"
	"reflect"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/dynamic-resource-allocation/structured"
	"k8s.io/kubernetes/pkg/scheduler/apis/config"
	"k8s.io/utils/ptr"

	"github.com/rebalancer-dev/rebalancer/internal/testutil"
	"github.com/rebalancer-dev/rebalancer/pkg/claims"
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
			// Two pods of 1 CPU each hold a GPU: by CPU and memory one node
			// would do, but one node has no two GPUs unless gpu-a has its
			// second.
			want := 2
			if c.extraGPU {
				want = 1
			}
			if got, err := s.LowerBound(); err != nil || got != want {
				t.Errorf("lower bound %d (%v), want %d", got, err, want)
			}
		})
	}
}

// allocations maps each allocated device to the claims holding it, over
// every claim the simulation has.
func allocations(t *testing.T, s *Simulator) map[string][]string {
	t.Helper()
	claims, err := s.dra.claims.List()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]string{}
	for _, c := range claims {
		if c.Status.Allocation == nil {
			continue
		}
		for _, r := range c.Status.Allocation.Devices.Results {
			dev := r.Pool + "/" + r.Device
			out[dev] = append(out[dev], c.Name)
		}
	}
	return out
}

// TestMoveTakesItsDevicesAlong: trainer-0, whose claim is made from a
// template and holds gpu-a's GPU, moves to gpu-b: its claim is released
// (gpu-a's GPU is free again), its replacement gets a claim of its own from
// the template, owned by it, allocated gpu-b's GPU; no device is held by two
// claims; and a Revert brings the claims back as they were. Predicting the
// move changes nothing.
func TestMoveTakesItsDevicesAlong(t *testing.T) {
	snap, err := snapshot.Load("../../test/testdata/dra-snapshot.yaml")
	if err != nil {
		t.Fatal(err)
	}
	s := newSim(t, "binpacking-scheduler.yaml", snap)
	ctx := context.Background()
	var trainer *v1.Pod
	for _, p := range s.Bound() {
		if p.Name == "trainer-0" {
			trainer = p
		}
	}
	before := allocations(t, s)
	if want := map[string][]string{"gpu-a/gpu-0": {"trainer-0-gpu-x7k2p"}}; !reflect.DeepEqual(before, want) {
		t.Fatalf("allocations %v, want %v", before, want)
	}

	pred, err := s.Predict(ctx, trainer, PredictOptions{LeaveSource: true})
	if err != nil {
		t.Fatal(err)
	}
	if pred.Node != "gpu-b" {
		t.Fatalf("predicted %q (%s), want gpu-b, the only other GPU", pred.Node, pred.Unschedulable)
	}
	if got := allocations(t, s); !reflect.DeepEqual(got, before) {
		t.Fatalf("Predict changed the allocations: %v", got)
	}

	f := s.Fork()
	r, err := s.Relocate(ctx, trainer, "gpu-b")
	if err != nil {
		t.Fatal(err)
	}
	name := claims.Generated(r, "gpu")
	claim := s.Claim("ml", name)
	if name == "" || claim == nil || claim.Status.Allocation == nil {
		t.Fatalf("the replacement's claim %q: %+v", name, claim)
	}
	if owner := metav1.GetControllerOf(claim); owner == nil || owner.UID != r.UID {
		t.Errorf("the replacement's claim is owned by %+v, want the replacement %s", owner, r.UID)
	}
	if s.Claim("ml", "trainer-0-gpu-x7k2p") != nil {
		t.Error("trainer-0's own claim is still there after it left")
	}
	if got, want := allocations(t, s), map[string][]string{"gpu-b/gpu-0": {name}}; !reflect.DeepEqual(got, want) {
		t.Errorf("after the move: allocations %v, want %v", got, want)
	}
	// gpu-a's GPU is free again: the waiting pod can have it.
	for _, p := range s.Pending() {
		if p.Name == "waiting" {
			if bound, why, err := s.Place(ctx, p); err != nil || bound == nil || bound.Spec.NodeName != "gpu-a" {
				t.Errorf("waiting placed on %v (%s, %v), want gpu-a, whose GPU the move freed", bound, why, err)
			}
		}
	}
	for dev, holders := range allocations(t, s) {
		if len(holders) > 1 {
			t.Errorf("device %s allocated to %v", dev, holders)
		}
	}
	// What the DynamicResources plugin sees as allocated: gpu-a's GPU,
	// released by trainer-0's claim and taken by waiting's, is allocated,
	// whatever order the changed claims are gone through in (map order,
	// so asked many times).
	want := sets.New(structured.MakeDeviceID("gpu.example.com", "gpu-a", "gpu-0"), structured.MakeDeviceID("gpu.example.com", "gpu-b", "gpu-0"))
	for range 30 {
		st, err := s.dra.claims.GatherAllocatedState()
		if err != nil {
			t.Fatal(err)
		}
		all, err := s.dra.claims.ListAllAllocatedDevices()
		if err != nil {
			t.Fatal(err)
		}
		if !st.AllocatedDevices.Equal(want) || !all.Equal(want) {
			t.Fatalf("allocated devices %v and %v, want %v", st.AllocatedDevices.UnsortedList(), all.UnsortedList(), want.UnsortedList())
		}
	}

	if err := s.Revert(f); err != nil {
		t.Fatal(err)
	}
	if got := allocations(t, s); !reflect.DeepEqual(got, before) {
		t.Errorf("after Revert: allocations %v, want %v", got, before)
	}
	if s.Claim("ml", name) != nil {
		t.Error("the replacement's claim outlived the Revert")
	}
}

// sharedGPUs is two nodes of one GPU each that may be allocated more than
// once, 1000 "milli" of capacity each, and pods pending in namespace ml,
// each asking for 500 of one GPU through a claim from template half.
func sharedGPUs(pods int) *snapshot.Snapshot {
	snap := &snapshot.Snapshot{
		Nodes: []*v1.Node{node("gpu-a", "8"), node("gpu-b", "8")},
		DeviceClasses: []*resourceapi.DeviceClass{{
			ObjectMeta: metav1.ObjectMeta{Name: "gpu.example.com"},
			Spec: resourceapi.DeviceClassSpec{Selectors: []resourceapi.DeviceSelector{{
				CEL: &resourceapi.CELDeviceSelector{Expression: `device.driver == "gpu.example.com"`},
			}}},
		}},
		ResourceClaimTemplates: []*resourceapi.ResourceClaimTemplate{{
			ObjectMeta: metav1.ObjectMeta{Name: "half", Namespace: "ml"},
			Spec: resourceapi.ResourceClaimTemplateSpec{Spec: resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{
				Requests: []resourceapi.DeviceRequest{{Name: "gpu", Exactly: &resourceapi.ExactDeviceRequest{
					DeviceClassName: "gpu.example.com",
					AllocationMode:  resourceapi.DeviceAllocationModeExactCount, Count: 1,
					Capacity: &resourceapi.CapacityRequirements{Requests: map[resourceapi.QualifiedName]resource.Quantity{"milli": resource.MustParse("500")}},
				}}},
			}}},
		}},
	}
	for _, n := range []string{"gpu-a", "gpu-b"} {
		snap.ResourceSlices = append(snap.ResourceSlices, &resourceapi.ResourceSlice{
			ObjectMeta: metav1.ObjectMeta{Name: n + "-gpu"},
			Spec: resourceapi.ResourceSliceSpec{
				Driver: "gpu.example.com", NodeName: ptr.To(n),
				Pool: resourceapi.ResourcePool{Name: n, Generation: 1, ResourceSliceCount: 1},
				Devices: []resourceapi.Device{{
					Name: "gpu-0", AllowMultipleAllocations: ptr.To(true),
					Capacity: map[resourceapi.QualifiedName]resourceapi.DeviceCapacity{"milli": {Value: resource.MustParse("1000")}},
				}},
			},
		})
	}
	for i := range pods {
		p := testutil.BuildTestPod(fmt.Sprintf("share-%d", i), "", "1", "1Gi", testutil.WithScheduler("rebalancer-scheduler"))
		p.Namespace, p.UID = "ml", types.UID(fmt.Sprintf("share-%d", i))
		p.Spec.Containers[0].Resources.Claims = []v1.ResourceClaim{{Name: "gpu"}}
		p.Spec.ResourceClaims = []v1.PodResourceClaim{{Name: "gpu", ResourceClaimTemplateName: ptr.To("half")}}
		snap.Pods = append(snap.Pods, p)
	}
	return snap
}

// consumed sums, by device, the capacity the simulation's claims consume,
// and fails when a device gives more than its 1000.
func consumed(t *testing.T, s *Simulator) map[string]int64 {
	t.Helper()
	claims, err := s.dra.claims.List()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int64{}
	for _, c := range claims {
		if c.Status.Allocation == nil {
			continue
		}
		for _, r := range c.Status.Allocation.Devices.Results {
			q := r.ConsumedCapacity["milli"]
			out[r.Pool+"/"+r.Device] += q.Value()
		}
	}
	for dev, n := range out {
		if n > 1000 {
			t.Errorf("device %s gives %d of its 1000", dev, n)
		}
	}
	return out
}

// TestSharedDevicesByConsumedCapacity: pods asking for half a GPU share
// one (two to a GPU, never three); a pod moved gives its half back where it
// leaves, so a pod pending can have it; and a pod sharing a device is not
// kept where it is for its claim.
func TestSharedDevicesByConsumedCapacity(t *testing.T) {
	ctx := context.Background()
	s := newSim(t, "binpacking-scheduler.yaml", sharedGPUs(5))
	pending := s.Pending()
	placed := map[string]string{}
	for i, p := range pending[:4] {
		if i == 2 {
			// Two halves on one GPU: one node holds them (and the five
			// pods' CPU), had they taken a GPU each or not.
			if got := consumed(t, s); len(got) != 1 {
				t.Errorf("two halves on %v, want one GPU", got)
			}
			if n, err := s.LowerBound(); err != nil || n != 1 {
				t.Errorf("lower bound %d (%v), want 1", n, err)
			}
		}
		b, why, err := s.Place(ctx, p)
		if err != nil || b == nil {
			t.Fatalf("%s not placed: %s %v", p.Name, why, err)
		}
		placed[p.Name] = b.Spec.NodeName
	}
	if got := consumed(t, s); got["gpu-a/gpu-0"] != 1000 || got["gpu-b/gpu-0"] != 1000 {
		t.Fatalf("four halves on two GPUs: %v (placed %v)", got, placed)
	}
	if b, _, err := s.Place(ctx, pending[4]); err != nil || b != nil {
		t.Fatalf("a fifth half placed on %v (%v): both GPUs are full", b, err)
	}
	// share-0 leaves its GPU: there is no half free elsewhere but by the
	// move itself, so it moves to no node; it is evicted, and the fifth
	// takes its half.
	var first *v1.Pod
	for _, p := range s.Bound() {
		if p.Name == "share-0" {
			first = p
		}
	}
	if c := claims.Pinned(first); c != nil {
		t.Errorf("share-0 kept where it is for its claims %v", c)
	}
	if err := s.Evict(first); err != nil {
		t.Fatal(err)
	}
	if got := consumed(t, s); got["gpu-a/gpu-0"]+got["gpu-b/gpu-0"] != 1500 {
		t.Fatalf("after share-0 left: %v, want its half free", got)
	}
	b, why, err := s.Place(ctx, pending[4])
	if err != nil || b == nil || b.Spec.NodeName != placed["share-0"] {
		t.Fatalf("the fifth half placed on %v (%s, %v), want %s, where share-0 gave its half back", b, why, err, placed["share-0"])
	}
	consumed(t, s)
}

// TestDeviceClassFailingAtRunTime: a device class whose CEL selector
// compiles but fails on the devices at run time (it reads an attribute
// they lack) fails the scheduling cycle of each pod whose claim uses it,
// as kube-scheduler's does, and no other: those pods fit no node, the
// class and the error their diagnosis, and the simulation goes on. The
// same with every node filtered by the framework itself.
func TestDeviceClassFailingAtRunTime(t *testing.T) {
	for _, c := range []struct {
		name string
		opts []Option
	}{{"runner", nil}, {"framework", []Option{WithEveryNode()}}} {
		t.Run(c.name, func(t *testing.T) {
			snap, err := snapshot.Load("../../test/testdata/dra-snapshot.yaml")
			if err != nil {
				t.Fatal(err)
			}
			snap.DeviceClasses[0].Spec.Selectors[0].CEL.Expression = `device.driver == "gpu.example.com" && device.attributes["example.com"].model == "a100"`
			for _, sl := range snap.ResourceSlices {
				sl.Spec.Devices[0].Attributes = map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{"example.com/vendor": {StringValue: ptr.To("acme")}}
			}
			web := pod("web", "gpu-b", "1")
			snap.Pods = append(snap.Pods, web)
			_, ctx := testutil.Context(t)
			s, err := New(ctx, []*config.KubeSchedulerProfile{profile(t, "binpacking-scheduler.yaml")}, snap, c.opts...)
			if err != nil {
				t.Fatal(err)
			}
			before := allocations(t, s)
			wantWhy := func(what, why string) {
				t.Helper()
				for _, w := range []string{"class gpu.example.com", "CEL runtime error", "no such key: model"} {
					if !strings.Contains(why, w) {
						t.Errorf("%s: %q does not say %q", what, why, w)
					}
				}
			}

			var trainer, waiting *v1.Pod
			for _, p := range s.Bound() {
				if p.Name == "trainer-0" {
					trainer = p
				}
			}
			for _, p := range s.Pending() {
				if p.Name == "waiting" {
					waiting = p
				}
			}
			pred, err := s.Predict(ctx, trainer, PredictOptions{LeaveSource: true})
			if err != nil {
				t.Fatalf("Predict trainer-0: %v; want its cycle alone to fail", err)
			}
			if pred.Node != "" {
				t.Errorf("trainer-0 predicted on %s, want no node", pred.Node)
			}
			wantWhy("trainer-0", pred.Unschedulable)

			bound, why, err := s.Place(ctx, waiting)
			if err != nil || bound != nil {
				t.Fatalf("Place waiting: %v, %v; want it pending", bound, err)
			}
			wantWhy("waiting", why)
			fits, nodes, err := s.Resolvable(ctx, waiting)
			if err != nil || fits || len(nodes) > 0 {
				t.Errorf("Resolvable(waiting) = %v, %v, %v; want no node that making room would help", fits, nodes, err)
			}

			// A pod without claims is simulated as ever.
			pred, err = s.Predict(ctx, web, PredictOptions{LeaveSource: true})
			if err != nil || pred.Node != "gpu-a" {
				t.Errorf("Predict web: %q (%s), %v; want gpu-a", pred.Node, pred.Unschedulable, err)
			}
			if got := allocations(t, s); !reflect.DeepEqual(got, before) {
				t.Errorf("allocations %v, want %v as before", got, before)
			}
		})
	}
}
