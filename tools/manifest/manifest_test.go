package manifest_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"

	"github.com/cnikit/cni/tools/manifest"
)

func TestParseIsStrict(t *testing.T) {
	cases := []struct{ name, doc, err string }{
		{"misspelled field", "apiVersion: apps/v1\nkind: DaemonSet\nspec:\n  template:\n    spec:\n      hostNetwrok: true\n", "hostNetwrok"},
		{"other kind", "apiVersion: v1\nkind: Secret\n", `document 0: unexpected "v1 Secret"`},
		{"wrong type", "apiVersion: v1\nkind: ConfigMap\ndata: 3\n", "document 0"},
		{"second document", "apiVersion: v1\nkind: ConfigMap\n---\napiVersion: v1\nkind: Pod\n", "document 1"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := manifest.Parse("m.yaml", []byte(tc.doc))
			assert.ErrorContains(t, err, "m.yaml: ")
			assert.ErrorContains(t, err, tc.err)
		})
	}
	objs, err := manifest.Parse("m.yaml", []byte("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\ndata:\n  k: v\n"))
	require.NoError(t, err)
	cm, err := objs.ConfigMap("a")
	require.NoError(t, err)
	assert.Equal(t, "v", cm.Data["k"])
	_, err = objs.ConfigMap("b")
	assert.ErrorContains(t, err, `no ConfigMap "b"`)
	_, err = objs.DaemonSet()
	assert.ErrorContains(t, err, "0 DaemonSets")
}

// A container whose volumes the installer cannot have is refused before anything runs,
// and leaves no directory behind.
func TestNewContainerRefusesVolumesItCannotLayOut(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "prog")
	require.NoError(t, os.WriteFile(bin, []byte("#!/bin/sh\n"), 0o755))
	dirOrCreate, file := corev1.HostPathDirectoryOrCreate, corev1.HostPathFile
	layout := manifest.Layout{Binary: bin, ImagePath: "/prog", HostPath: func(p string) (string, error) { return filepath.Join(t.TempDir(), p), nil }}
	mount := corev1.Container{Name: "c", VolumeMounts: []corev1.VolumeMount{{Name: "v", MountPath: "/v"}}}
	cases := []struct {
		name string
		vols []corev1.Volume
		err  string
	}{
		{"missing volume", nil, "mounts volume v, which the pod does not have"},
		{"hostPath of a file", []corev1.Volume{{Name: "v", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/x", Type: &file}}}}, "DirectoryOrCreate"},
		{"unknown ConfigMap", []corev1.Volume{{Name: "v", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "cm"}}}}}, "ConfigMap cm is not in the manifest"},
		{"emptyDir", []corev1.Volume{{Name: "v", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}, "unsupported volume source"},
	}
	before, _ := filepath.Glob(filepath.Join(os.TempDir(), "cni-container-*"))
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := manifest.NewContainer(mount, tc.vols, layout)
			assert.ErrorContains(t, err, tc.err)
		})
	}
	after, _ := filepath.Glob(filepath.Join(os.TempDir(), "cni-container-*"))
	assert.Equal(t, before, after, "no root left behind")

	ok := []corev1.Volume{{Name: "v", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/x", Type: &dirOrCreate}}}}
	mount.Command, mount.Args = []string{"/prog"}, []string{"a", "b"}
	ct, err := manifest.NewContainer(mount, ok, layout)
	require.NoError(t, err)
	defer ct.Close()
	assert.Equal(t, []string{"/prog", "a", "b"}, ct.Command())
}
