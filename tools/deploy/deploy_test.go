package deploy_test

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/cnikit/cni/tools/image"
	"github.com/cnikit/cni/tools/internal/cnibuild"
	"github.com/cnikit/cni/tools/manifest"
)

func TestMain(m *testing.M) { cnibuild.Main(m) }

// load decodes deploy/kubernetes/name strictly (package manifest).
func load(t *testing.T, name string) manifest.Objects {
	t.Helper()
	objs, err := manifest.Load(filepath.Join(cnibuild.Root(), "deploy", "kubernetes", name))
	require.NoError(t, err)
	return objs
}

// profiles are the install DaemonSets deploy/kubernetes ships, and whether each writes
// a network config.
var profiles = []struct {
	file   string
	config bool
}{{"cni-flannel.yaml", true}, {"cni-single-node.yaml", true}, {"cni-plugins-only.yaml", false}}

func TestStrictDecodeCatchesAMisspelledField(t *testing.T) {
	doc := "apiVersion: apps/v1\nkind: DaemonSet\nspec:\n  template:\n    spec:\n      hostNetwrok: true\n"
	_, err := manifest.Parse("typo.yaml", []byte(doc))
	assert.ErrorContains(t, err, "hostNetwrok")
	_, err = manifest.Parse("kind.yaml", []byte("apiVersion: v1\nkind: Secret\n"))
	assert.ErrorContains(t, err, `unexpected "v1 Secret"`)
}

// checkNodeDaemonSet checks what every node-level DaemonSet of ours needs.
func checkNodeDaemonSet(t *testing.T, ds appsv1.DaemonSet) {
	t.Helper()
	assert.Equal(t, "kube-system", ds.Namespace)
	spec := ds.Spec.Template.Spec
	assert.True(t, spec.HostNetwork, "no pod network exists before the plugins do")
	assert.Contains(t, spec.Tolerations, corev1.Toleration{Operator: corev1.TolerationOpExists}, "runs on every node, tainted or not")
	assert.Equal(t, "system-node-critical", spec.PriorityClassName)
	assert.Equal(t, ds.Spec.Selector.MatchLabels, ds.Spec.Template.Labels)
	for _, c := range slices.Concat(spec.InitContainers, spec.Containers) {
		assert.NotEmpty(t, c.Resources.Requests.Cpu().String(), c.Name)
		assert.False(t, c.Resources.Requests.Cpu().IsZero(), "%s: cpu request", c.Name)
		assert.False(t, c.Resources.Requests.Memory().IsZero(), "%s: memory request", c.Name)
		assert.False(t, c.Resources.Limits.Memory().IsZero(), "%s: memory limit", c.Name)
	}
}

// installDaemonSet is a profile's DaemonSet and its ConfigMaps.
func installDaemonSet(t *testing.T, file string) (appsv1.DaemonSet, []corev1.ConfigMap) {
	t.Helper()
	objs := load(t, file)
	ds, err := objs.DaemonSet()
	require.NoError(t, err)
	return ds, objs.ConfigMaps
}

func TestInstallDaemonSetsDecodeStrictly(t *testing.T) {
	for _, p := range profiles {
		t.Run(p.file, func(t *testing.T) {
			ds, cms := installDaemonSet(t, p.file)
			checkNodeDaemonSet(t, ds)
			spec := ds.Spec.Template.Spec
			require.Len(t, spec.InitContainers, 1)
			require.Len(t, spec.Containers, 2)
			assert.Equal(t, []string{image.BinaryPath, "repair", "--watch"}, spec.Containers[0].Command[:3],
				"the main container watches for firewall reloads in the binary itself")
			assert.Equal(t, []string{image.GCCallerPath, "-every"}, spec.Containers[1].Command[:2],
				"the gc container runs the image's GC caller in a loop")
			assert.Equal(t, image.BinaryPath, spec.InitContainers[0].Command[0], "the image's binary")
			hostPaths := map[string]string{}
			for _, v := range spec.Volumes {
				if v.HostPath != nil {
					hostPaths[v.Name] = v.HostPath.Path
				}
			}
			// The repair watcher reads every profile's configs and the result cache,
			// listens on the system bus and enters the pods' netns; the GC caller asks
			// containerd's CRI socket.
			want := []string{"/opt/cni/bin", "/etc/cni/net.d", "/var/lib/cni", "/run/dbus", "/var/run/netns", "/run/containerd"}
			if p.config {
				require.Len(t, cms, 1)
				assert.Equal(t, "kube-system", cms[0].Namespace)
			} else {
				assert.Empty(t, cms)
			}
			assert.ElementsMatch(t, want, mapValues(hostPaths))
		})
	}
}

