// Package image builds the cni node image without a container daemon: one layer
// holding the static binary and the GC caller of CRI nodes, cni-gc-cri, a program of
// the build tools' module (plus /tmp, nothing else: no CA bundle, no users), the
// binary as entrypoint, OCI labels naming version and source, for linux/amd64 and
// linux/arm64 in one OCI index. WriteArchive writes it as one tar that is at the same
// time an OCI image layout (podman load, skopeo, ctr import) and a docker save archive
// (docker load). Everything is derived from the inputs alone, so the same binaries and
// options always give the same digest.
package image

import (
	"archive/tar"
	"bytes"
	"fmt"
	"io"
	"os"
	"slices"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// BinaryPath is where the binary lives in the image; the DaemonSet runs it by this path.
const BinaryPath = "/cni"

// GCCallerPath is where the GC caller of CRI nodes (tools/cmd/cni-gc-cri) lives in the
// image; the DaemonSet's gc container runs it by this path.
const GCCallerPath = "/cni-gc-cri"

// Options are the inputs of one build.
type Options struct {
	// Binaries maps a GOARCH (amd64, arm64) to the static linux binary built for it.
	Binaries map[string]string
	// GCCallers maps a GOARCH to cni-gc-cri built for it: every architecture of
	// Binaries needs one.
	GCCallers map[string]string
	Version   string    // org.opencontainers.image.version, and the tag
	Revision  string    // the source commit
	Source    string    // the source repository URL
	Created   time.Time // SOURCE_DATE_EPOCH: every timestamp in the image
	Name      string    // the repository the archive names, e.g. docker.io/cnikit/cni
	// Tag is the tag the archive names the image by; empty: Version. make image gives
	// the release the manifests of deploy/kubernetes name, so that a build of any
	// commit applies as they stand (its version label still says which build it is).
	Tag string
}

// ImageTag is the tag the archive names: Tag, else Version.
func (o Options) ImageTag() string {
	if o.Tag != "" {
		return o.Tag
	}
	return o.Version
}

// Labels are the image config's labels, also set as annotations on the index and on
// every manifest.
func (o Options) Labels() map[string]string {
	return map[string]string{
		"org.opencontainers.image.title":       "cni",
		"org.opencontainers.image.description": "A CNI plugin toolkit in one static binary; `cni install` puts it on a node",
		"org.opencontainers.image.version":     o.Version,
		"org.opencontainers.image.revision":    o.Revision,
		"org.opencontainers.image.source":      o.Source,
		"org.opencontainers.image.licenses":    "Apache-2.0",
		"org.opencontainers.image.created":     o.Created.UTC().Format(time.RFC3339),
	}
}

// Config is the runtime configuration of the image, the same for every architecture;
// the Containerfile states the same.
func Config(o Options) v1.Config {
	return v1.Config{
		Entrypoint: []string{BinaryPath},
		Cmd:        []string{"version"},
		User:       "0:0",
		WorkingDir: "/",
		Labels:     o.Labels(),
	}
}

// Platform is the platform of a GOARCH, as runtimes match it.
func Platform(arch string) v1.Platform {
	p := v1.Platform{OS: "linux", Architecture: arch}
	if arch == "arm64" {
		p.Variant = "v8"
	}
	return p
}

// Index builds the multi-architecture image index.
func Index(o Options) (v1.ImageIndex, error) {
	if len(o.Binaries) == 0 {
		return nil, fmt.Errorf("no binaries")
	}
	idx := mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
	var arches []string
	for arch := range o.Binaries {
		arches = append(arches, arch)
	}
	slices.Sort(arches)
	for _, arch := range arches {
		img, err := archImage(o, arch)
		if err != nil {
			return nil, fmt.Errorf("image for %s: %w", arch, err)
		}
		p := Platform(arch)
		idx = mutate.AppendManifests(idx, mutate.IndexAddendum{Add: plainImage{img}, Descriptor: v1.Descriptor{Platform: &p}})
	}
	return mutate.Annotations(idx, o.Labels()).(v1.ImageIndex), nil
}

// plainImage is an image whose index entry carries no artifactType. go-containerregistry
// fills it in with the config's media type (meant for referrers listings); an index of
// platform images, as docker buildx writes it, has none.
type plainImage struct{ v1.Image }

func (plainImage) ArtifactType() (string, error) { return "", nil }

// archImage is the image of one architecture: one layer, the config, the labels.
func archImage(o Options, arch string) (v1.Image, error) {
	bin, err := os.ReadFile(o.Binaries[arch])
	if err != nil {
		return nil, err
	}
	if o.GCCallers[arch] == "" {
		return nil, fmt.Errorf("no GC caller (cni-gc-cri) for %s", arch)
	}
	gcCaller, err := os.ReadFile(o.GCCallers[arch])
	if err != nil {
		return nil, err
	}
	layerTar, err := rootfs(bin, gcCaller, o.Created)
	if err != nil {
		return nil, err
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(layerTar)), nil
	}, tarball.WithMediaType(types.OCILayer))
	if err != nil {
		return nil, err
	}
	img := mutate.ConfigMediaType(mutate.MediaType(empty.Image, types.OCIManifestSchema1), types.OCIConfigJSON)
	img, err = mutate.AppendLayers(img, layer)
	if err != nil {
		return nil, err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	p := Platform(arch)
	cf.OS, cf.Architecture, cf.Variant = p.OS, p.Architecture, p.Variant
	cf.Created = v1.Time{Time: o.Created.UTC()}
	cf.Config = Config(o)
	cf.History = []v1.History{{
		Created:   cf.Created,
		CreatedBy: "cni tools/image: " + BinaryPath + ", " + GCCallerPath + " and /tmp",
		Comment:   "the static cni binary and its GC caller, nothing else",
	}}
	img, err = mutate.ConfigFile(img, cf)
	if err != nil {
		return nil, err
	}
	return mutate.Annotations(img, o.Labels()).(v1.Image), nil
}

// rootfs is the layer: /cni, /cni-gc-cri and /tmp, root-owned, with fixed times, in
// name order.
func rootfs(bin, gcCaller []byte, mtime time.Time) ([]byte, error) {
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	entries := []struct {
		hdr  tar.Header
		data []byte
	}{
		{tar.Header{Typeflag: tar.TypeReg, Name: BinaryPath[1:], Mode: 0o755, Size: int64(len(bin))}, bin},
		{tar.Header{Typeflag: tar.TypeReg, Name: GCCallerPath[1:], Mode: 0o755, Size: int64(len(gcCaller))}, gcCaller},
		{tar.Header{Typeflag: tar.TypeDir, Name: "tmp/", Mode: 0o1777}, nil},
	}
	for _, e := range entries {
		e.hdr.ModTime = mtime.UTC()
		if err := tw.WriteHeader(&e.hdr); err != nil {
			return nil, err
		}
		if _, err := tw.Write(e.data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}
