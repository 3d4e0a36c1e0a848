package main

import (
	"archive/tar"
	"bytes"
	"crypto/x509"
	"debug/elf"
	"encoding/json"
	"encoding/pem"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
)

// TestBuiltImage checks an image `make image` wrote, as `make test-image`
// runs it: TEST_IMAGE_LAYOUT is the layout, TEST_IMAGE_PLATFORMS the
// platforms it must have (space-separated), TEST_IMAGE_BINARIES its
// binaries (comma-separated, the first the entrypoint), and
// TEST_IMAGE_VERSION, _REVISION, _CREATED and _UPSTREAM (the Kubernetes or
// Karmada version its scheduler reports) what the Makefile built it with. Without
// TEST_IMAGE_LAYOUT there is nothing to check.
func TestBuiltImage(t *testing.T) {
	dir := os.Getenv("TEST_IMAGE_LAYOUT")
	if dir == "" {
		t.Skip("TEST_IMAGE_LAYOUT not set: run make test-image")
	}
	want := map[string]string{}
	for _, k := range []string{"PLATFORMS", "BINARIES", "VERSION", "REVISION", "CREATED", "UPSTREAM"} {
		if want[k] = os.Getenv("TEST_IMAGE_" + k); want[k] == "" {
			t.Fatalf("TEST_IMAGE_%s not set", k)
		}
	}
	idx, err := layoutIndex(dir)
	if err != nil {
		t.Fatal(err)
	}
	m, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	var platforms []string
	for _, desc := range m.Manifests {
		p := desc.Platform.String()
		platforms = append(platforms, p)
		t.Run(p, func(t *testing.T) {
			img, err := idx.Image(desc.Digest)
			if err != nil {
				t.Fatal(err)
			}
			bins := strings.Split(want["BINARIES"], ",")
			labels := checkConfig(t, img, *desc.Platform, bins[0], want)
			files := readFS(t, img)
			checkFS(t, files)
			checkBinaries(t, files, *desc.Platform, bins, labels, want["UPSTREAM"])
		})
	}
	wantPlatforms := strings.Fields(want["PLATFORMS"])
	slices.Sort(platforms)
	slices.Sort(wantPlatforms)
	if !slices.Equal(platforms, wantPlatforms) {
		t.Errorf("index platforms %v, want %v", platforms, wantPlatforms)
	}
	if m.Annotations[labelVersion] != want["VERSION"] {
		t.Errorf("index annotation %s = %q, want %q", labelVersion, m.Annotations[labelVersion], want["VERSION"])
	}
}

// checkConfig checks the image's config and returns its labels.
func checkConfig(t *testing.T, img v1.Image, p v1.Platform, entrypoint string, want map[string]string) map[string]string {
	t.Helper()
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if cf.OS != p.OS || cf.Architecture != p.Architecture {
		t.Errorf("config is for %s/%s, index says %s", cf.OS, cf.Architecture, p)
	}
	if !slices.Equal(cf.Config.Entrypoint, []string{"/" + entrypoint}) {
		t.Errorf("entrypoint %q, want [/%s]", cf.Config.Entrypoint, entrypoint)
	}
	if cf.Config.User != "65532:65532" {
		t.Errorf("user %q, want 65532:65532", cf.Config.User)
	}
	labels := map[string]string{
		labelVersion: want["VERSION"], labelRevision: want["REVISION"], labelCreated: want["CREATED"],
		labelSource: "https://github.com/rebalancer-dev/rebalancer", labelLicenses: "Apache-2.0",
	}
	for k, v := range labels {
		if got := cf.Config.Labels[k]; got != v {
			t.Errorf("label %s = %q, want %q", k, got, v)
		}
	}
	return cf.Config.Labels
}

// file is a regular file or directory of the image's filesystem.
type file struct {
	hdr  *tar.Header
	data []byte
}

// readFS is the image's filesystem, its layers applied.
func readFS(t *testing.T, img v1.Image) map[string]file {
	t.Helper()
	rc := mutate.Extract(img)
	defer rc.Close()
	files := map[string]file{}
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return files
		}
		if err != nil {
			t.Fatal(err)
		}
		data, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		files[strings.Trim(h.Name, "/")] = file{h, data}
	}
}

