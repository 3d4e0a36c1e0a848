package main

import (
	"context"
	"io"
	"log"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

var testCreated = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// fakeBinaries writes stand-ins for both binaries of a platform: the build
// packs whatever it is given, so tiny files make the unit tests fast.
func fakeBinaries(t *testing.T, platform string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), strings.ReplaceAll(platform, "/", "_"))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, b := range []string{"rebalancer", "rebalancer-scheduler"} {
		if err := os.WriteFile(filepath.Join(dir, b), []byte(b+" for "+platform), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// writeTestLayout builds an image of fake binaries into a layout.
func writeTestLayout(t *testing.T, dir string, bins map[string]string) string {
	t.Helper()
	idx, err := buildIndex(buildOptions{platforms: bins, binaries: []string{"rebalancer", "rebalancer-scheduler"}, version: "v0.1.0", revision: "abc", created: testCreated})
	if err != nil {
		t.Fatal(err)
	}
	if err := writeLayout(dir, idx, "v0.1.0"); err != nil {
		t.Fatal(err)
	}
	d, err := idx.Digest()
	if err != nil {
		t.Fatal(err)
	}
	return d.String()
}

// Two builds of the same inputs, at different times and into different
// directories, are the same bytes; and a rebuild replaces the layout
// rather than adding to it.
func TestBuildIsReproducible(t *testing.T) {
	bins := map[string]string{"linux/amd64": fakeBinaries(t, "linux/amd64"), "linux/arm64": fakeBinaries(t, "linux/arm64")}
	a := filepath.Join(t.TempDir(), "a")
	b := filepath.Join(t.TempDir(), "b")
	first := writeTestLayout(t, a, bins)
	time.Sleep(1100 * time.Millisecond) // a clock that leaked in would now differ
	if second := writeTestLayout(t, b, bins); first != second {
		t.Fatalf("two builds of the same inputs: %s, then %s", first, second)
	}
	if again := writeTestLayout(t, a, bins); again != first {
		t.Fatalf("a rebuild into the same directory: %s, want %s", again, first)
	}
	blobs, err := os.ReadDir(filepath.Join(a, "blobs", "sha256"))
	if err != nil {
		t.Fatal(err)
	}
	// The index, two manifests, two configs, two binary layers, one
	// shared base layer.
	if len(blobs) != 8 {
		t.Errorf("%d blobs after a rebuild, want 8", len(blobs))
	}

	// The release's tarball of a layout is reproducible too.
	tarA, tarB := filepath.Join(t.TempDir(), "a.tar"), filepath.Join(t.TempDir(), "b.tar")
	for _, c := range [][2]string{{a, tarA}, {b, tarB}} {
		if err := runTar([]string{"-C", c[0], "-created", testCreated.Format(time.RFC3339), "-o", c[1]}); err != nil {
			t.Fatal(err)
		}
	}
	ta, _ := os.ReadFile(tarA)
	tb, _ := os.ReadFile(tarB)
	if len(ta) == 0 || string(ta) != string(tb) {
		t.Errorf("tarballs of two identical layouts differ (%d and %d bytes)", len(ta), len(tb))
	}
}

// push uploads the index and everything it references to a registry (an
// in-process one: the same protocol a real registry speaks), under the
// layout's digest.
func TestPush(t *testing.T) {
	t.Setenv("DOCKER_CONFIG", t.TempDir()) // no credentials from this machine
	layoutDir := filepath.Join(t.TempDir(), "image")
	want := writeTestLayout(t, layoutDir, map[string]string{
		"linux/amd64": fakeBinaries(t, "linux/amd64"), "linux/arm64": fakeBinaries(t, "linux/arm64"),
	})
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	defer srv.Close()
	ref := strings.TrimPrefix(srv.URL, "http://") + "/rebalancer:v0.1.0"

	got, err := push(context.Background(), layoutDir, ref)
	if err != nil {
		t.Fatal(err)
	}
	if got.String() != want {
		t.Errorf("pushed %s, layout has %s", got, want)
	}
	r, err := name.ParseReference(ref)
	if err != nil {
		t.Fatal(err)
	}
	idx, err := remote.Index(r)
	if err != nil {
		t.Fatal(err)
	}
	if d, _ := idx.Digest(); d.String() != want {
		t.Errorf("registry has %s under the tag, want %s", d, want)
	}
	m, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	for _, desc := range m.Manifests {
		img, err := idx.Image(desc.Digest)
		if err != nil {
			t.Fatal(err)
		}
		// Reading every layer back checks the blobs arrived whole.
		layers, err := img.Layers()
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range layers {
			rc, err := l.Compressed()
			if err != nil {
				t.Fatalf("%s: %v", desc.Platform, err)
			}
			rc.Close()
		}
	}

	if _, err := push(context.Background(), filepath.Join(t.TempDir(), "none"), ref); err == nil {
		t.Error("pushing a missing layout succeeded")
	}
}

// rootfs writes the image's base files with the image's modes, for the
// Dockerfile.
func TestRootfs(t *testing.T) {
	dir := t.TempDir()
	if err := runRootfs([]string{"-o", dir}); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(filepath.Join(dir, "tmp"))
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode()&os.ModeSticky == 0 || fi.Mode().Perm() != 0o777 {
		t.Errorf("tmp: mode %s, want drwxrwxrwt", fi.Mode())
	}
	for _, f := range []string{caFile, "etc/passwd", "etc/group"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Error(err)
		}
	}
}
