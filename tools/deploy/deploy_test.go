package deploy_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/cnikit/cni/tools/image"
	"github.com/cnikit/cni/tools/internal/cnibuild"
)

func TestMain(m *testing.M) { cnibuild.Main(m) }

// objects are the decoded documents of one manifest file.
type objects struct {
	configMaps []corev1.ConfigMap
	daemonSets []appsv1.DaemonSet
}

// load decodes every document of deploy/kubernetes/name strictly: an unknown or
// misplaced field, a wrong type or an unexpected kind fails.
func load(t *testing.T, name string) objects {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(cnibuild.Root(), "deploy", "kubernetes", name))
	require.NoError(t, err)
	var out objects
	for i, doc := range strings.Split(string(data), "\n---\n") {
		var tm metav1.TypeMeta
		require.NoError(t, yaml.Unmarshal([]byte(doc), &tm), "document %d", i)
		switch tm.APIVersion + " " + tm.Kind {
		case "v1 ConfigMap":
			var cm corev1.ConfigMap
			require.NoError(t, yaml.UnmarshalStrict([]byte(doc), &cm), "document %d", i)
			out.configMaps = append(out.configMaps, cm)
		case "apps/v1 DaemonSet":
			var ds appsv1.DaemonSet
			require.NoError(t, yaml.UnmarshalStrict([]byte(doc), &ds), "document %d", i)
			out.daemonSets = append(out.daemonSets, ds)
		default:
			t.Fatalf("document %d of %s: unexpected %q", i, name, tm.APIVersion+" "+tm.Kind)
		}
	}
	return out
}

func TestStrictDecodeCatchesAMisspelledField(t *testing.T) {
	doc := "apiVersion: apps/v1\nkind: DaemonSet\nspec:\n  template:\n    spec:\n      hostNetwrok: true\n"
	var ds appsv1.DaemonSet
	assert.ErrorContains(t, yaml.UnmarshalStrict([]byte(doc), &ds), "hostNetwrok")
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

func installDaemonSet(t *testing.T) (appsv1.DaemonSet, corev1.ConfigMap) {
	t.Helper()
	objs := load(t, "cni.yaml")
	require.Len(t, objs.daemonSets, 1)
	require.Len(t, objs.configMaps, 1)
	return objs.daemonSets[0], objs.configMaps[0]
}

func TestInstallDaemonSetDecodesStrictly(t *testing.T) {
	ds, cm := installDaemonSet(t)
	checkNodeDaemonSet(t, ds)
	assert.Equal(t, "kube-system", cm.Namespace)
	spec := ds.Spec.Template.Spec
	require.Len(t, spec.InitContainers, 1)
	require.Len(t, spec.Containers, 1)
	assert.Equal(t, []string{image.BinaryPath, "sleep"}, spec.Containers[0].Command, "the main container idles in the binary itself")
	assert.Equal(t, image.BinaryPath, spec.InitContainers[0].Command[0], "the image's binary")
	hostPaths := map[string]string{}
	for _, v := range spec.Volumes {
		if v.HostPath != nil {
			hostPaths[v.Name] = v.HostPath.Path
		}
	}
	assert.ElementsMatch(t, []string{"/opt/cni/bin", "/etc/cni/net.d"}, mapValues(hostPaths))
}

func mapValues(m map[string]string) []string {
	var out []string
	for _, v := range m {
		out = append(out, v)
	}
	return out
}

// container is a root file system with the container's mounts, entered in a private
// mount namespace through chroot, as a runtime would run it.
type container struct {
	rootfs  string
	mounts  [][2]string // host source, path in the container
	ro      map[string]bool
	command []string
}

// newContainer lays out c's image (the binary at its image path) and maps its volumes:
// hostPath volumes into hostRoot (created like DirectoryOrCreate), ConfigMap volumes to
// a directory holding the ConfigMap's data.
func newContainer(t *testing.T, c corev1.Container, vols []corev1.Volume, cms []corev1.ConfigMap, hostRoot string) *container {
	t.Helper()
	bin, err := cnibuild.Binary("amd64")
	require.NoError(t, err)
	rootfs := t.TempDir()
	data, err := os.ReadFile(bin)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(rootfs, image.BinaryPath), data, 0o755))
	require.NoError(t, os.Mkdir(filepath.Join(rootfs, "proc"), 0o555))
	ct := &container{rootfs: rootfs, ro: map[string]bool{}, command: append(slices.Clone(c.Command), c.Args...)}
	for _, m := range c.VolumeMounts {
		i := slices.IndexFunc(vols, func(v corev1.Volume) bool { return v.Name == m.Name })
		require.GreaterOrEqual(t, i, 0, "volume %s", m.Name)
		src := volumeSource(t, vols[i], cms, hostRoot)
		require.NoError(t, os.MkdirAll(filepath.Join(rootfs, m.MountPath), 0o755))
		ct.mounts = append(ct.mounts, [2]string{src, m.MountPath})
		ct.ro[m.MountPath] = m.ReadOnly
	}
	return ct
}

func volumeSource(t *testing.T, v corev1.Volume, cms []corev1.ConfigMap, hostRoot string) string {
	t.Helper()
	switch {
	case v.HostPath != nil:
		p := filepath.Join(hostRoot, v.HostPath.Path)
		require.NotNil(t, v.HostPath.Type)
		require.Equal(t, corev1.HostPathDirectoryOrCreate, *v.HostPath.Type, "the installer creates the node's dirs")
		require.NoError(t, os.MkdirAll(p, 0o755))
		return p
	case v.ConfigMap != nil:
		i := slices.IndexFunc(cms, func(cm corev1.ConfigMap) bool { return cm.Name == v.ConfigMap.Name })
		require.GreaterOrEqual(t, i, 0, "ConfigMap %s is in the manifest", v.ConfigMap.Name)
		dir := t.TempDir()
		for k, val := range cms[i].Data {
			require.NoError(t, os.WriteFile(filepath.Join(dir, k), []byte(val), 0o644))
		}
		return dir
	}
	t.Fatalf("volume %s: unsupported source", v.Name)
	return ""
}

