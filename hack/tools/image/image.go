package main

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// The image's labels (and the index's annotations: registries such as GHCR
// read those of a multi-platform image from the index).
const (
	labelVersion  = "org.opencontainers.image.version"
	labelRevision = "org.opencontainers.image.revision"
	labelSource   = "org.opencontainers.image.source"
	labelLicenses = "org.opencontainers.image.licenses"
	labelCreated  = "org.opencontainers.image.created"
	source        = "https://github.com/rebalancer-dev/rebalancer"
	licenses      = "Apache-2.0"
	// refName names the index in the layout, as `docker buildx --output
	// type=oci` does, so skopeo, crane and oras can pick it by tag.
	refName = "org.opencontainers.image.ref.name"
)

// buildOptions is what `image build` is told.
type buildOptions struct {
	platforms map[string]string // os/arch: the directory of its binaries
	binaries  []string          // their names; the first is the entrypoint
	version   string
	revision  string
	created   time.Time
}

// buildIndex is the multi-platform image: per platform a base layer (the
// same bytes for every platform, so a registry stores it once) and a layer
// of the two binaries.
func buildIndex(o buildOptions) (v1.ImageIndex, error) {
	base, err := layer(baseEntries(), o.created)
	if err != nil {
		return nil, err
	}
	labels := map[string]string{
		labelVersion: o.version, labelRevision: o.revision, labelSource: source,
		labelLicenses: licenses, labelCreated: o.created.Format(time.RFC3339),
	}
	idx := mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
	// Sorted, so the index does not depend on the order of the flags.
	for _, p := range slices.Sorted(maps.Keys(o.platforms)) {
		platform, err := v1.ParsePlatform(p)
		if err != nil {
			return nil, err
		}
		img, err := platformImage(*platform, base, o.platforms[p], o.binaries, labels, o.created)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", p, err)
		}
		idx = mutate.AppendManifests(idx, mutate.IndexAddendum{
			Add: img, Descriptor: v1.Descriptor{Platform: platform},
		})
	}
	return mutate.Annotations(idx, labels).(v1.ImageIndex), nil
}

// platformImage is the image of one platform, its binaries from binDir, the
// first the entrypoint.
func platformImage(p v1.Platform, base v1.Layer, binDir string, names []string, labels map[string]string, created time.Time) (v1.Image, error) {
	bins, err := binaryEntries(binDir, names)
	if err != nil {
		return nil, err
	}
	binLayer, err := layer(bins, created)
	if err != nil {
		return nil, err
	}
	at := v1.Time{Time: created}
	img := mutate.ConfigMediaType(mutate.MediaType(empty.Image, types.OCIManifestSchema1), types.OCIConfigJSON)
	img, err = mutate.Append(img,
		mutate.Addendum{Layer: base, History: v1.History{Created: at, CreatedBy: "hack/tools/image: CA roots, passwd, group, /home/nonroot, /tmp"}},
		mutate.Addendum{Layer: binLayer, History: v1.History{Created: at, CreatedBy: "hack/tools/image: /" + strings.Join(names, ", /")}},
	)
	if err != nil {
		return nil, err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture, cf.Variant = p.OS, p.Architecture, p.Variant
	cf.Created = at
	cf.Config = v1.Config{Entrypoint: []string{"/" + names[0]}, User: nonrootUser, Labels: labels}
	return mutate.ConfigFile(img, cf)
}

// layer is entries as a gzipped tar layer. Compressed here, once, rather
// than by go-containerregistry on every read: the bytes, and so the
// digest, are then those of Go's compress/gzip, which writes no time or
// name into its header.
func layer(entries []entry, mtime time.Time) (v1.Layer, error) {
	var b bytes.Buffer
	zw := gzip.NewWriter(&b)
	if err := writeTar(zw, entries, mtime); err != nil {
		return nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	data := b.Bytes()
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(data)), nil
	}, tarball.WithMediaType(types.OCILayer))
}

// writeLayout writes idx as the one image of an OCI layout at dir, and
// nothing else: it is written beside dir and renamed over it, so an old
// layout's blobs do not linger and a failed build leaves no half layout.
func writeLayout(dir string, idx v1.ImageIndex, version string) error {
	dir = filepath.Clean(dir)
	tmp := dir + ".tmp"
	if err := os.RemoveAll(tmp); err != nil {
		return err
	}
	p, err := layout.Write(tmp, empty.Index)
	if err != nil {
		return err
	}
	if err := p.AppendIndex(idx, layout.WithAnnotations(map[string]string{refName: version})); err != nil {
		return err
	}
	// go-containerregistry writes blobs 0600 and the rest after the umask:
	// make it all readable, as any other build output.
	err = filepath.WalkDir(tmp, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			return os.Chmod(path, 0o755)
		}
		return os.Chmod(path, 0o644)
	})
	if err != nil {
		return err
	}
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	return os.Rename(tmp, dir)
}

// layoutIndex is the image index a layout written by writeLayout holds.
func layoutIndex(dir string) (v1.ImageIndex, error) {
	root, err := layout.ImageIndexFromPath(dir)
	if err != nil {
		return nil, err
	}
	m, err := root.IndexManifest()
	if err != nil {
		return nil, err
	}
	if len(m.Manifests) != 1 || m.Manifests[0].MediaType != types.OCIImageIndex {
		return nil, fmt.Errorf("%s: want one image index in index.json, have %d manifests", dir, len(m.Manifests))
	}
	return root.ImageIndex(m.Manifests[0].Digest)
}
