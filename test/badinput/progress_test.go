package badinput

import (
	"bytes"
	"io"
	"os/exec"
	"strings"
	"testing"

	"github.com/creack/pty"
)

// TestSimulateProgressOnATerminal: with stderr a terminal, simulate shows a
// bar of its rounds rather than a line each; stdout keeps only the result.
func TestSimulateProgressOnATerminal(t *testing.T) {
	t.Parallel()
	ptmx, tty, err := pty.Open()
	if err != nil {
		t.Fatal(err)
	}
	defer ptmx.Close()
	cmd := exec.Command(bin, simulateArgs("--rounds", "3", "--baseline", "upstream")...)
	cmd.Dir, cmd.Env = root, env
	var stdout bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, tty
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	tty.Close() // the child holds its own copy
	var screen bytes.Buffer
	copied := make(chan struct{})
	go func() { _, _ = io.Copy(&screen, ptmx); close(copied) }() // ends when the child closes the terminal
	if err := cmd.Wait(); err != nil {
		t.Fatalf("simulate: %v\n%s", err, screen.String())
	}
	<-copied
	got := screen.String()
	if !strings.Contains(got, "6/6") || !strings.Contains(got, "upstream: ") {
		t.Errorf("the terminal shows no bar of the 6 rounds:\n%q", got)
	}
	if strings.Contains(got, "simulate [") {
		t.Errorf("the terminal shows the plain lines meant for logs:\n%q", got)
	}
	if !strings.HasPrefix(stdout.String(), "REBALANCER") {
		t.Errorf("stdout is not the result alone:\n%s", stdout.String())
	}
}
