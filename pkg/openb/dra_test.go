package openb

import (
	"bytes"
	"context"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/rebalancer-dev/rebalancer/pkg/claims"
	"github.com/rebalancer-dev/rebalancer/pkg/snapshot"
)

// checkDevices checks a snapshot imported with GPUs as DRA devices: every
// running GPU pod asks for none as an extended resource, its claim made
// from the template of its GPU count is allocated that many devices of its
// own node, and no device is allocated twice. It returns the GPU pods
// running.
func checkDevices(t *testing.T, snap *snapshot.Snapshot) int {
	t.Helper()
	byName := map[string]int{}
	for i, c := range snap.ResourceClaims {
		byName[c.Namespace+"/"+c.Name] = i
	}
	held := map[string]string{}
	running := 0
	for _, p := range snap.Pods {
		if _, ok := p.Spec.Containers[0].Resources.Requests[GPUResource]; ok {
			t.Fatalf("pod %s asks for %s as an extended resource", p.Name, GPUResource)
		}
		if len(p.Spec.ResourceClaims) == 0 || p.Spec.NodeName == "" {
			continue
		}
		running++
		name := claims.Generated(p, gpuClaim)
		i, ok := byName[p.Namespace+"/"+name]
		if !ok {
			t.Fatalf("pod %s runs on %s without its claim %q", p.Name, p.Spec.NodeName, name)
		}
		c := snap.ResourceClaims[i]
		if owner := metav1.GetControllerOf(c); owner == nil || owner.UID != p.UID {
			t.Errorf("claim %s is owned by %+v, not by %s", c.Name, owner, p.Name)
		}
		if c.Status.Allocation == nil {
			t.Fatalf("claim %s of pod %s is not allocated", c.Name, p.Name)
		}
		want := c.Spec.Devices.Requests[0].Exactly.Count
		if got := int64(len(c.Status.Allocation.Devices.Results)); got != want || !strings.HasPrefix(*p.Spec.ResourceClaims[0].ResourceClaimTemplateName, "gpu-") {
			t.Errorf("claim %s holds %d devices, its request %d", c.Name, got, want)
		}
		for _, r := range c.Status.Allocation.Devices.Results {
			if r.Pool != p.Spec.NodeName {
				t.Errorf("pod %s on %s holds device %s/%s of another node", p.Name, p.Spec.NodeName, r.Pool, r.Device)
			}
			dev := r.Pool + "/" + r.Device
			if other, dup := held[dev]; dup {
				t.Errorf("device %s allocated to %s and %s", dev, other, c.Name)
			}
			held[dev] = c.Name
		}
	}
	return running
}

// TestImportGPUsAsDevices: the small trace imported with GPUs as DRA
// devices places its GPU pods on the GPU node, each with a claim of its
// own allocated there, and leaves the pod that asks for more GPUs than are
// left pending, as the extended-resource import does.
func TestImportGPUsAsDevices(t *testing.T) {
	nodes, pods := smallTrace(t, ""+
		"one,1000,1024,1,1000,T4,LS,Running,0,,0\n"+
		"two,1000,1024,1,1000,,BE,Running,1,,1\n"+
		"three,1000,1024,1,1000,,BE,Running,2,,2\n"+
		"cpu-only,1000,1024,0,0,,BE,Running,3,,3\n")
	for _, dra := range []bool{false, true} {
		snap, stats, err := Import(context.Background(), nodes, pods, Options{At: Peak, DRA: dra})
		if err != nil {
			t.Fatal(err)
		}
		if stats.Running != 3 || stats.Pending != 1 {
			t.Errorf("DRA %v: %s; want 3 running, 1 pending (two GPUs for three GPU pods)", dra, stats)
		}
		if !dra {
			continue
		}
		if len(snap.ResourceSlices) != 1 || len(snap.DeviceClasses) != 1 || len(snap.ResourceClaimTemplates) != 2 {
			t.Fatalf("DRA objects: %s", snap)
		}
		if n := checkDevices(t, snap); n != 2 {
			t.Errorf("%d GPU pods running with claims, want 2", n)
		}
	}
}

