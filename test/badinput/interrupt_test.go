package badinput

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"os/exec"
	"path/filepath"
	"strconv"
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

// TestInterruptedSimulationPrintsItsRounds: simulate shows a line per round
// on stderr as it goes; SIGTERM after round 2 prints the rounds finished,
// marked interrupted, and exits non-zero.
func TestInterruptedSimulationPrintsItsRounds(t *testing.T) {
	snap := filepath.Join(t.TempDir(), "cluster.yaml")
	if r := rebalancer(t, []string{"snapshot", "synthetic", "--nodes", "300", "--pods", "9000", "--seed", "4", "-o", snap}); r.exit != 0 {
		t.Fatalf("snapshot synthetic: exit %d\n%s", r.exit, r.stderr)
	}
	cmd := exec.Command(bin, "simulate", "--policy", goodPolicy, "--scheduler-config", goodScheduler, "--snapshot", snap, "--rounds", "100")
	cmd.Dir, cmd.Env = root, env
	var stdout bytes.Buffer
	cmd.Stdout = &stdout
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var progress []string
	sc := bufio.NewScanner(stderr)
	for sc.Scan() {
		progress = append(progress, sc.Text())
		if strings.Contains(sc.Text(), "round 2 of 100") {
			_ = cmd.Process.Signal(syscall.SIGTERM)
			break
		}
	}
	go func() { _, _ = io.Copy(io.Discard, stderr) }()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err = <-done:
	case <-time.After(60 * time.Second):
		_ = cmd.Process.Kill()
		t.Fatal("SIGTERM after round 2: still running 60 s later")
	}
	if err == nil {
		t.Fatalf("interrupted simulate exited 0\nstdout:\n%s", stdout.String())
	}
	if len(progress) < 4 || !strings.Contains(progress[0], "reading") || !strings.Contains(progress[1], "round 0") {
		t.Errorf("progress lines: %q, want reading, round 0, round 1, round 2", progress)
	}
	out := stdout.String()
	if !strings.Contains(out, "INTERRUPTED after round") {
		t.Errorf("the rounds printed are not marked interrupted:\n%s", out)
	}
	rows := 0
	for _, line := range strings.Split(out, "\n") {
		if f := strings.Fields(line); len(f) > 0 && strings.Contains(line, "±") {
			if _, err := strconv.Atoi(f[0]); err == nil {
				rows++
			}
		}
	}
	if rows < 3 || rows > 100 {
		t.Errorf("%d rounds printed, want rounds 0 to at least 2 and not all 100:\n%s", rows, out)
	}
}
