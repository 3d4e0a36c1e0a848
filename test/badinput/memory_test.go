package badinput

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// peakMiB runs rebalancer with args and returns its peak resident memory.
func peakMiB(t *testing.T, args []string) (float64, result) {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Dir, cmd.Env = root, env
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	_ = cmd.Run()
	res := result{stdout: stdout.String(), stderr: stderr.String(), exit: cmd.ProcessState.ExitCode()}
	return float64(cmd.ProcessState.SysUsage().(*syscall.Rusage).Maxrss) / 1024, res // Linux: KiB
}

// usageHeavy is the good snapshot with queries PrometheusQuery items of
// samples samples each.
func usageHeavy(t *testing.T, queries, samples int) string {
	t.Helper()
	good, err := os.ReadFile(filepath.Join(root, goodSnapshot))
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	b.Write(good)
	for q := range queries {
		fmt.Fprintf(&b, `- apiVersion: rebalancer.dev/v1alpha1
  kind: PrometheusQuery
  metadata:
    name: query-node-cpu
  query: instance:node_cpu:rate:sum
  timestamp: "2026-11-23T10:%02d:%02dZ"
  result:
`, q/60, q%60)
		for i := range samples {
			fmt.Fprintf(&b, "  - metric: {__name__: \"instance:node_cpu:rate:sum\", instance: node-%d}\n    value: [1795860000, \"0.42\"]\n", i)
		}
	}
	path := filepath.Join(t.TempDir(), "usage-heavy.yaml")
	if err := os.WriteFile(path, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestSnapshotMemoryBound: reading a snapshot takes at most about ten
// times its size beyond what the binary needs anyway, and an object too
// large for any cluster (a query answered with 200,000 samples) is refused
// before it is converted, not after gigabytes.
func TestSnapshotMemoryBound(t *testing.T) {
	t.Parallel()
	base, res := peakMiB(t, planArgs(nil))
	if res.exit != 0 {
		t.Fatalf("good snapshot: exit %d\n%s", res.exit, res.stderr)
	}

	heavy := usageHeavy(t, 40, 5000) // 200,000 samples in objects of a 5,000-node cluster's size
	info, err := os.Stat(heavy)
	if err != nil {
		t.Fatal(err)
	}
	size := float64(info.Size()) / (1 << 20)
	peak, res := peakMiB(t, planArgs(map[string]string{"--snapshot": heavy}))
	t.Logf("%.1f MiB snapshot: peak %.0f MiB (the good snapshot's %.0f MiB)", size, peak, base)
	if res.exit != 0 {
		t.Fatalf("exit %d\n%s", res.exit, res.stderr)
	}
	if limit := base + 15*size; peak > limit {
		t.Errorf("reading a %.1f MiB snapshot peaked at %.0f MiB, over %.0f MiB (15 times its size over the good snapshot's %.0f MiB)", size, peak, limit, base)
	}

	huge := usageHeavy(t, 1, 200000) // one object of 13 MiB
	peak, res = peakMiB(t, planArgs(map[string]string{"--snapshot": huge}))
	t.Logf("one 200,000-sample object: peak %.0f MiB", peak)
	if res.exit == 0 || !strings.Contains(res.stderr, "items[5]") || !strings.Contains(res.stderr, "more than the 8 MiB") {
		t.Errorf("one 200,000-sample object: exit %d, want a refusal naming items[5] and the 8 MiB cap\n%s", res.exit, res.stderr)
	}
	// Converted, the object would cost about ten times its size, as the
	// heavy snapshot's objects do (~210 MiB over the good snapshot's).
	// Refused as read, it peaked at 96-102 MiB alone and at 141-145 MiB
	// beside other tests (this package's run in parallel), when the garbage
	// collector runs late: five times the heavy snapshot's size over the
	// good one's (~100 MiB) lies halfway between the two, on a log scale.
	if limit := base + 5*size; peak > limit {
		t.Errorf("refusing an oversized object peaked at %.0f MiB, over %.0f MiB: it was converted first", peak, limit)
	}
}
