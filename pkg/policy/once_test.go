//go:build unix

package policy_test

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"sigs.k8s.io/descheduler/pkg/framework/pluginregistry"

	"github.com/rebalancer-dev/rebalancer/pkg/policy"
)

// TestLoadReadsTheFileOnce: a FIFO yields its bytes to one reader only, so
// loading a policy from one succeeds only if the file is read once (what is
// checked strictly is what the descheduler loads). A second read would
// block on the FIFO until the test's deadline.
func TestLoadReadsTheFileOnce(t *testing.T) {
	data, err := os.ReadFile("../../policies/binpacking-policy.yaml")
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "policy.yaml")
	if err := syscall.Mkfifo(path, 0o600); err != nil {
		t.Skipf("no FIFO here: %v", err)
	}
	go func() {
		f, err := os.OpenFile(path, os.O_WRONLY, 0) // blocks until Load opens it
		if err != nil {
			return
		}
		_, _ = f.Write(data)
		_ = f.Close()
	}()
	type result struct{ err error }
	done := make(chan result, 1)
	go func() {
		p, err := policy.Load(path, client(), pluginregistry.PluginRegistry)
		if err == nil && len(p.Profiles) == 0 {
			t.Error("loaded no profiles")
		}
		done <- result{err}
	}()
	select {
	case r := <-done:
		if r.err != nil {
			t.Fatal(r.err)
		}
	case <-time.After(30 * time.Second):
		// Unblock the second reader so the test binary can exit.
		if f, err := os.OpenFile(path, os.O_WRONLY, 0); err == nil {
			_ = f.Close()
		}
		t.Fatal("Load is still reading: it opened the file a second time")
	}
}
