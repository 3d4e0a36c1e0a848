package main

import (
	"archive/tar"
	"bytes"
	"encoding/pem"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"golang.org/x/crypto/x509roots/fallback/bundle"
)

// The user the image runs as, as distroless and Chainguard's static images
// name it, so securityContexts written for those keep working.
const (
	nonrootID   = 65532
	nonrootUser = "65532:65532"
	caFile      = "etc/ssl/certs/ca-certificates.crt"
)

// entry is one directory or regular file of the image's filesystem.
type entry struct {
	name     string // slash-separated, relative to /
	dir      bool
	mode     int64 // permission bits; tar's c_ISVTX (01000) for sticky
	uid, gid int
	data     []byte
}

// baseEntries is everything in the image but the binaries: the CA roots, a
// passwd and group that name the nonroot user (Go's os/user and some client
// libraries look it up), its home, and a world-writable /tmp. The Dockerfile
// copies the same entries, written out by `image rootfs`.
func baseEntries() []entry {
	dir := func(name string, mode int64) entry { return entry{name: name, dir: true, mode: mode} }
	file := func(name, data string) entry { return entry{name: name, mode: 0o644, data: []byte(data)} }
	home := dir("home/nonroot", 0o700)
	home.uid, home.gid = nonrootID, nonrootID
	return []entry{
		dir("etc", 0o755),
		file("etc/group", "root:x:0:\nnonroot:x:65532:\n"),
		file("etc/passwd", "root:x:0:0:root:/root:/sbin/nologin\n"+
			"nonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n"),
		dir("etc/ssl", 0o755),
		dir("etc/ssl/certs", 0o755),
		{name: caFile, mode: 0o644, data: caBundle()},
		dir("home", 0o755),
		home,
		dir("tmp", 0o1777),
	}
}

// caBundle is Mozilla's roots as golang.org/x/crypto/x509roots/fallback
// carries them, in PEM: pinned by go.sum, and nothing read from the build
// machine's /etc. Roots with a constraint (a distrust-after date) are left
// out: a PEM file cannot carry the constraint, and trusting such a root
// without it would trust more than Mozilla does.
func caBundle() []byte {
	var b bytes.Buffer
	for r := range bundle.Roots() {
		if r.Constraint == nil {
			// Writing to a bytes.Buffer does not fail.
			_ = pem.Encode(&b, &pem.Block{Type: "CERTIFICATE", Bytes: r.Certificate})
		}
	}
	return b.Bytes()
}

// binaryEntries are the named binaries of one platform from dir, at /.
func binaryEntries(dir string, names []string) ([]entry, error) {
	var es []entry
	for _, name := range names {
		data, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			return nil, err
		}
		es = append(es, entry{name: name, mode: 0o755, data: data})
	}
	return es, nil
}

// dirEntries are the files under root as entries, with modes normalised
// (0755 directories, 0644 files) and root-owned: for a tarball that does
// not depend on the umask or user of the machine that wrote the files.
func dirEntries(root string) ([]entry, error) {
	var es []entry
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil || path == root {
			return err
		}
		rel, err := filepath.Rel(root, path)
		if err != nil {
			return err
		}
		e := entry{name: filepath.ToSlash(rel), dir: d.IsDir(), mode: 0o755}
		switch {
		case d.IsDir():
		case d.Type().IsRegular():
			e.mode = 0o644
			if e.data, err = os.ReadFile(path); err != nil {
				return err
			}
		default:
			return fmt.Errorf("%s: not a regular file or directory", path)
		}
		es = append(es, e)
		return nil
	})
	return es, err
}

// writeTar writes entries as a tar stream that depends on nothing but
// them and mtime: sorted by name (so a directory comes before what it
// holds), every time mtime, no user or group names.
func writeTar(w io.Writer, entries []entry, mtime time.Time) error {
	entries = slices.SortedFunc(slices.Values(entries), func(a, b entry) int { return strings.Compare(a.name, b.name) })
	tw := tar.NewWriter(w)
	for _, e := range entries {
		h := &tar.Header{
			Name: e.name, Typeflag: tar.TypeReg, Mode: e.mode, Uid: e.uid, Gid: e.gid,
			Size: int64(len(e.data)), ModTime: mtime, Format: tar.FormatPAX,
		}
		if e.dir {
			h.Name += "/"
			h.Typeflag = tar.TypeDir
		}
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		if _, err := tw.Write(e.data); err != nil {
			return err
		}
	}
	return tw.Close()
}

// writeRootfs writes entries under dir, for the Dockerfile to copy into its
// scratch stage. Owners are set only when running as root (as a Docker
// build stage does): nobody else can give a directory to 65532.
func writeRootfs(dir string, entries []entry) error {
	for _, e := range entries {
		path := filepath.Join(dir, filepath.FromSlash(e.name))
		var err error
		if e.dir {
			err = os.MkdirAll(path, 0o755)
		} else {
			err = os.WriteFile(path, e.data, 0o644)
		}
		if err != nil {
			return err
		}
		// Chmod after creating: the umask applies to creation, and
		// MkdirAll leaves out the sticky bit.
		mode := fs.FileMode(e.mode & 0o777)
		if e.mode&0o1000 != 0 {
			mode |= fs.ModeSticky
		}
		if err := os.Chmod(path, mode); err != nil {
			return err
		}
		if os.Geteuid() == 0 {
			if err := os.Lchown(path, e.uid, e.gid); err != nil {
				return err
			}
		}
	}
	return nil
}