// TestImportOpenbTraceAsDevices: the openb trace imported with GPUs as
// DRA devices runs as many pods as with GPUs as an extended resource, and
// every running GPU pod holds devices of its node through a claim of its
// own. The trace to second 10,500,000 (1,307 pods created, 1,271 deleted):
// kube-scheduler's DRA allocator, which the replay runs on every node for
// every GPU pod, makes the whole trace take over a minute.
func TestImportOpenbTraceAsDevices(t *testing.T) {
	nodes, pods := openbTrace(t)
	const at = 10_500_000
	_, ext, err := Import(context.Background(), nodes, pods, Options{At: at})
	if err != nil {
		t.Fatal(err)
	}
	snap, dra, err := Import(context.Background(), nodes, pods, Options{At: at, DRA: true})
	if err != nil {
		t.Fatal(err)
	}
	if dra.Running != ext.Running || dra.Pending != ext.Pending {
		t.Errorf("as devices: %s; as an extended resource: %s", dra, ext)
	}
	if dra.Created < 1000 || dra.Deleted < 1000 {
		t.Errorf("the trace to second %d: %s; want over a thousand creations and deletions", at, dra)
	}
	if n := checkDevices(t, snap); n == 0 {
		t.Error("no GPU pod runs with a claim")
	}
}

// TestImportSharedGPUs: with GPU sharing, pods asking for part of a GPU
// share one, up to its 1000 milli: on a node of two GPUs, pods of 600,
// 400, 500 and 500 milli fill both and the pod asking for a whole GPU
// waits; without sharing, two pods run and three wait.
func TestImportSharedGPUs(t *testing.T) {
	nodes, pods := smallTrace(t, ""+
		"a,1000,1024,1,600,,BE,Running,0,,0\n"+
		"b,1000,1024,1,400,,BE,Running,1,,1\n"+
		"c,1000,1024,1,500,,BE,Running,2,,2\n"+
		"d,1000,1024,1,500,,BE,Running,3,,3\n"+
		"whole,1000,1024,1,1000,,BE,Running,4,,4\n")
	for _, c := range []struct {
		sharing          bool
		running, pending int
	}{{false, 2, 3}, {true, 4, 1}} {
		snap, stats, err := Import(context.Background(), nodes, pods, Options{At: Peak, DRA: true, GPUSharing: c.sharing})
		if err != nil {
			t.Fatal(err)
		}
		if stats.Running != c.running || stats.Pending != c.pending {
			t.Errorf("sharing %v: %s; want %d running, %d pending", c.sharing, stats, c.running, c.pending)
		}
		// Each GPU gives at most its 1000 milli; whole GPUs at most once.
		used := map[string]int64{}
		for _, cl := range snap.ResourceClaims {
			for _, r := range cl.Status.Allocation.Devices.Results {
				dev := r.Pool + "/" + r.Device
				if q, ok := r.ConsumedCapacity[gpuMilli]; ok {
					used[dev] += q.Value()
				} else {
					used[dev] += 1000
				}
			}
		}
		for dev, n := range used {
			if n > 1000 {
				t.Errorf("sharing %v: GPU %s gives %d milli", c.sharing, dev, n)
			}
		}
	}
}

// TestSharedGPUsImportAlike: a trace whose pods share GPUs imports to the
// same file every time, though kube-scheduler's allocator draws a random
// shareID for each share, and the shares of a device keep distinct IDs.
func TestSharedGPUsImportAlike(t *testing.T) {
	nodes, pods := smallTrace(t, ""+
		"a,1000,1024,1,300,,BE,Running,0,,0\n"+
		"b,1000,1024,1,300,,BE,Running,1,,1\n"+
		"c,1000,1024,1,300,,BE,Running,2,,2\n")
	var files []string
	for range 2 {
		snap, _, err := Import(context.Background(), nodes, pods, Options{At: Peak, DRA: true, GPUSharing: true})
		if err != nil {
			t.Fatal(err)
		}
		ids := map[string]bool{}
		for _, c := range snap.ResourceClaims {
			for _, r := range c.Status.Allocation.Devices.Results {
				if r.ShareID == nil {
					t.Fatalf("claim %s holds a shared GPU without a shareID", c.Name)
				}
				share := r.Pool + "/" + r.Device + "/" + string(*r.ShareID)
				if ids[share] {
					t.Errorf("share %s is allocated twice", share)
				}
				ids[share] = true
			}
		}
		if len(ids) != 3 {
			t.Errorf("%d shares allocated, want the 3 pods' own", len(ids))
		}
		var b bytes.Buffer
		if err := snap.Encode(&b); err != nil {
			t.Fatal(err)
		}
		files = append(files, b.String())
	}
	if files[0] != files[1] {
		t.Error("the same trace imported to two different files")
	}
}
