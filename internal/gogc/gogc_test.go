package gogc

import (
	"os"
	"runtime/debug"
	"testing"
)

func TestDefault(t *testing.T) {
	restore := debug.SetGCPercent(100)
	defer debug.SetGCPercent(restore)

	t.Setenv("GOGC", "80") // the runtime read it at start; Default must leave the target alone
	Default()
	if got := debug.SetGCPercent(100); got != 100 {
		t.Errorf("with GOGC set, Default changed the target to %d", got)
	}

	unset(t)
	Default()
	if got := debug.SetGCPercent(100); got != Percent {
		t.Errorf("without GOGC, the target is %d, want %d", got, Percent)
	}
}

// unset removes GOGC from the environment for the rest of the test.
func unset(t *testing.T) {
	t.Helper()
	t.Setenv("GOGC", "")
	if err := os.Unsetenv("GOGC"); err != nil {
		t.Fatal(err)
	}
}
