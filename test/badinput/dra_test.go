package badinput

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/rebalancer-dev/rebalancer/pkg/plan"
)

// Snapshots with Dynamic Resource Allocation objects (test/badinput/testdata/dra-*).

// refusedSnapshot runs `rebalancer plan` on the good policy and profile and
// the snapshot file, and checks that the snapshot is refused as
// TestBadInput checks its cases: a non-zero exit status, a message naming
// the file and each of want, no panic, no plan.
func refusedSnapshot(t *testing.T, file string, want ...string) {
	t.Helper()
	args := planArgs(map[string]string{"--snapshot": file})
	res := rebalancer(t, args)
	t.Logf("rebalancer %s\n-> exit %d: %s", strings.Join(args, " "), res.exit, errorLines(res.stderr))
	if res.exit == 0 {
		t.Errorf("exit status 0, want non-zero\nstdout:\n%s", res.stdout)
	}
	for _, w := range append([]string{file}, want...) {
		if !strings.Contains(res.stderr, w) {
			t.Errorf("stderr does not contain %q", w)
		}
	}
	for _, out := range []string{res.stdout, res.stderr} {
		for _, bad := range []string{"panic", "goroutine "} {
			if strings.Contains(out, bad) {
				t.Errorf("output contains %q", bad)
			}
		}
	}
	for _, planish := range []string{"POD", `"moves"`, "moves:"} {
		if strings.Contains(res.stdout, planish) {
			t.Errorf("stdout looks like a plan (%q):\n%s", planish, res.stdout)
		}
	}
}

// TestDRADeviceAllocatedTwice: two ResourceClaims allocated gpu-a's one GPU,
// whole, is a cluster that cannot be; the snapshot is refused, naming
// both claims and the device.
func TestDRADeviceAllocatedTwice(t *testing.T) {
	t.Parallel()
	refusedSnapshot(t, "test/badinput/testdata/dra-device-allocated-twice.yaml",
		"(ResourceClaim ml/trainer-1-gpu-q3m8z)", "status.allocation.devices.results[0]", `"gpu.example.com/gpu-a/gpu-0"`,
		"ResourceClaim ml/trainer-0-gpu-x7k2p", "whole")
}

// TestDRAClassFailingAtRunTime: a device class whose CEL selector compiles
// but fails on the devices at run time (it reads an attribute they do not
// publish) fails the scheduling of the pods whose claims use it, and only
// theirs, as in kube-scheduler: the plan is made (exit 0), trainer-0's
// move is skipped with the class and the error, and web-1 still moves to
// empty worker-0.
func TestDRAClassFailingAtRunTime(t *testing.T) {
	t.Parallel()
	args := planArgs(map[string]string{"--snapshot": "test/badinput/testdata/dra-cel-runtime-error.yaml"}, "-o", "json")
	res := rebalancer(t, args)
	if res.exit != 0 {
		t.Fatalf("rebalancer %s: exit status %d, want 0\nstderr:\n%s", strings.Join(args, " "), res.exit, errorLines(res.stderr))
	}
	var p plan.Plan
	if err := json.Unmarshal([]byte(res.stdout), &p); err != nil {
		t.Fatalf("stdout is not a JSON plan: %v\n%s", err, res.stdout)
	}
	moved := map[string]plan.Move{}
	for _, m := range p.Moves {
		moved[m.Pod] = m
	}
	if m, ok := moved["shop/web-1"]; !ok || m.Source != "worker-0" || m.Target != "worker-1" {
		t.Errorf("moves %+v; want shop/web-1 from worker-0 to worker-1", p.Moves)
	}
	if m, ok := moved["ml/trainer-0"]; ok {
		t.Errorf("trainer-0 moved to %s: no node can allocate its claim", m.Target)
	}
	var skips []plan.Skip
	for _, s := range p.Skipped {
		if s.Pod == "ml/trainer-0" {
			skips = append(skips, s)
		}
	}
	if len(skips) == 0 {
		t.Fatalf("trainer-0 is not among the skipped: %+v", p.Skipped)
	}
	for _, s := range skips {
		if s.Reason != plan.ReasonNoFit {
			t.Errorf("trainer-0 skipped for %q (%s), want %q", s.Reason, s.Detail, plan.ReasonNoFit)
		}
		for _, w := range []string{"class a100.example.com", "CEL runtime error", "no such key: model"} {
			if !strings.Contains(s.Detail, w) {
				t.Errorf("trainer-0's skip %q does not say %q", s.Detail, w)
			}
		}
	}
}
