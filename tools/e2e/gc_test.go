//go:build e2e

package e2e

import (
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cnikit/cni/tools/crinode"
	"github.com/cnikit/cni/tools/crinode/podtest"
	"github.com/cnikit/cni/tools/internal/cnibuild"
)

// gcList is the standard list for containerd 1.6, whose libcni knows no 1.1.0, offering
// 1.1.0 as well (cniVersions, spec 1.1): cni gc sends GC to the plugins of a 1.1.0
// list only, and that is what collects an attachment the runtime never cached.
const gcList = `{"cniVersion":"1.0.0","cniVersions":["1.0.0","1.1.0"],"name":"std","plugins":[
  {"type":"bridge","bridge":"cni0","isGateway":true,"ipMasq":true,"hairpinMode":true,
   "ipam":{"type":"host-local","ranges":[[{"subnet":"10.88.0.0/16"}]],"routes":[{"dst":"0.0.0.0/0"}]}},
  {"type":"portmap","capabilities":{"portMappings":true}},
  {"type":"bandwidth","capabilities":{"bandwidth":true}}]}`

// rewriteNetwork writes list as the node's network config and waits until the CRI has
// reloaded it, its plugin types being types.
func rewriteNetwork(t *testing.T, n *crinode.Node, list string, types []string) {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(n.NetConfDir(), "*.conflist"))
	require.NoError(t, err)
	require.Len(t, files, 1)
	tmp := files[0] + ".tmp"
	require.NoError(t, os.WriteFile(tmp, []byte(list), 0o644))
	require.NoError(t, os.Rename(tmp, files[0]))
	require.Eventually(t, func() bool {
		nets, err := n.CRI.Networks()
		return err == nil && slices.ContainsFunc(nets, func(net crinode.Network) bool { return slices.Equal(net.Types, types) })
	}, 30*time.Second, 50*time.Millisecond, "the CRI reloads the network config with %v", types)
}

// runGCCaller runs the shipped GC caller in the node as cni-gc.timer runs it, with the
// node's paths, and returns its output. -settle 0s: the test's pods are seconds old,
// and a node's timer runs long after its pods were set up.
func runGCCaller(t *testing.T, n *crinode.Node, socket string) (string, error) {
	t.Helper()
	caller, err := cnibuild.GCCaller(runtime.GOARCH)
	require.NoError(t, err)
	return n.Run(caller, "-socket", socket, "-cni", filepath.Join(n.BinDir(), "cni"),
		"-conf-dir", n.NetConfDir(), "-cni-path", n.BinDir(), "-settle", "0s", "-timeout", "30s")
}

// holdingPlugin is a chained plugin whose ADD passes its prevResult on once the file
// release exists, after creating the file held: a test kills containerd in between.
func holdingPlugin(held, release string) string {
	return `#!/bin/sh
case "$CNI_COMMAND" in
ADD)
	in=$(cat)
	touch ` + held + `
	while [ ! -e ` + release + ` ]; do sleep 0.05; done
	printf '%s' "$in" | jq -c '.prevResult' ;;
VERSION) echo '{"cniVersion":"1.1.0","supportedVersions":["0.3.0","0.3.1","0.4.0","1.0.0","1.1.0"]}' ;;
*) cat >/dev/null ;;
esac
`
}

// stdEntries are the cache entries of the std network (containerd caches its own
// loopback network's beside them, cni-loopback-*, which is in no conf dir).
func stdEntries(cache []string) []string {
	return slices.DeleteFunc(slices.Clone(cache), func(e string) bool { return !strings.HasPrefix(e, "std-") })
}

