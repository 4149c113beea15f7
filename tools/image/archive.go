package image

import (
	"archive/tar"
	"encoding/json"
	"fmt"
	"io"
	"path"
	"slices"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// dockerEntry is one image of a docker save archive's manifest.json.
type dockerEntry struct {
	Config   string
	RepoTags []string
	Layers   []string
}

// archive collects the files of the tar, written in name order at the end.
type archive map[string][]byte

func blobPath(h v1.Hash) string { return "blobs/" + h.Algorithm + "/" + h.Hex }

// addBlob stores content under its digest.
func (a archive) addBlob(h v1.Hash, data []byte) { a[blobPath(h)] = data }

// WriteArchive writes idx as an OCI image layout in one tar (oci-layout, index.json,
// blobs/sha256/...) plus docker load's manifest.json over the same blobs. index.json
// holds one descriptor, the multi-architecture index, named for ctr import
// (io.containerd.image.name) and for podman and skopeo (org.opencontainers.image.ref.name).
// docker load, which stores one architecture per tag, gets every architecture as
// NAME:TAG-ARCH and amd64 also as NAME:TAG (TAG: o.ImageTag()). Entries are sorted,
// owned by root and dated o.Created, so equal inputs give equal bytes.
func WriteArchive(w io.Writer, idx v1.ImageIndex, o Options) error {
	a := archive{}
	a["oci-layout"] = []byte(`{"imageLayoutVersion":"1.0.0"}`)
	raw, err := idx.RawManifest()
	if err != nil {
		return err
	}
	idxDigest, err := idx.Digest()
	if err != nil {
		return err
	}
	a.addBlob(idxDigest, raw)
	ref := o.Name + ":" + o.ImageTag()
	top := v1.IndexManifest{
		SchemaVersion: 2,
		MediaType:     types.OCIImageIndex,
		Manifests: []v1.Descriptor{{
			MediaType: types.OCIImageIndex,
			Digest:    idxDigest,
			Size:      int64(len(raw)),
			Annotations: map[string]string{
				"io.containerd.image.name":          ref,
				"org.opencontainers.image.ref.name": o.ImageTag(),
			},
		}},
	}
	if a["index.json"], err = json.Marshal(top); err != nil {
		return err
	}
	docker, err := a.addImages(idx, o)
	if err != nil {
		return err
	}
	if a["manifest.json"], err = json.Marshal(docker); err != nil {
		return err
	}
	return a.write(w, o.Created)
}

// addImages stores every image's manifest, config and layers, and returns the docker
// manifest.json entries.
func (a archive) addImages(idx v1.ImageIndex, o Options) ([]dockerEntry, error) {
	im, err := idx.IndexManifest()
	if err != nil {
		return nil, err
	}
	var docker []dockerEntry
	for _, desc := range im.Manifests {
		img, err := idx.Image(desc.Digest)
		if err != nil {
			return nil, err
		}
		raw, err := img.RawManifest()
		if err != nil {
			return nil, err
		}
		a.addBlob(desc.Digest, raw)
		cfgName, err := img.ConfigName()
		if err != nil {
			return nil, err
		}
		cfg, err := img.RawConfigFile()
		if err != nil {
			return nil, err
		}
		a.addBlob(cfgName, cfg)
		entry := dockerEntry{Config: blobPath(cfgName), RepoTags: tags(o, desc.Platform.Architecture)}
		layers, err := img.Layers()
		if err != nil {
			return nil, err
		}
		for _, l := range layers {
			path, err := a.addLayer(l)
			if err != nil {
				return nil, err
			}
			entry.Layers = append(entry.Layers, path)
		}
		docker = append(docker, entry)
	}
	return docker, nil
}

func tags(o Options, arch string) []string {
	ref := o.Name + ":" + o.ImageTag()
	if arch == "amd64" {
		return []string{ref, ref + "-" + arch}
	}
	return []string{ref + "-" + arch}
}

func (a archive) addLayer(l v1.Layer) (string, error) {
	d, err := l.Digest()
	if err != nil {
		return "", err
	}
	rc, err := l.Compressed()
	if err != nil {
		return "", err
	}
	defer rc.Close()
	data, err := io.ReadAll(rc)
	if err != nil {
		return "", err
	}
	a.addBlob(d, data)
	return blobPath(d), nil
}

// write puts the files and their parent directories into one tar, in name order.
func (a archive) write(w io.Writer, mtime time.Time) error {
	names := make([]string, 0, len(a))
	dirs := map[string]bool{}
	for name := range a {
		names = append(names, name)
		for d := path.Dir(name); d != "."; d = path.Dir(d) {
			dirs[d+"/"] = true
		}
	}
	for d := range dirs {
		names = append(names, d)
	}
	slices.Sort(names)
	tw := tar.NewWriter(w)
	for _, name := range names {
		hdr := &tar.Header{Name: name, ModTime: mtime.UTC(), Typeflag: tar.TypeReg, Mode: 0o644, Size: int64(len(a[name]))}
		if strings.HasSuffix(name, "/") {
			hdr.Typeflag, hdr.Mode, hdr.Size = tar.TypeDir, 0o755, 0
		}
		if err := tw.WriteHeader(hdr); err != nil {
			return fmt.Errorf("archive %s: %w", name, err)
		}
		if _, err := tw.Write(a[name]); err != nil {
			return fmt.Errorf("archive %s: %w", name, err)
		}
	}
	return tw.Close()
}
