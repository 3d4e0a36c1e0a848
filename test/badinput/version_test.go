package badinput

import (
	"context"
	"encoding/json"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// modVersion is the version go.mod pins for module path.
func modVersion(t *testing.T, path string) string {
	t.Helper()
	cmd := exec.Command("go", "list", "-m", "-f", "{{.Version}}", path)
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list -m %s: %v", path, err)
	}
	return strings.TrimSpace(string(out))
}

// TestVersionsOfAPlainBuild: binaries built with a plain `go build` (no
// -ldflags and no VCS stamp, as TestMain builds rebalancer, as from a
// source archive) still name the Kubernetes and
// descheduler versions go.mod pins, and rebalancer-scheduler --version
// names Kubernetes' as kube-scheduler does.
func TestVersionsOfAPlainBuild(t *testing.T) {
	t.Parallel()
	k8s, desched := modVersion(t, "k8s.io/kubernetes"), modVersion(t, "sigs.k8s.io/descheduler")

	res := rebalancer(t, []string{"version", "-o", "json"})
	if res.exit != 0 {
		t.Fatalf("version -o json: exit %d\n%s", res.exit, res.stderr)
	}
	var v struct{ Version, Commit, BuildDate, GoVersion, Platform, Kubernetes, Descheduler string }
	if err := json.Unmarshal([]byte(res.stdout), &v); err != nil {
		t.Fatalf("version -o json: %v\n%s", err, res.stdout)
	}
	if v.Kubernetes != k8s || v.Descheduler != desched {
		t.Errorf("version -o json: kubernetes %q, descheduler %q; go.mod pins %s and %s", v.Kubernetes, v.Descheduler, k8s, desched)
	}
	if v.Version != "dev" || v.Commit != "unknown" || v.GoVersion == "" || v.Platform == "" {
		t.Errorf("version -o json of a plain build: %+v, want version dev, commit unknown, Go and platform", v)
	}
	if line := rebalancer(t, []string{"version"}).stdout; !strings.Contains(line, "Kubernetes "+k8s+", descheduler "+desched) {
		t.Errorf("version: %q names neither library", line)
	}

	sched := filepath.Join(t.TempDir(), "rebalancer-scheduler")
	build := exec.Command("go", "build", "-buildvcs=false", "-o", sched, "./cmd/rebalancer-scheduler")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/rebalancer-scheduler: %v\n%s", err, out)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, sched, "--version").Output()
	if err != nil {
		t.Fatalf("rebalancer-scheduler --version: %v", err)
	}
	if first, _, _ := strings.Cut(string(out), "\n"); first != "Kubernetes "+k8s {
		t.Errorf("rebalancer-scheduler --version: first line %q, want %q", first, "Kubernetes "+k8s)
	}
}
