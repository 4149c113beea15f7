package deploy_test

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"

	"github.com/cnikit/cni/tools/image"
)

// repairBound is the deadline for the DaemonSet's watcher to put a reload's damage
// right: its quiet second and one pass.
const repairBound = 10 * time.Second

// newNetns starts a process in a network namespace of its own, killed when the test
// ends, and returns the namespace's path.
func newNetns(t *testing.T) string {
	t.Helper()
	cmd := exec.Command("unshare", "--net", "sleep", "infinity")
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	path := fmt.Sprintf("/proc/%d/ns/net", cmd.Process.Pid)
	own, err := os.Readlink("/proc/self/ns/net")
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		ns, err := os.Readlink(path)
		return err == nil && ns != own // unshare has exec'd sleep in the new one
	}, 5*time.Second, 10*time.Millisecond)
	return path
}

// bindNetns mounts the network namespace at path on the file at path, as `ip netns add`
// pins one, until the test ends.
func bindNetns(t *testing.T, ns, path string) {
	t.Helper()
	require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
	require.NoError(t, os.WriteFile(path, nil, 0o444))
	out, err := exec.Command("mount", "--bind", ns, path).CombinedOutput()
	require.NoError(t, err, "%s", out)
	t.Cleanup(func() {
		out, err := exec.Command("umount", "--lazy", path).CombinedOutput()
		assert.NoError(t, err, "%s", out)
	})
}

// syncBuffer is a container's output, written by its process and read by the test.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// running is a container's process as the kubelet keeps it: started, its output
// gathered, killed when the test ends unless the test stopped it.
type running struct {
	cmd  *exec.Cmd
	log  syncBuffer
	done chan error
}

// start starts cmd, a container's command (manifest.Container.Cmd).
func start(t *testing.T, cmd *exec.Cmd) *running {
	t.Helper()
	r := &running{cmd: cmd, done: make(chan error, 1)}
	cmd.Stdout, cmd.Stderr = &r.log, &r.log
	require.NoError(t, cmd.Start())
	go func() { r.done <- cmd.Wait() }()
	t.Cleanup(func() {
		if r.done != nil {
			_ = cmd.Process.Kill()
			<-r.done
		}
	})
	return r
}

// requireStopsOnSIGTERM stops the container as the kubelet stops a pod, and requires
// it to exit with status 0 within bound.
func (r *running) requireStopsOnSIGTERM(t *testing.T, bound time.Duration) {
	t.Helper()
	require.NoError(t, r.cmd.Process.Signal(syscall.SIGTERM), "the kubelet stops the pod")
	select {
	case err := <-r.done:
		r.done = nil
		assert.NoError(t, err, "exit status 0 on SIGTERM: %s", r.log.String())
	case <-time.After(bound):
		t.Fatalf("%v ignored SIGTERM: %s", r.cmd.Args, r.log.String())
	}
}

// TestDaemonSetRepairsAFirewallReloadWithAPodUp is the shipped single-node profile on a
// node of the test's own (a network namespace, a temp dir as its root): the init
// container installs the binary and the config, a runtime (the binary, with the node's
// /var/lib/cni) adds a pod with a port mapping, the main container `cni repair --watch`
// runs as the manifest says (its mounts, no iptables tools), and `nft flush ruleset` on
// the node takes the pod's masquerade and port mapping: CHECK fails, and passes again
// within repairBound with no new ADD. SIGTERM then stops the container with status 0,
// as the kubelet stops the pod.
func TestDaemonSetRepairsAFirewallReloadWithAPodUp(t *testing.T) {
	requireRoot(t)
	ds, cms := installDaemonSet(t, "cni-single-node.yaml")
	spec := ds.Spec.Template.Spec
	root := t.TempDir()
	node := newNetns(t)
	// The pod's netns where containerd and CRI-O keep one, on the node: the result cache
	// names that path, so a container that repairs must see the node's /var/run/netns.
	pod := "/var/run/netns/pod-1"
	bindNetns(t, newNetns(t), filepath.Join(root, pod))
	run(t, newContainer(t, spec.InitContainers[0], spec.Volumes, cms, root))

	rt := nodeRuntime(t, spec, cms, root, node)
	runtime := func(cmd string) (string, error) {
		return rt(cmd, pod, "pod-1", `{"portMappings":[{"hostPort":8080,"containerPort":80,"protocol":"tcp"}]}`)
	}
	out, err := runtime("add")
	require.NoError(t, err, out)
	t.Cleanup(func() {
		out, err := runtime("del")
		assert.NoError(t, err, out)
	})
	out, err = runtime("check")
	require.NoError(t, err, out)

	main := newContainer(t, spec.Containers[0], spec.Volumes, cms, root)
	watcher := start(t, main.Cmd("nsenter", "--net="+node, "--"))
	log := &watcher.log
	require.Eventually(t, func() bool { return strings.Contains(log.String(), "ok cni pod-1 eth0") }, repairBound, 50*time.Millisecond,
		"the first pass finds the pod intact: %s", log.String())

	flush, err := exec.Command("nsenter", "--net="+node, "--", "nft", "flush", "ruleset").CombinedOutput()
	require.NoError(t, err, "%s", flush)
	deadline := time.Now().Add(repairBound)
	for {
		out, err = runtime("check")
		if err == nil {
			break
		}
		require.True(t, time.Now().Before(deadline), "CHECK still fails %v after the flush: %s\nwatcher: %s", repairBound, out, log.String())
		time.Sleep(100 * time.Millisecond)
	}
	assert.Contains(t, log.String(), "repaired cni pod-1 eth0: chain: bridge: ipMasq: ")

	watcher.requireStopsOnSIGTERM(t, repairBound)
}

