// Package readfile reads rebalancer's input files with a cap on their size,
// so that a wrong path (/dev/zero, a disk image) is an error naming the file
// instead of a process that runs out of memory, and reads "-" as standard
// input where a command allows it (as kubectl's -f -).
package readfile

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
)

// Caps on input sizes.
const (
	// ConfigLimit caps a DeschedulerPolicy or KubeSchedulerConfiguration file.
	ConfigLimit = 4 << 20
	// SnapshotLimit caps a snapshot: one of 5,000 nodes and 150,000 pods,
	// as `kubectl get -o yaml` writes it, is about 150 MiB.
	SnapshotLimit = 2 << 30
	// CSVLimit caps a trace CSV file.
	CSVLimit = 1 << 30
)

// Stdin is the name "-" stands for in messages.
const Stdin = "stdin"

// Read reads the file at path, or standard input when path is "-", and
// fails when it holds more than limit bytes. Errors start with the path.
func Read(path string, limit int64) ([]byte, error) {
	var r io.Reader
	var buf []byte
	if path == "-" {
		r = os.Stdin
	} else {
		f, err := os.Open(path)
		if err != nil {
			var pathErr *fs.PathError
			if errors.As(err, &pathErr) {
				err = pathErr.Err // its message repeats the path
			}
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		defer f.Close()
		r = f
		// A buffer of the file's size up front: growing one by doubling
		// copies and zeroes a 150 MiB snapshot several times over.
		if st, err := f.Stat(); err == nil && st.Mode().IsRegular() && st.Size() <= limit {
			buf = make([]byte, 0, st.Size()+1) // +1: the read that finds the end needs no room
		}
	}
	data, err := readAll(io.LimitReader(r, limit+1), buf)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", Name(path), err)
	}
	if int64(len(data)) > limit {
		return nil, fmt.Errorf("%s: larger than %s, the most rebalancer reads from such a file", Name(path), size(limit))
	}
	return data, nil
}

// Name is how messages name path: "stdin" for "-".
func Name(path string) string {
	if path == "-" {
		return Stdin
	}
	return path
}

func size(n int64) string {
	switch {
	case n >= 1<<30 && n%(1<<30) == 0:
		return fmt.Sprintf("%d GiB", n>>30)
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	}
	return fmt.Sprintf("%d bytes", n)
}

// readAll is io.ReadAll into buf's capacity, growing it only if the input
// is longer (a file that grew since it was measured).
func readAll(r io.Reader, buf []byte) ([]byte, error) {
	if buf == nil {
		return io.ReadAll(r)
	}
	for {
		n, err := r.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if err == io.EOF {
			return buf, nil
		}
		if err != nil {
			return buf, err
		}
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)] // let append pick the next size
		}
	}
}
