package badinput

import (
	"bytes"
	"errors"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestInterruptedPlanIsNoPlan: SIGTERM at any point of a plan (reading the
// snapshot, building the simulation, the plugins, the replay that checks
// the plan) ends the process with a non-zero status, an error saying it
// was interrupted, and nothing on stdout: a plan cut short is never
// printed as if it were the plan.
func TestInterruptedPlanIsNoPlan(t *testing.T) {
	snap := filepath.Join(t.TempDir(), "cluster.yaml")
	if r := rebalancer(t, []string{"snapshot", "synthetic", "--nodes", "300", "--pods", "9000", "--seed", "4", "-o", snap}); r.exit != 0 {
		t.Fatalf("snapshot synthetic: exit %d\n%s", r.exit, r.stderr)
	}
	args := planArgs(map[string]string{"--snapshot": snap}, "-o", "json")
	start := time.Now()
	full := rebalancer(t, args)
	whole := time.Since(start)
	if full.exit != 0 || !strings.Contains(full.stdout, `"moves"`) {
		t.Fatalf("the plan, uninterrupted: exit %d\n%s", full.exit, errorLines(full.stderr))
	}
	interrupted := 0
	for i := 1; i <= 9; i++ {
		at := whole * time.Duration(i) / 10
		cmd := exec.Command(bin, args...)
		cmd.Dir, cmd.Env = root, env
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(at)
		_ = cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		var err error
		select {
		case err = <-done:
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			t.Fatalf("SIGTERM at %s: still running 30 s later", at.Round(time.Millisecond))
		}
		var exit *exec.ExitError
		switch {
		case err == nil:
			// It finished before the signal: the whole plan, then.
			if withoutID(t, stdout.String()) != withoutID(t, full.stdout) {
				t.Errorf("SIGTERM at %s came after the end, yet the plan differs from the uninterrupted one", at.Round(time.Millisecond))
			}
		case errors.As(err, &exit):
			interrupted++
			if stdout.Len() > 0 {
				t.Errorf("SIGTERM at %s: exit %d and %d bytes on stdout, want no plan:\n%.300s", at.Round(time.Millisecond), exit.ExitCode(), stdout.Len(), stdout.String())
			}
			if msg := errorLines(stderr.String()); !strings.Contains(msg, "interrupted (terminated signal received)") {
				t.Errorf("SIGTERM at %s: exit %d with %q, want an error saying the plan was interrupted", at.Round(time.Millisecond), exit.ExitCode(), msg)
			}
		default:
			t.Fatal(err)
		}
	}
	if interrupted < 5 {
		t.Errorf("only %d of 9 runs were interrupted before they ended: the test shows little", interrupted)
	}
}