// The profiles differ in what their install step writes, nothing else: with the
// config's arguments, mounts and volumes taken out, their DaemonSets are one.
func TestProfilesDifferOnlyInWhatTheyInstall(t *testing.T) {
	strip := func(orig appsv1.DaemonSet) appsv1.DaemonSet {
		ds := orig.DeepCopy()
		spec := &ds.Spec.Template.Spec
		init := &spec.InitContainers[0]
		if i := slices.Index(init.Command, "--conf"); i >= 0 {
			init.Command = init.Command[:i]
		}
		config := func(name string) bool { return name == "cni-net-d" || name == "cni-config" }
		init.VolumeMounts = slices.DeleteFunc(init.VolumeMounts, func(m corev1.VolumeMount) bool { return config(m.Name) })
		spec.Volumes = slices.DeleteFunc(spec.Volumes, func(v corev1.Volume) bool { return config(v.Name) })
		return *ds
	}
	first, _ := installDaemonSet(t, profiles[0].file)
	for _, p := range profiles[1:] {
		ds, _ := installDaemonSet(t, p.file)
		assert.Equal(t, strip(first), strip(ds), "%s against %s", p.file, profiles[0].file)
	}
}

// The multi-node profile takes each node's subnet from flanneld: its config names no
// range of its own (a range in the ConfigMap is one subnet for every node, and nothing
// routes between them), and holds flannel, portmap and bandwidth in one chain plugin
// on flannel's network, cbr0, so that pods made before the switch are deleted on the
// same state.
func TestFlannelProfileLeavesTheSubnetToEachNode(t *testing.T) {
	_, cms := installDaemonSet(t, "cni-flannel.yaml")
	require.Len(t, cms, 1)
	require.Len(t, cms[0].Data, 1)
	for _, data := range cms[0].Data {
		assert.NotContains(t, data, "subnet", "no subnet of the ConfigMap's own")
		assert.NotContains(t, data, "ranges")
		var list struct {
			CNIVersion string `json:"cniVersion"`
			Name       string `json:"name"`
			Plugins    []struct {
				Type    string `json:"type"`
				Plugins []struct {
					Type string `json:"type"`
				} `json:"plugins"`
			} `json:"plugins"`
		}
		require.NoError(t, json.Unmarshal([]byte(data), &list))
		assert.Equal(t, "1.0.0", list.CNIVersion, "containerd 1.6 knows no 1.1.0")
		assert.Equal(t, "cbr0", list.Name, "flannel's own network name")
		require.Len(t, list.Plugins, 1)
		assert.Equal(t, "chain", list.Plugins[0].Type)
		var types []string
		for _, c := range list.Plugins[0].Plugins {
			types = append(types, c.Type)
		}
		assert.Equal(t, []string{"flannel", "portmap", "bandwidth"}, types)
	}
}

// Every image the manifests name is the one make image builds: its -name and -tag, as
// make -n prints them.
func TestManifestsNameTheImageMakeImageBuilds(t *testing.T) {
	cmd := exec.Command("make", "-n", "--no-print-directory", "image")
	cmd.Dir = cnibuild.Root()
	out, err := cmd.Output()
	require.NoError(t, err)
	m := regexp.MustCompile(`-name '([^']+)' -tag '([^']+)'`).FindSubmatch(out)
	require.NotNil(t, m, "make -n image names no -name and -tag:\n%s", out)
	want := string(m[1]) + ":" + string(m[2])
	assert.Regexp(t, `:v[0-9]+\.[0-9]+\.[0-9]+$`, want, "a release tag, not latest")
	files, err := filepath.Glob(filepath.Join(cnibuild.Root(), "deploy", "kubernetes", "*.yaml"))
	require.NoError(t, err)
	require.NotEmpty(t, files)
	for _, f := range files {
		objs := load(t, filepath.Base(f))
		for _, ds := range objs.DaemonSets {
			for _, c := range slices.Concat(ds.Spec.Template.Spec.InitContainers, ds.Spec.Template.Spec.Containers) {
				assert.Equal(t, want, c.Image, "%s: %s", filepath.Base(f), c.Name)
			}
		}
	}
}

