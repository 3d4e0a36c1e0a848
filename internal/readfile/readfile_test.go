package readfile

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/iotest"
)

func TestRead(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, data []byte) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	data := bytes.Repeat([]byte("0123456789"), 1000)
	path := write("f", data)
	for _, limit := range []int64{int64(len(data)), int64(len(data)) + 1, 1 << 20} {
		got, err := Read(path, limit)
		if err != nil || !bytes.Equal(got, data) {
			t.Fatalf("limit %d: %d bytes, %v; want the file's %d", limit, len(got), err, len(data))
		}
	}
	if _, err := Read(path, int64(len(data))-1); err == nil || !strings.Contains(err.Error(), "larger than") {
		t.Fatalf("a file over the limit: %v", err)
	}
	if _, err := Read(filepath.Join(dir, "missing"), 10); err == nil || !strings.HasPrefix(err.Error(), filepath.Join(dir, "missing")+": ") {
		t.Fatalf("a missing file: %v", err)
	}
}

// A file that grows after it was measured is read whole, in small reads too.
func TestReadAllGrowsPastTheGuess(t *testing.T) {
	data := bytes.Repeat([]byte("x"), 10_000)
	for _, guess := range []int{0, 1, 100, 9_999, 10_000, 20_000} {
		got, err := readAll(iotest.OneByteReader(bytes.NewReader(data)), make([]byte, 0, guess))
		if err != nil || !bytes.Equal(got, data) {
			t.Fatalf("guess %d: %d bytes, %v", guess, len(got), err)
		}
	}
	if _, err := readAll(iotest.ErrReader(os.ErrClosed), make([]byte, 0, 8)); err != os.ErrClosed {
		t.Fatalf("a read error: %v", err)
	}
}
