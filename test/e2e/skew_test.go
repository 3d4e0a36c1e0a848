//go:build e2e

package e2e

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestSchedulerRefusesOlderAPIServer: rebalancer-scheduler is kube-scheduler
// built from the Kubernetes release go.mod pins, and kube-scheduler's version
// skew policy allows no API server older than that. Started with the shipped
// bin-packing profile against a control plane of the previous minor, it must
// stop at start, within a minute and non-zero, with an error naming both
// versions (pkg/scheduler/skew), rather than run and fail later on APIs the
// server does not serve.
//
// It runs only against such a control plane: hack/compat.sh (make
// test-compat) starts one and sets COMPAT_SERVER_MINOR to its minor.
func TestSchedulerRefusesOlderAPIServer(t *testing.T) {
	minor := os.Getenv("COMPAT_SERVER_MINOR")
	if minor == "" {
		t.Skip("needs a kube-apiserver one minor older than rebalancer-scheduler's Kubernetes: " +
			"hack/compat.sh (make test-compat) starts one and sets COMPAT_SERVER_MINOR")
	}
	server, err := client.Discovery().ServerVersion()
	if err != nil {
		t.Fatal(err)
	}
	if server.Major != "1" || server.Minor != minor {
		t.Fatalf("COMPAT_SERVER_MINOR=%s, but the API server is %s", minor, server.GitVersion)
	}

	// The Kubernetes version rebalancer-scheduler is built from, as it says.
	out, err := exec.Command(filepath.Join(binDir, "rebalancer-scheduler"), "--version").Output()
	if err != nil {
		t.Fatalf("rebalancer-scheduler --version: %v", err)
	}
	built, ok := strings.CutPrefix(strings.SplitN(string(out), "\n", 2)[0], "Kubernetes ")
	if !ok || !strings.HasPrefix(built, "v1.") {
		t.Fatalf("rebalancer-scheduler --version does not begin with its Kubernetes version:\n%s", out)
	}
	if strings.HasPrefix(built, "v1."+minor+".") {
		t.Fatalf("rebalancer-scheduler is built from Kubernetes %s, the API server's minor: nothing to refuse", built)
	}

	// As shipped, but with a scheduler name of its own and no leader
	// election: whatever happens, it must not touch the suite's lease.
	config := schedulerConfig(t, "binpacking-scheduler.yaml", func(cfg map[string]any) {
		cfg["leaderElection"] = map[string]any{"leaderElect": false}
		cfg["profiles"].([]any)[0].(map[string]any)["schedulerName"] = "skew-" + fmt.Sprint(time.Now().UnixNano())
	})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(binDir, "rebalancer-scheduler"), "--config="+config,
		"--bind-address=127.0.0.1", fmt.Sprintf("--secure-port=%d", freePort(t)), "-v=2")
	start := time.Now()
	log, err := cmd.CombinedOutput()
	took := time.Since(start).Round(time.Millisecond)
	var exit *exec.ExitError
	switch {
	case ctx.Err() != nil:
		t.Fatalf("rebalancer-scheduler still ran after %s against kube-apiserver %s; last lines:\n%s", took, server.GitVersion, lastLines(log, 40))
	case err == nil:
		t.Fatalf("rebalancer-scheduler exited 0 against kube-apiserver %s; last lines:\n%s", server.GitVersion, lastLines(log, 40))
	case !errors.As(err, &exit):
		t.Fatalf("rebalancer-scheduler: %v", err)
	}
	for _, want := range []string{"kube-apiserver " + server.GitVersion, "older than", "Kubernetes " + built} {
		if !strings.Contains(string(log), want) {
			t.Errorf("the error does not say %q; last lines:\n%s", want, lastLines(log, 40))
		}
	}
	said := ""
	for _, line := range strings.Split(string(log), "\n") {
		if strings.Contains(line, "older than") {
			said = line
			break
		}
	}
	t.Logf("rebalancer-scheduler (Kubernetes %s) exited %d after %s against kube-apiserver %s: %s", built, exit.ExitCode(), took, server.GitVersion, said)
}

// lastLines returns the last n lines of a process's output.
func lastLines(out []byte, n int) string {
	lines := strings.Split(strings.TrimRight(string(out), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