func mapValues(m map[string]string) []string {
	var out []string
	for _, v := range m {
		out = append(out, v)
	}
	return out
}

// newContainer lays out c of a pod whose volumes are vols (package manifest), its
// hostPath volumes under hostRoot.
func newContainer(t *testing.T, c corev1.Container, vols []corev1.Volume, cms []corev1.ConfigMap, hostRoot string) *manifest.Container {
	t.Helper()
	bin, err := cnibuild.Binary("amd64")
	require.NoError(t, err)
	gcCaller, err := cnibuild.GCCaller("amd64")
	require.NoError(t, err)
	ct, err := manifest.NewContainer(c, vols, manifest.Layout{
		Binary: bin, ImagePath: image.BinaryPath, ConfigMaps: cms,
		Files:    map[string]string{image.GCCallerPath: gcCaller},
		HostPath: func(p string) (string, error) { return filepath.Join(hostRoot, p), nil },
	})
	require.NoError(t, err)
	t.Cleanup(ct.Close)
	return ct
}

func run(t *testing.T, ct *manifest.Container) string {
	t.Helper()
	out, err := ct.Run()
	require.NoError(t, err)
	return out
}

func requireRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("running a container's command needs root (mount namespace, chroot); make test runs as root")
	}
}

// plantReferencePlugins lays host's /opt/cni/bin out as the kubernetes-cni package
// leaves a kubeadm node: regular files at the reference plugins' names.
func plantReferencePlugins(t *testing.T, host string) map[string][]byte {
	t.Helper()
	dir := filepath.Join(host, "opt/cni/bin")
	require.NoError(t, os.MkdirAll(dir, 0o755))
	planted := map[string][]byte{}
	for _, n := range []string{"bridge", "host-local", "loopback", "portmap", "bandwidth", "flannel"} {
		planted[n] = []byte("#!/bin/sh\n# the reference " + n + "\n")
		require.NoError(t, os.WriteFile(filepath.Join(dir, n), planted[n], 0o755))
	}
	return planted
}

// Each profile's init container, run with its exact command and mounts on a host
// root laid out as a kubeadm node: it takes the reference plugins' names over (keeping
// them for --uninstall; before, it refused them and crash-looped), every name answers
// VERSION, and the config, when the profile has one, is written after them.
func TestInitContainerInstallsIntoTheHostRoot(t *testing.T) {
	requireRoot(t)
	bin, err := cnibuild.Binary("amd64")
	require.NoError(t, err)
	names := pluginNames(t, bin)
	for _, p := range profiles {
		t.Run(p.file, func(t *testing.T) {
			ds, cms := installDaemonSet(t, p.file)
			spec := ds.Spec.Template.Spec
			host := t.TempDir()
			planted := plantReferencePlugins(t, host)
			init := newContainer(t, spec.InitContainers[0], spec.Volumes, cms, host)

			out := run(t, init)

			binDir, confDir := filepath.Join(host, "opt/cni/bin"), filepath.Join(host, "etc/cni/net.d")
			for _, n := range names {
				cnibuild.AssertAnswersVersion(t, filepath.Join(binDir, n))
				assert.Contains(t, out, "verified /host/opt/cni/bin/"+n+"\n")
			}
			for n, data := range planted {
				kept, err := os.ReadFile(filepath.Join(binDir, ".cni-replaced", n))
				require.NoError(t, err, "%s kept for --uninstall", n)
				assert.Equal(t, data, kept)
			}
			if !p.config {
				entries, _ := os.ReadDir(confDir)
				assert.Empty(t, entries, "no config is written")
				return
			}
			for name, data := range cms[0].Data {
				conf, err := os.ReadFile(filepath.Join(confDir, name))
				require.NoError(t, err)
				assert.Equal(t, data, string(conf))
				assert.Less(t, strings.LastIndex(out, "verified "), strings.Index(out, "write /host/etc/cni/net.d/"+name),
					"the config is written after every binary is in place and answers")
			}
			// The runtime's view: the network loads and every plugin type is installed.
			// cni picks 1.1.0 of cniVersions (containerd 1.6 reads cniVersion, 1.0.0).
			ls, err := exec.Command(bin, "ls", "--conf-dir", confDir).CombinedOutput()
			require.NoError(t, err, "%s", ls)
			assert.Regexp(t, `(?m)^\S+\s+1\.1\.0\s+chain\(\S+,portmap,bandwidth\)\s`, string(ls))

			// A pod restart runs the init container again: nothing changes.
			again := run(t, init)
			assert.Contains(t, again, "nothing to do:")
			assert.NotContains(t, again, "write ")
		})
	}
}