// cmd returns the command that runs the container: unshare gives it a private mount
// namespace (nothing is mounted on the machine), the script binds the volumes and
// /proc, then chroot execs the container's command, which keeps the process's PID.
func (c *container) cmd() *exec.Cmd {
	var script strings.Builder
	script.WriteString("set -e\n")
	for _, m := range c.mounts {
		dst := filepath.Join(c.rootfs, m[1])
		fmt.Fprintf(&script, "mount --bind %q %q\n", m[0], dst)
		if c.ro[m[1]] {
			fmt.Fprintf(&script, "mount -o remount,bind,ro %q\n", dst)
		}
	}
	fmt.Fprintf(&script, "mount -t proc proc %q\n", filepath.Join(c.rootfs, "proc"))
	fmt.Fprintf(&script, "exec chroot %q \"$@\"\n", c.rootfs)
	args := append([]string{"--mount", "--propagation", "private", "sh", "-c", script.String(), "sh"}, c.command...)
	cmd := exec.Command("unshare", args...)
	cmd.Env = []string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin"}
	return cmd
}

func (c *container) run(t *testing.T) string {
	t.Helper()
	out, err := c.cmd().CombinedOutput()
	require.NoError(t, err, "%v:\n%s", c.command, out)
	return string(out)
}

func requireRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("running a container's command needs root (mount namespace, chroot); make test runs as root")
	}
}

func TestInitContainerInstallsIntoTheHostRoot(t *testing.T) {
	requireRoot(t)
	ds, cm := installDaemonSet(t)
	spec := ds.Spec.Template.Spec
	host := t.TempDir()
	init := newContainer(t, spec.InitContainers[0], spec.Volumes, []corev1.ConfigMap{cm}, host)

	out := init.run(t)

	bin, err := cnibuild.Binary("amd64")
	require.NoError(t, err)
	names := pluginNames(t, bin)
	binDir, confDir := filepath.Join(host, "opt/cni/bin"), filepath.Join(host, "etc/cni/net.d")
	for _, n := range names {
		cnibuild.AssertAnswersVersion(t, filepath.Join(binDir, n))
		assert.Contains(t, out, "verified /host/opt/cni/bin/"+n+"\n")
	}
	conf, err := os.ReadFile(filepath.Join(confDir, "10-cni.conflist"))
	require.NoError(t, err)
	assert.Equal(t, cm.Data["10-cni.conflist"], string(conf))
	assert.Less(t, strings.LastIndex(out, "verified "), strings.Index(out, "write /host/etc/cni/net.d/10-cni.conflist"),
		"the config is written after every binary is in place and answers")

	// The runtime's view: the network loads and every plugin type is installed.
	ls, err := exec.Command(bin, "ls", "--conf-dir", confDir).CombinedOutput()
	require.NoError(t, err, "%s", ls)
	// One chain plugin: the runtime starts one process per pod and operation; it
	// declares the capabilities, or the runtime would not pass the ports and limits.
	assert.Regexp(t, `(?m)^cni\s+1\.0\.0\s+chain\(bridge,portmap,bandwidth\)\s`, string(ls))
	var list struct {
		Plugins []struct {
			Type         string          `json:"type"`
			Capabilities map[string]bool `json:"capabilities"`
		} `json:"plugins"`
	}
	require.NoError(t, json.Unmarshal(conf, &list))
	require.Len(t, list.Plugins, 1)
	assert.Equal(t, map[string]bool{"portMappings": true, "bandwidth": true}, list.Plugins[0].Capabilities)
	for _, typ := range []string{"chain", "bridge", "host-local", "portmap", "bandwidth"} {
		assert.Contains(t, names, typ, "the standard chain's %s is in the registry", typ)
		assert.FileExists(t, filepath.Join(binDir, typ))
	}

	// A pod restart runs the init container again: nothing changes.
	again := init.run(t)
	assert.Contains(t, again, "nothing to do:")
	assert.NotContains(t, again, "write ")
}

func pluginNames(t *testing.T, bin string) []string {
	t.Helper()
	out, err := exec.Command(bin, "--list").Output()
	require.NoError(t, err)
	return strings.Fields(string(out))
}

func TestMainContainerSleepsUntilSIGTERM(t *testing.T) {
	requireRoot(t)
	ds, cm := installDaemonSet(t)
	spec := ds.Spec.Template.Spec
	main := newContainer(t, spec.Containers[0], spec.Volumes, []corev1.ConfigMap{cm}, t.TempDir())
	cmd := main.cmd()
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	require.NoError(t, cmd.Start())
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		t.Fatalf("the main container exited by itself: %v\n%s", err, out.String())
	case <-time.After(time.Second):
	}

	require.NoError(t, cmd.Process.Signal(syscall.SIGTERM), "the kubelet stops the pod")

	select {
	case err := <-done:
		assert.NoError(t, err, "exit status 0 on SIGTERM: %s", out.String())
	case <-time.After(10 * time.Second):
		cmd.Process.Kill()
		t.Fatal("cni sleep ignored SIGTERM")
	}
}

func TestDhcpDaemonSetDecodesStrictly(t *testing.T) {
	objs := load(t, "dhcp.yaml")
	require.Len(t, objs.daemonSets, 1)
	ds := objs.daemonSets[0]
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
	install, _ := installDaemonSet(t)
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
