package cli

import (
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// TestWrittenFilesHonourTheUmask: snapshots and reports are created as the
// shell creates files, 0666 less the umask.
func TestWrittenFilesHonourTheUmask(t *testing.T) {
	for _, tc := range []struct {
		umask int
		want  fs.FileMode
	}{{0o022, 0o644}, {0o077, 0o600}, {0o002, 0o664}} {
		old := syscall.Umask(tc.umask)
		path := filepath.Join(t.TempDir(), "out.yaml")
		err := writeAtomically(path, func(w io.Writer) error { _, err := io.WriteString(w, "x"); return err }, nil)
		syscall.Umask(old)
		if err != nil {
			t.Fatal(err)
		}
		info, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		if got := info.Mode().Perm(); got != tc.want {
			t.Errorf("umask %03o: mode %03o, want %03o", tc.umask, got, tc.want)
		}
		if entries, _ := os.ReadDir(filepath.Dir(path)); len(entries) != 1 {
			t.Errorf("umask %03o: %d files left beside the output, want none", tc.umask, len(entries)-1)
		}
	}
}