func pluginNames(t *testing.T, bin string) []string {
	t.Helper()
	out, err := exec.Command(bin, "--list").Output()
	require.NoError(t, err)
	return strings.Fields(string(out))
}

func TestDhcpDaemonSetDecodesStrictly(t *testing.T) {
	objs := load(t, "dhcp.yaml")
	ds, err := objs.DaemonSet()
	require.NoError(t, err)
	checkNodeDaemonSet(t, ds)
	spec := ds.Spec.Template.Spec
	require.Len(t, spec.Containers, 1)
	c := spec.Containers[0]
	assert.Equal(t, []string{"/opt/cni/bin/dhcp", "daemon", "-socketpath", "/run/cni/dhcp.sock"}, c.Command,
		"the reference plugin's daemon command line")
	mounts := map[string]corev1.VolumeMount{}
	for _, m := range c.VolumeMounts {
		mounts[m.MountPath] = m
	}
	hostPaths := map[string]string{}
	for _, v := range spec.Volumes {
		require.NotNil(t, v.HostPath, v.Name)
		hostPaths[v.Name] = v.HostPath.Path
	}
	// The lease files must outlive the pod, or a restarted daemon forgets every lease
	// it holds (and renews none of them).
	leases := daemonStateDir(t)
	for _, p := range []string{"/opt/cni/bin", "/run/cni", "/run/netns", leases} {
		require.Contains(t, mounts, p)
		assert.Equal(t, p, hostPaths[mounts[p].Name], "%s is the node's own", p)
	}
	assert.False(t, mounts[leases].ReadOnly, "the daemon writes its leases")
	// The binary it runs is the one the install DaemonSet puts on the node.
	install, _ := installDaemonSet(t, profiles[0].file)
	var installDir string
	for _, v := range install.Spec.Template.Spec.Volumes {
		if v.HostPath != nil && strings.HasSuffix(v.HostPath.Path, "/bin") {
			installDir = v.HostPath.Path
		}
	}
	assert.Equal(t, installDir, filepath.Dir(c.Command[0]))
}

// daemonStateDir is where the dhcp daemon the manifest runs keeps its lease files: the
// default of its -statedir flag, as the binary's own usage says.
func daemonStateDir(t *testing.T) string {
	t.Helper()
	bin, err := cnibuild.Binary("amd64")
	require.NoError(t, err)
	dhcp := filepath.Join(t.TempDir(), "dhcp")
	require.NoError(t, os.Symlink(bin, dhcp))
	out, err := exec.Command(dhcp, "daemon", "-h").CombinedOutput()
	require.NoError(t, err, "%s", out)
	m := regexp.MustCompile(`(?m)^  -statedir string\n.*\(default "([^"]+)"\)$`).FindSubmatch(out)
	require.NotNil(t, m, "no -statedir default in the daemon's usage:\n%s", out)
	return string(m[1])
}
