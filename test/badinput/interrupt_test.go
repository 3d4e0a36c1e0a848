package badinput

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
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
	// Timed from the first log line: main handles SIGTERM by then. One
	// during the packages' initialisation, before main, would end the
	// process by the signal's default action, silently.
	const first = "Reading the cluster"
	full := interruptAt(t, args, first, never, 5*time.Minute)
	if full.err != nil || !strings.Contains(full.stdout, `"moves"`) {
		t.Fatalf("the plan, uninterrupted: %v\n%s", full.err, errorLines(full.stderr))
	}
	interrupted := 0
	check := func(what string, e ending) {
		t.Helper()
		var exit *exec.ExitError
		switch {
		case e.err == nil:
			// It finished before the signal: the whole plan, then.
			if withoutID(t, e.stdout) != withoutID(t, full.stdout) {
				t.Errorf("SIGTERM %s came after the end, yet the plan differs from the uninterrupted one", what)
			}
		case errors.As(e.err, &exit):
			interrupted++
			if len(e.stdout) > 0 {
				t.Errorf("SIGTERM %s: exit %d and %d bytes on stdout, want no plan:\n%.300s", what, exit.ExitCode(), len(e.stdout), e.stdout)
			}
			if msg := errorLines(e.stderr); !strings.Contains(msg, "interrupted (terminated signal received)") {
				t.Errorf("SIGTERM %s: exit %d with %q, want an error saying the plan was interrupted", what, exit.ExitCode(), msg)
			}
		default:
			t.Fatal(e.err)
		}
	}
	// As each phase begins.
	for _, line := range []string{"Building the simulation", "Planning"} {
		check(fmt.Sprintf("as %q was logged", line), interruptAt(t, args, line, 0, 30*time.Second))
	}
	// At tenths of the plan's length, which is the shortest run seen: a
	// machine less loaded than for the first run plans faster, and a
	// signal timed from a slow run would land after the end.
	shortest := full.ran
	for i := 1; i <= 9; i++ {
		for retry := 0; ; retry++ {
			at := shortest * time.Duration(i) / 10
			e := interruptAt(t, args, first, at, 30*time.Second)
			check(fmt.Sprintf("%s after %q", at.Round(time.Millisecond), first), e)
			if e.err != nil || e.ran >= shortest || retry == 3 {
				break
			}
			shortest = e.ran
		}
	}
	t.Logf("%d of 11 runs interrupted; the shortest plan took %s", interrupted, shortest.Round(time.Millisecond))
	if interrupted < 7 {
		t.Errorf("only %d of 11 runs were interrupted before they ended: the test shows little", interrupted)
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

// never is a delay after which interruptAt sends no signal.
const never time.Duration = -1

// hangs is how long after SIGTERM a large plan still running has hung: it
// ends within seconds (logged), many more on a loaded machine.
const hangs = 2 * time.Minute

// ending is how a run that interruptAt started ended: its output, its
// error, how long it ran from the line it was timed from, and how long it
// took to end after the signal (0 if it ended first).
type ending struct {
	stdout, stderr string
	err            error
	ran, took      time.Duration
}

// interruptAt starts the binary with args and sends SIGTERM delay after the
// first line of its stderr that contains at ("" times from the start), or
// none if delay is never; the test fails if the binary is still running
// limit after the signal (or the line, with no signal).
func interruptAt(t *testing.T, args []string, at string, delay, limit time.Duration) ending {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Dir, cmd.Env = root, env
	var out bytes.Buffer
	cmd.Stdout = &out
	pipe, perr := cmd.StderrPipe()
	if perr != nil {
		t.Fatal(perr)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var lines strings.Builder
	sc := bufio.NewScanner(pipe)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	seen := at == ""
	for !seen && sc.Scan() {
		lines.WriteString(sc.Text() + "\n")
		seen = strings.Contains(sc.Text(), at)
	}
	if !seen {
		_ = cmd.Wait()
		t.Fatalf("%v: no line %q on stderr:\n%s", args, at, lines.String())
	}
	from := time.Now()
	rest := make(chan string, 1)
	go func() { b, _ := io.ReadAll(pipe); rest <- string(b) }()
	done := make(chan error, 1)
	go func() { r := <-rest; done <- cmd.Wait(); rest <- r }()
	end := func(err error, signalled time.Time) ending {
		e := ending{err: err, ran: time.Since(from)}
		if !signalled.IsZero() {
			e.took = time.Since(signalled)
		}
		e.stdout, e.stderr = out.String(), lines.String()+<-rest
		return e
	}
	var signalled time.Time
	if delay != never {
		select {
		case err := <-done:
			return end(err, signalled)
		case <-time.After(delay):
		}
		_ = cmd.Process.Signal(syscall.SIGTERM)
		signalled = time.Now()
	}
	select {
	case err := <-done:
		return end(err, signalled)
	case <-time.After(limit):
		_ = cmd.Process.Kill()
		if signalled.IsZero() {
			t.Fatalf("%v: still running %s after %q", args, limit, at)
		}
		t.Fatalf("%v: SIGTERM %s after %q: still running %s later", args, delay, at, limit)
		return ending{}
	}
}

// TestInterruptedGangPlanIsNoPlan: SIGTERM while the planner moves a gang
// of 10,000 pods whole (at its first gang move, and a while after) ends
// the plan promptly with an error saying it was interrupted, no plan on
// stdout and no file left beside the snapshot.
func TestInterruptedGangPlanIsNoPlan(t *testing.T) {
	if testing.Short() {
		t.Skip("generates and plans a cluster of 10,000 gang members")
	}
	// Beside the other tests: what it checks holds wherever the signal lands.
	t.Parallel()
	dir := t.TempDir()
	snap := filepath.Join(dir, "cluster.json")
	if r := rebalancer(t, []string{"snapshot", "synthetic", "--nodes", "500", "--pods", "25000", "--gang", "10000", "--seed", "4", "-o", snap}); r.exit != 0 {
		t.Fatalf("snapshot synthetic: exit %d\n%s", r.exit, r.stderr)
	}
	args := planArgs(map[string]string{"--snapshot": snap}, "-o", "json", "-v", "2")
	for _, delay := range []time.Duration{0, 500 * time.Millisecond, 2 * time.Second} {
		e := interruptAt(t, args, "Moving a gang whole", delay, hangs)
		stdout, stderr, took, err := e.stdout, e.stderr, e.took, e.err
		var exit *exec.ExitError
		switch {
		case err == nil:
			t.Logf("SIGTERM %s into gang planning came after the end", delay)
			continue
		case !errors.As(err, &exit):
			t.Fatal(err)
		}
		t.Logf("SIGTERM %s into gang planning: exit %d %s later", delay, exit.ExitCode(), took.Round(time.Millisecond))
		if stdout != "" {
			t.Errorf("SIGTERM %s into gang planning: %d bytes on stdout, want no plan:\n%.300s", delay, len(stdout), stdout)
		}
		if msg := errorLines(stderr); !strings.Contains(msg, "interrupted (terminated signal received)") {
			t.Errorf("SIGTERM %s into gang planning: %q, want an error saying the plan was interrupted", delay, msg)
		}
		if left := filesBut(t, dir, "cluster.json"); len(left) > 0 {
			t.Errorf("SIGTERM %s into gang planning left %v beside the snapshot", delay, left)
		}
	}
}

// TestInterruptedSyntheticLeavesNoFile: SIGTERM while snapshot synthetic
// generates or writes a cluster of up to 5,000 nodes ends it promptly with an
// error saying it was interrupted, leaving neither the snapshot nor its
// temporary file; a signal after the end leaves the whole snapshot.
func TestInterruptedSyntheticLeavesNoFile(t *testing.T) {
	if testing.Short() {
		t.Skip("generates clusters of 5,000 nodes")
	}
	// YAML is written ten times slower: at 2,000 nodes it takes as long
	// as JSON at 5,000.
	for _, c := range []struct{ name, nodes, pods string }{{"cluster.yaml", "2000", "60000"}, {"cluster.json", "5000", "150000"}} {
		name, dir := c.name, t.TempDir()
		args := []string{"snapshot", "synthetic", "--nodes", c.nodes, "--pods", c.pods, "--gang", "10000", "--seed", "4", "-o", filepath.Join(dir, name)}
		whole := interruptAt(t, args, "", never, 5*time.Minute)
		if whole.err != nil {
			t.Fatalf("snapshot synthetic: %v\n%s", whole.err, whole.stderr)
		}
		shortest, retries := whole.ran, 0
		if err := os.Remove(filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
		interrupted := 0
		for i := 1; i <= 4; i++ {
			// At fifths of the shortest run seen: one timed from a run on
			// a busier machine would land after the end.
			delay := shortest * time.Duration(i) / 5
			e := interruptAt(t, args, "", delay, 30*time.Second)
			stderr, took, err := e.stderr, e.took, e.err
			var exit *exec.ExitError
			switch {
			case err == nil:
				t.Logf("%s: SIGTERM at %s came after the end", name, delay.Round(time.Millisecond))
				if left := filesBut(t, dir, name); len(left) > 0 {
					t.Errorf("%s: written, with %v beside it", name, left)
				}
				if err := os.Remove(filepath.Join(dir, name)); err != nil {
					t.Fatal(err)
				}
				if e.ran < shortest && retries < 3 {
					shortest, retries = e.ran, retries+1
					i--
				}
				continue
			case !errors.As(err, &exit):
				t.Fatal(err)
			}
			interrupted++
			t.Logf("%s: SIGTERM at %s: exit %d %s later", name, delay.Round(time.Millisecond), exit.ExitCode(), took.Round(time.Millisecond))
			if msg := errorLines(stderr); !strings.Contains(msg, "interrupted (terminated signal received)") {
				t.Errorf("%s: SIGTERM at %s: %q, want an error saying it was interrupted", name, delay.Round(time.Millisecond), msg)
			}
			if left := filesBut(t, dir); len(left) > 0 {
				t.Errorf("%s: SIGTERM at %s left %v", name, delay.Round(time.Millisecond), left)
			}
		}
		if interrupted < 2 {
			t.Errorf("%s: only %d of 4 runs were interrupted before they ended: the test shows little", name, interrupted)
		}
	}
}

// filesBut lists the files in dir, hidden ones included, but those named.
func filesBut(t *testing.T, dir string, but ...string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var left []string
	for _, e := range entries {
		if !slices.Contains(but, e.Name()) {
			left = append(left, e.Name())
		}
	}
	return left
}

// TestInterruptedLargePlanEveryPhase: at Kubernetes' scale (5,000 nodes,
// 150,000 pods, a gang of 10,000), SIGTERM while plan reads the snapshot,
// builds the simulation or plans ends it with an error saying it was
// interrupted and no plan on stdout. How long it took after the signal is
// logged: the README promises about 2 s in every phase.
func TestInterruptedLargePlanEveryPhase(t *testing.T) {
	if testing.Short() {
		t.Skip("plans a cluster of 5,000 nodes")
	}
	// Beside the other tests: what it checks holds wherever the signal lands.
	t.Parallel()
	dir := t.TempDir()
	snap := filepath.Join(dir, "cluster.json")
	if r := rebalancer(t, []string{"snapshot", "synthetic", "--nodes", "5000", "--pods", "150000", "--gang", "10000", "--seed", "4", "-o", snap}); r.exit != 0 {
		t.Fatalf("snapshot synthetic: exit %d\n%s", r.exit, r.stderr)
	}
	args := planArgs(map[string]string{"--snapshot": snap}, "-o", "json", "-v", "2")
	for _, at := range []struct {
		line  string
		delay time.Duration
	}{
		{"Reading the cluster", 0}, {"Reading the cluster", 2 * time.Second}, {"Reading the cluster", 5 * time.Second},
		{"Building the simulation", 0}, {"Building the simulation", 700 * time.Millisecond},
		{"Planning", 0}, {"Moving a gang whole", 0}, {"Moving a gang whole", 3 * time.Second},
	} {
		e := interruptAt(t, args, at.line, at.delay, hangs)
		stdout, stderr, took, err := e.stdout, e.stderr, e.took, e.err
		var exit *exec.ExitError
		switch {
		case err == nil:
			t.Logf("SIGTERM %s after %q came after the end", at.delay, at.line)
			continue
		case !errors.As(err, &exit):
			t.Fatal(err)
		}
		t.Logf("SIGTERM %s after %q: exit %d %s later", at.delay, at.line, exit.ExitCode(), took.Round(time.Millisecond))
		if stdout != "" {
			t.Errorf("SIGTERM %s after %q: %d bytes on stdout, want no plan", at.delay, at.line, len(stdout))
		}
		if msg := errorLines(stderr); !strings.Contains(msg, "interrupted (terminated signal received)") {
			t.Errorf("SIGTERM %s after %q: %q, want an error saying the plan was interrupted", at.delay, at.line, msg)
		}
		if left := filesBut(t, dir, "cluster.json"); len(left) > 0 {
			t.Errorf("SIGTERM %s after %q left %v beside the snapshot", at.delay, at.line, left)
		}
	}
}
