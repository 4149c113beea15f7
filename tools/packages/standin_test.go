package packages_test

import (
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/goreleaser/nfpm/v2"
	"github.com/goreleaser/nfpm/v2/files"
	"github.com/stretchr/testify/require"

	"github.com/cnikit/cni/tools/internal/cnibuild"
	"github.com/cnikit/cni/tools/packages"
)

// standIn is a package of the Kubernetes project's as the replacement tests need it:
// built here with nfpm, so that they need no network and no pkgs.k8s.io, with the names,
// paths and dependency that matter and a shell script for every file.
type standIn struct {
	name, version string
	files         []string
	// depends is the dependency in dpkg's syntax and in rpm's.
	depends map[string]string
}

// kubernetesCNI stands in for the reference plugins as pkgs.k8s.io ships them: regular
// files at the paths where ours are links.
var kubernetesCNI = standIn{
	name: packages.Replaced, version: "1.6.0",
	files: []string{"/opt/cni/bin/bridge", "/opt/cni/bin/host-local", "/opt/cni/bin/loopback", "/opt/cni/bin/portmap"},
}

// kubelet stands in for the package that depends on kubernetes-cni, as kubelet's and
// kubeadm's do: the one a node must keep.
var kubelet = standIn{
	name: "kubelet", version: "1.33.0",
	files: []string{"/usr/bin/kubelet"},
	depends: map[string]string{
		"deb": packages.Replaced + " (>= 1.2.0)",
		"rpm": packages.Replaced + " >= 1.2.0",
	},
}

// write builds s as a package of format for the machine's architecture into dir.
func (s standIn) write(t *testing.T, format, dir string) string {
	t.Helper()
	src := t.TempDir()
	mtime := time.Unix(1767225600, 0).UTC()
	var contents files.Contents
	for _, f := range s.files {
		p := filepath.Join(src, filepath.Base(f))
		require.NoError(t, os.WriteFile(p, []byte("#!/bin/sh\necho "+s.name+" "+filepath.Base(f)+"\n"), 0o755))
		contents = append(contents, &files.Content{
			Source: p, Destination: f,
			FileInfo: &files.ContentFileInfo{Mode: 0o755, MTime: mtime},
		})
	}
	info := nfpm.WithDefaults(&nfpm.Info{
		Name: s.name, Arch: runtime.GOARCH, Platform: "linux",
		Version: s.version, VersionSchema: "none", Release: "1",
		Maintainer:  "stand-in <standin@cnikit.invalid>",
		Description: "stand-in for " + s.name + " in the replacement tests",
		MTime:       mtime,
		Overridables: nfpm.Overridables{
			Contents: contents,
		},
	})
	if d, ok := s.depends[format]; ok {
		info.Depends = []string{d}
	}
	p := packages.Formats[format]
	info.Target = filepath.Join(dir, p.ConventionalFileName(info))
	f, err := os.Create(info.Target)
	require.NoError(t, err)
	defer f.Close()
	require.NoError(t, p.Package(info, f), "%s %s", format, s.name)
	require.NoError(t, f.Close())
	return info.Target
}

// ours is our package for the machine's architecture, as make packages builds it.
func ours(t *testing.T, format, dir string) string {
	t.Helper()
	o := options(t)
	bin, err := cnibuild.Binary(runtime.GOARCH)
	require.NoError(t, err)
	o.Binary, o.Arch = bin, runtime.GOARCH
	p, err := packages.Write(o, format, dir)
	require.NoError(t, err)
	return p
}