// TestGCCallerCollectsWhatContainerdForgot is the GC caller (cni-gc-cri, as the timer
// runs it) on a containerd node holding:
//   - two live pods, with host ports;
//   - a pod whose ADD containerd crashed in (containerd #12923): bridge and host-local
//     set it up, no result was cached, and the restarted containerd lists its sandbox,
//     not ready: it is containerd's to DEL, and GC must leave it alone;
//   - an attachment whose sandbox containerd no longer knows, left as a sandbox removed
//     while its DEL failed leaves one (containerd #12130): its cache entry, its
//     reservation, its masquerade, its port mapping, its netns gone. Debian's containerd
//     1.6 itself leaks none of the above (it keeps such sandboxes, UNKNOWN, until a DEL
//     succeeds), so the runtime's CLI sets it up on the node's state, as a containerd
//     2.x that dropped the sandbox would have.
//
// With the CRI socket unreachable it collects nothing; then it collects the forgotten
// attachment and nothing else; the live pods answer, and once every pod is removed
// the node is as before.
func TestGCCallerCollectsWhatContainerdForgot(t *testing.T) {
	n, peer, base := withPeer(t, startNodeWith(t, "--conf", gcList))
	pods := []*podtest.Pod{newPod("gc-live-a", 8080, ""), newPod("gc-live-b", 8081, "")}
	for _, p := range pods {
		p.Run(t, n)
	}
	crashed := crashInADD(t, n, pods)
	forgetAttachment(t, n, "forgotten-0123456789abcdef", 8082)

	leaked, err := n.State()
	require.NoError(t, err)
	require.Len(t, leaked.Reservations, 4, "two live pods, the crashed one, the forgotten attachment")
	require.Len(t, stdEntries(leaked.Cache), 3, "the live pods' and the forgotten attachment's")
	require.Contains(t, leaked.Rules, "8082", "the forgotten attachment's port mapping")

	out, err := runGCCaller(t, n, filepath.Join(t.TempDir(), "no-runtime.sock"))
	require.Error(t, err, "the runtime cannot be asked: %s", out)
	after, err := n.State()
	require.NoError(t, err)
	assert.Equal(t, leaked.Reservations, after.Reservations, "nothing collected without the runtime's list")
	assert.Equal(t, leaked.Cache, after.Cache, "nothing collected without the runtime's list")
	assert.Equal(t, leaked.Rules, after.Rules, "nothing collected without the runtime's list")

	out, err = runGCCaller(t, n, n.Socket())
	require.NoError(t, err, out)
	assert.Contains(t, out, "network std: collected")
	after, err = n.State()
	require.NoError(t, err)
	assert.Len(t, after.Reservations, 3, "the forgotten attachment's address is released, the crashed pod's kept")
	assert.Equal(t, slices.DeleteFunc(stdEntries(leaked.Cache), func(e string) bool { return strings.Contains(e, "forgotten-") }),
		stdEntries(after.Cache), "the forgotten attachment's cache entry goes, the live pods' stay")
	assert.NotContains(t, after.Rules, "8082", "the forgotten attachment's port mapping goes")
	for _, p := range pods {
		st, err := n.CRI.Status(p.ID)
		require.NoError(t, err)
		assert.True(t, st.Ready, p.Name)
		p.Reach(t, peer)
	}

	// containerd DELs the crashed pod when kubelet removes it, then the live ones go.
	require.NoError(t, n.CRI.StopPod(crashed))
	require.NoError(t, n.CRI.RemovePod(crashed))
	for _, p := range pods {
		p.StopAndRemove(t, n)
	}
	podtest.RequireNothingLeft(t, n, base)
}

// crashInADD runs a pod whose ADD holds in a chained plugin, kills containerd there
// and restarts it, and returns the sandbox id the restarted containerd lists for it.
func crashInADD(t *testing.T, n *crinode.Node, live []*podtest.Pod) string {
	t.Helper()
	marks := t.TempDir()
	held, release := filepath.Join(marks, "held"), filepath.Join(marks, "release")
	require.NoError(t, os.WriteFile(filepath.Join(n.BinDir(), "holding"), []byte(holdingPlugin(held, release)), 0o755))
	t.Cleanup(func() { os.WriteFile(release, nil, 0o644) })
	rewriteNetwork(t, n, strings.Replace(gcList, `{"type":"portmap"`, `{"type":"holding"},{"type":"portmap"`, 1),
		[]string{"bridge", "holding", "portmap", "bandwidth"})
	failed := make(chan error, 1)
	go func() {
		_, err := n.CRI.RunPod(newPod("gc-crashed", 0, "").Pod)
		failed <- err
	}()
	require.Eventually(t, func() bool { _, err := os.Stat(held); return err == nil }, 30*time.Second, 20*time.Millisecond,
		"the pod's ADD reaches the holding plugin")
	require.NoError(t, n.Crash())
	require.Error(t, <-failed, "RunPodSandbox dies with containerd")
	require.NoError(t, os.WriteFile(release, nil, 0o644))
	rewriteNetwork(t, n, gcList, []string{"bridge", "portmap", "bandwidth"})
	ids, err := n.CRI.Pods()
	require.NoError(t, err)
	ids = slices.DeleteFunc(ids, func(id string) bool {
		return slices.ContainsFunc(live, func(p *podtest.Pod) bool { return p.ID == id })
	})
	require.Len(t, ids, 1, "the restarted containerd lists the crashed pod's sandbox")
	return ids[0]
}

// forgetAttachment sets up an attachment of the node's network for id with a host
// port, as the runtime's DEL-less removal leaves one: its netns is then removed.
func forgetAttachment(t *testing.T, n *crinode.Node, id string, hostPort int) {
	t.Helper()
	// Pinned as containerd pins one (not `ip netns add`, which remounts the node's
	// /run/netns over the netns containerd pinned there).
	netns := "/run/netns/" + id
	out, err := n.Run("sh", "-c", "touch "+netns+" && unshare --net mount --bind /proc/self/ns/net "+netns)
	require.NoError(t, err, out)
	out, err = n.Run(filepath.Join(n.BinDir(), "cni"), "add", "std", "/var/run/netns/"+id, "--container-id", id,
		"--conf-dir", n.NetConfDir(), "--cni-path", n.BinDir(),
		"--cap-args", `{"portMappings":[{"hostPort":`+strconv.Itoa(hostPort)+`,"containerPort":80,"protocol":"tcp"}]}`)
	require.NoError(t, err, out)
	out, err = n.Run("sh", "-c", "umount "+netns+" && rm "+netns)
	require.NoError(t, err, out)
}
