package deploy_test

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"

	"github.com/cnikit/cni/tools/image"
	"github.com/cnikit/cni/tools/internal/critest"
)

// gcBound is the deadline for the gc container's first round on a small node.
const gcBound = 30 * time.Second

// flagValue is the value of -name in a Go program's command line.
func flagValue(cmd []string, name string) string {
	i := slices.Index(cmd, name)
	if i < 0 || i+1 >= len(cmd) {
		return ""
	}
	return cmd[i+1]
}

// mountOf is the mount of c whose path holds p, and its volume's hostPath ("" if none).
func mountOf(spec corev1.PodSpec, c corev1.Container, p string) (corev1.VolumeMount, string) {
	for _, m := range c.VolumeMounts {
		if p == m.MountPath || strings.HasPrefix(p, m.MountPath+"/") {
			v := spec.Volumes[slices.IndexFunc(spec.Volumes, func(v corev1.Volume) bool { return v.Name == m.Name })]
			if v.HostPath == nil {
				return m, ""
			}
			return m, v.HostPath.Path + strings.TrimPrefix(p, m.MountPath)
		}
	}
	return corev1.VolumeMount{}, ""
}

// The gc container of every profile asks containerd's socket on the node, writes the
// node's CNI state at the paths the configs name (host-local's dataDir defaults to
// /var/lib/cni/networks), and sees the pods' netns as the runtime makes them.
func TestGCContainerSeesTheNodeAsTheRuntimeDoes(t *testing.T) {
	for _, p := range profiles {
		t.Run(p.file, func(t *testing.T) {
			ds, _ := installDaemonSet(t, p.file)
			spec := ds.Spec.Template.Spec
			i := slices.IndexFunc(spec.Containers, func(c corev1.Container) bool { return c.Name == "gc" })
			require.GreaterOrEqual(t, i, 0)
			c := spec.Containers[i]
			assert.Equal(t, image.GCCallerPath, c.Command[0])
			assert.Equal(t, image.BinaryPath, flagValue(c.Command, "-cni"), "the image's cni runs the GC")
			_, host := mountOf(spec, c, flagValue(c.Command, "-socket"))
			assert.Equal(t, "/run/containerd/containerd.sock", host)
			m, host := mountOf(spec, c, flagValue(c.Command, "-cache-dir"))
			assert.Equal(t, "/var/lib/cni", host)
			assert.Equal(t, "/var/lib/cni", m.MountPath, "at the node's path: host-local's dataDir is named so")
			assert.False(t, m.ReadOnly, "GC removes cache entries and reservations")
			m, host = mountOf(spec, c, flagValue(c.Command, "-netns-dir"))
			assert.Equal(t, "/var/run/netns", host)
			require.NotNil(t, m.MountPropagation)
			assert.Equal(t, corev1.MountPropagationHostToContainer, *m.MountPropagation)
			require.NotNil(t, c.SecurityContext.Capabilities)
			assert.Contains(t, c.SecurityContext.Capabilities.Add, corev1.Capability("NET_ADMIN"), "GC removes host rules")
		})
	}
}

