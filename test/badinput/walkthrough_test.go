package badinput

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// walkthrough is the page whose commands this test runs.
const walkthrough = "docs/openb-walkthrough.md"

// step is one command of a console block and the output the page prints
// for it.
type step struct {
	command, want string
}

// consoleSteps reads the ```console blocks of a Markdown page: "$ " lines
// are commands, the lines after one its stdout.
func consoleSteps(t *testing.T, path string) []step {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var steps []step
	in := false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "```console":
			in = true
		case in && line == "```":
			in = false
		case in && strings.HasPrefix(line, "$ "):
			steps = append(steps, step{command: strings.TrimPrefix(line, "$ ")})
		case in && len(steps) > 0:
			steps[len(steps)-1].want += line + "\n"
		}
	}
	return steps
}

// tidy drops the spaces that end lines (tabwriter pads empty last columns)
// and the blank lines that end the output.
func tidy(s string) string {
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		lines[i] = strings.TrimRight(l, " \t")
	}
	return strings.TrimRight(strings.Join(lines, "\n"), "\n")
}

// TestWalkthroughReproducesItsFigures runs the openb walkthrough's commands
// as a reader would (rebalancer on PATH, the trace in $OPENB, policies/ in
// the working directory) and compares what each prints with the page.
func TestWalkthroughReproducesItsFigures(t *testing.T) {
	t.Parallel()
	trace := os.Getenv("OPENB_DIR")
	if trace == "" {
		trace = filepath.Join(root, "..", "shared", "data", "openb")
	}
	if _, err := os.Stat(filepath.Join(trace, "openb_pod_list_default.csv")); err != nil {
		t.Skipf("the openb trace is not here (set OPENB_DIR to its directory): %v", err)
	}
	steps := consoleSteps(t, filepath.Join(root, walkthrough))
	if len(steps) < 3 {
		t.Fatalf("%s: %d console commands, want the walkthrough's", walkthrough, len(steps))
	}
	dir := t.TempDir()
	if err := os.Symlink(filepath.Join(root, "policies"), filepath.Join(dir, "policies")); err != nil {
		t.Fatal(err)
	}
	for _, s := range steps {
		cmd := exec.Command("sh", "-c", s.command)
		cmd.Dir = dir
		cmd.Env = append(env, "PATH="+filepath.Dir(bin)+string(os.PathListSeparator)+os.Getenv("PATH"), "OPENB="+trace)
		var stderr strings.Builder
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("%s: %v\n%s", s.command, err, stderr.String())
		}
		if got, want := tidy(string(out)), tidy(s.want); got != want {
			t.Errorf("%s printed:\n%s\n\n%s prints:\n%s", s.command, got, walkthrough, want)
		}
	}
}