// nodeRuntime runs the plugins on the node as containerd does: `cni add|check|del` of
// the image's binary in the node's netns, on the node's /var/lib/cni and
// /var/run/netns, whatever the manifest mounts; capArgs are the runtime's capability
// arguments of the pod.
func nodeRuntime(t *testing.T, spec corev1.PodSpec, cms []corev1.ConfigMap, root, node string) func(cmd, netns, id, capArgs string) (string, error) {
	runtimeVolumes := slices.DeleteFunc(slices.Clone(spec.Volumes), func(v corev1.Volume) bool { return v.Name == "netns" })
	dirOrCreate := corev1.HostPathDirectoryOrCreate
	runtimeVolumes = append(runtimeVolumes, corev1.Volume{Name: "netns", VolumeSource: corev1.VolumeSource{
		HostPath: &corev1.HostPathVolumeSource{Path: "/var/run/netns", Type: &dirOrCreate}}})
	return func(cmd, netns, id, capArgs string) (string, error) {
		c := corev1.Container{
			Name: "runtime",
			Command: []string{image.BinaryPath, cmd, "cni", netns, "--container-id", id,
				"--conf-dir", "/host/etc/cni/net.d", "--cni-path", "/host/opt/cni/bin", "--cap-args", capArgs},
			VolumeMounts: []corev1.VolumeMount{
				{Name: "cni-bin", MountPath: "/host/opt/cni/bin"},
				{Name: "cni-net-d", MountPath: "/host/etc/cni/net.d"},
				{Name: "cni-cache", MountPath: "/var/lib/cni"},
				{Name: "netns", MountPath: "/var/run/netns"},
			},
		}
		return newContainer(t, c, runtimeVolumes, cms, root).Run("nsenter", "--net="+node, "--")
	}
}

// The test above runs the repair container as root with every capability, which this
// harness cannot take away; what the kubelet grants it is read here. A repair writes
// the node's rules (NET_ADMIN) and enters the pods' network namespaces, where bandwidth
// finds a pod's host veth by its end in the pod (SYS_ADMIN, which setns needs); the
// namespaces are the node's /var/run/netns, at the path the result cache names.
func TestRepairContainerMayEnterThePodsNetns(t *testing.T) {
	for _, p := range profiles {
		t.Run(p.file, func(t *testing.T) {
			ds, _ := installDaemonSet(t, p.file)
			spec := ds.Spec.Template.Spec
			require.True(t, spec.HostNetwork, "the node's rules are in the node's netns")
			c := spec.Containers[0]
			require.NotNil(t, c.SecurityContext)
			require.NotNil(t, c.SecurityContext.Capabilities)
			assert.Subset(t, c.SecurityContext.Capabilities.Add, []corev1.Capability{"NET_ADMIN", "SYS_ADMIN"})
			i := slices.IndexFunc(c.VolumeMounts, func(m corev1.VolumeMount) bool { return m.MountPath == "/var/run/netns" })
			require.GreaterOrEqual(t, i, 0, "the pods' netns are not mounted")
			m := c.VolumeMounts[i]
			require.NotNil(t, m.MountPropagation, "a netns the runtime pins after the container started must show")
			assert.Equal(t, corev1.MountPropagationHostToContainer, *m.MountPropagation)
			v := spec.Volumes[slices.IndexFunc(spec.Volumes, func(v corev1.Volume) bool { return v.Name == m.Name })]
			require.NotNil(t, v.HostPath)
			assert.Equal(t, "/var/run/netns", v.HostPath.Path)
		})
	}
}