// TestDaemonSetCollectsALeakedAttachment is the shipped single-node profile on a node
// of the test's own: the init container installs, the runtime adds three pods, then
// forgets two (their sandboxes and netns removed, one while its DEL failed, one whose
// result was never cached), and the gc container runs as the manifest says against a
// CRI socket that lists the third pod only: the forgotten pods' reservations, port
// mappings and cache entry go, the live pod's stay (CHECK passes). The round runs at once only with -settle 0s, as on a node
// whose pods are older than the settle time.
func TestDaemonSetCollectsALeakedAttachment(t *testing.T) {
	requireRoot(t)
	ds, cms := installDaemonSet(t, "cni-single-node.yaml")
	spec := ds.Spec.Template.Spec
	root := t.TempDir()
	node := newNetns(t)
	run(t, newContainer(t, spec.InitContainers[0], spec.Volumes, cms, root))
	rt := nodeRuntime(t, spec, cms, root, node)
	ports := func(port string) string {
		return `{"portMappings":[{"hostPort":` + port + `,"containerPort":80,"protocol":"tcp"}]}`
	}

	live := "/var/run/netns/pod-live"
	bindNetns(t, newNetns(t), filepath.Join(root, live))
	out, err := rt("add", live, "pod-live", ports("8080"))
	require.NoError(t, err, out)
	t.Cleanup(func() {
		out, err := rt("del", live, "pod-live", ports("8080"))
		assert.NoError(t, err, out)
	})
	// A pod the runtime forgot, its netns gone: once with its cache entry (its DEL
	// failed), once without (the runtime crashed before caching its ADD's result).
	forget := func(id, port string, cached bool) {
		netns := filepath.Join(root, "/var/run/netns", id)
		require.NoError(t, os.WriteFile(netns, nil, 0o444))
		mnt, err := exec.Command("mount", "--bind", newNetns(t), netns).CombinedOutput()
		require.NoError(t, err, "%s", mnt)
		out, err := rt("add", "/var/run/netns/"+id, id, ports(port))
		require.NoError(t, err, out)
		mnt, err = exec.Command("umount", netns).CombinedOutput()
		require.NoError(t, err, "%s", mnt)
		require.NoError(t, os.Remove(netns))
		if !cached {
			require.NoError(t, os.Remove(filepath.Join(root, "var/lib/cni/results", "cni-"+id+"-eth0")))
		}
	}
	forget("pod-gone", "8081", true)
	forget("pod-uncached", "8082", false)
	reserved := func() []string {
		files, err := filepath.Glob(filepath.Join(root, "var/lib/cni/networks/cni/10.88.*"))
		require.NoError(t, err)
		var owners []string
		for _, f := range files {
			data, err := os.ReadFile(f)
			require.NoError(t, err)
			id, _, _ := strings.Cut(string(data), "\n")
			owners = append(owners, strings.TrimSpace(id))
		}
		return owners
	}
	cached := func() []string {
		entries, err := os.ReadDir(filepath.Join(root, "var/lib/cni/results"))
		require.NoError(t, err)
		var names []string
		for _, e := range entries {
			names = append(names, e.Name())
		}
		return names
	}
	rules := func() string {
		out, err := exec.Command("nsenter", "--net="+node, "--", "nft", "list", "ruleset").CombinedOutput()
		require.NoError(t, err, "%s", out)
		return string(out)
	}
	require.ElementsMatch(t, []string{"pod-live", "pod-gone", "pod-uncached"}, reserved())
	require.ElementsMatch(t, []string{"cni-pod-live-eth0", "cni-pod-gone-eth0"}, cached())
	require.Contains(t, rules(), "8081", "the forgotten pod's port mapping")

	require.NoError(t, os.MkdirAll(filepath.Join(root, "run/containerd"), 0o755))
	cri := &critest.Runtime{}
	cri.Set([]string{"pod-live"}, nil)
	critest.Serve(t, cri, filepath.Join(root, "run/containerd/containerd.sock"))
	c := spec.Containers[slices.IndexFunc(spec.Containers, func(c corev1.Container) bool { return c.Name == "gc" })]
	c.Command = append(slices.Clone(c.Command), "-settle", "0s", "-timeout", "5s")
	gc := start(t, newContainer(t, c, spec.Volumes, cms, root).Cmd("nsenter", "--net="+node, "--"))
	log := &gc.log
	if !assert.Eventually(t, func() bool { return strings.Contains(log.String(), "network cni: collected") }, gcBound, 50*time.Millisecond) {
		t.Fatalf("no round collected: %s", log.String())
	}

	assert.Equal(t, []string{"pod-live"}, reserved())
	assert.Equal(t, []string{"cni-pod-live-eth0"}, cached())
	assert.NotContains(t, rules(), "8081")
	assert.NotContains(t, rules(), "8082", "plugins' GC (the config offers 1.1.0) removes what no cache entry names")
	assert.Contains(t, rules(), "8080")
	out, err = rt("check", live, "pod-live", ports("8080"))
	assert.NoError(t, err, out)

	gc.requireStopsOnSIGTERM(t, gcBound)
}

// The profiles' configs offer 1.1.0 beside the 1.0.0 containerd 1.6 reads: cni gc sends
// GC to the plugins of a 1.1.0 network only, and that is what collects a reservation
// with no cache entry.
func TestProfilesConfigsOfferTheVersionPluginsGCNeeds(t *testing.T) {
	for _, p := range profiles {
		if !p.config {
			continue
		}
		t.Run(p.file, func(t *testing.T) {
			_, cms := installDaemonSet(t, p.file)
			require.Len(t, cms, 1)
			for _, data := range cms[0].Data {
				var list struct {
					CNIVersion  string   `json:"cniVersion"`
					CNIVersions []string `json:"cniVersions"`
				}
				require.NoError(t, json.Unmarshal([]byte(data), &list))
				assert.Equal(t, "1.0.0", list.CNIVersion, "containerd 1.6 knows no 1.1.0")
				assert.Contains(t, list.CNIVersions, "1.1.0")
			}
		})
	}
}