func checkFS(t *testing.T, files map[string]file) {
	t.Helper()
	for name := range files {
		if name == "bin" || strings.HasPrefix(name, "bin/") || filepath.Base(name) == "sh" {
			t.Errorf("/%s in the image: it has no shell", name)
		}
	}
	for name, f := range files {
		owner := [2]int{f.hdr.Uid, f.hdr.Gid}
		if name == "home/nonroot" {
			if owner != [2]int{65532, 65532} || f.hdr.Typeflag != tar.TypeDir {
				t.Errorf("/home/nonroot: owner %v, want a directory of 65532:65532", owner)
			}
		} else if owner != [2]int{} {
			t.Errorf("/%s: owner %v, want 0:0", name, owner)
		}
	}
	if tmp, ok := files["tmp"]; !ok || tmp.hdr.Typeflag != tar.TypeDir || tmp.hdr.FileInfo().Mode()&os.ModeSticky == 0 || tmp.hdr.Mode&0o777 != 0o777 {
		t.Errorf("/tmp is not a directory of mode 1777")
	}
	if !strings.Contains(string(files["etc/passwd"].data), "\nnonroot:x:65532:65532:") ||
		!strings.Contains(string(files["etc/group"].data), "\nnonroot:x:65532:") {
		t.Errorf("/etc/passwd or /etc/group does not name nonroot 65532")
	}

	rest := files[caFile].data
	n := 0
	for {
		var b *pem.Block
		if b, rest = pem.Decode(rest); b == nil {
			break
		}
		if _, err := x509.ParseCertificate(b.Bytes); b.Type != "CERTIFICATE" || err != nil {
			t.Fatalf("/%s: block %d, %s: %v", caFile, n, b.Type, err)
		}
		n++
	}
	if n < 100 || len(bytes.TrimSpace(rest)) != 0 {
		t.Errorf("/%s: %d certificates then %d bytes that are not PEM", caFile, n, len(rest))
	}
}

// checkBinaries checks both binaries are static executables for the
// platform, and runs them where the test runs on that platform: they must
// report the version and commit the image's labels name, and the
// Kubernetes version k8s.
func checkBinaries(t *testing.T, files map[string]file, p v1.Platform, names []string, labels map[string]string, version string) {
	t.Helper()
	machine := map[string]elf.Machine{"amd64": elf.EM_X86_64, "arm64": elf.EM_AARCH64}[p.Architecture]
	dir := t.TempDir()
	for _, name := range names {
		f, ok := files[name]
		if !ok {
			t.Fatalf("no /%s", name)
		}
		if f.hdr.Mode&0o111 == 0 {
			t.Errorf("/%s is not executable: mode %o", name, f.hdr.Mode)
		}
		e, err := elf.NewFile(bytes.NewReader(f.data))
		if err != nil {
			t.Fatalf("/%s: %v", name, err)
		}
		if e.Machine != machine {
			t.Errorf("/%s is for %s, want %s", name, e.Machine, machine)
		}
		for _, prog := range e.Progs {
			if prog.Type == elf.PT_INTERP {
				t.Errorf("/%s is dynamically linked", name)
			}
		}
		if err := os.WriteFile(filepath.Join(dir, name), f.data, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if p.OS != runtime.GOOS || p.Architecture != runtime.GOARCH {
		return
	}

	for _, name := range names {
		checkVersion(t, filepath.Join(dir, name), labels, version)
	}
}

// checkVersion runs a binary of the image and checks the version it reports:
// rebalancer its own (the labels'), the schedulers the upstream version they
// are built on (Kubernetes', or Karmada's with rebalancer's as build
// metadata).
func checkVersion(t *testing.T, bin string, labels map[string]string, upstream string) {
	t.Helper()
	switch name := filepath.Base(bin); name {
	case "rebalancer":
		out, err := exec.Command(bin, "version", "-o", "json").Output()
		if err != nil {
			t.Fatalf("rebalancer version -o json: %v", err)
		}
		var v struct{ Version, Commit string }
		if err := json.Unmarshal(out, &v); err != nil {
			t.Fatalf("rebalancer version -o json: %v: %s", err, out)
		}
		if v.Version != labels[labelVersion] || v.Commit != labels[labelRevision] {
			t.Errorf("rebalancer version: %s %s, want the labels' %s %s", v.Version, v.Commit, labels[labelVersion], labels[labelRevision])
		}
	case "rebalancer-scheduler":
		out, err := exec.Command(bin, "--version").Output()
		if err != nil {
			t.Fatalf("rebalancer-scheduler --version: %v", err)
		}
		if first, _, _ := strings.Cut(string(out), "\n"); first != "Kubernetes "+upstream {
			t.Errorf("rebalancer-scheduler --version: %q, want Kubernetes %s", first, upstream)
		}
	case "rebalancer-karmada-scheduler":
		out, err := exec.Command(bin, "version").Output()
		if err != nil {
			t.Fatalf("rebalancer-karmada-scheduler version: %v", err)
		}
		for _, want := range []string{`GitVersion:"` + upstream + `"`, `GitCommit:"` + labels[labelRevision] + `"`} {
			if !strings.Contains(string(out), want) {
				t.Errorf("rebalancer-karmada-scheduler version: %q, want %s", out, want)
			}
		}
	default:
		t.Errorf("/%s: no version check for this binary", name)
	}
}
