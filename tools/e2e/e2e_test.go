//go:build e2e

package e2e

import (
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cnikit/cni/tools/crinode"
	"github.com/cnikit/cni/tools/crinode/podtest"
	"github.com/cnikit/cni/tools/internal/cnibuild"
)

var pause, pauseArchive string

func TestMain(m *testing.M) {
	os.Exit(crinode.RunTests(m, func(p, a string) { pause, pauseArchive = p, a }))
}

// layouts are the two ways a node holds the standard chain: as written, one exec per
// plugin, and as cni install --one-exec writes it, one chain plugin.
var layouts = []struct {
	name string
	flag string
}{{"four plugins", "--conf"}, {"chain plugin", "--one-exec"}}

// startNode installs the cni binary into a bin dir with cni install, the standard list
// with flag (--conf or --one-exec), and starts containerd on them.
func startNode(t *testing.T, flag string) *crinode.Node {
	t.Helper()
	return startNodeWith(t, flag, crinode.StandardList)
}

// startNodeWith is startNode with list as the network config.
func startNodeWith(t *testing.T, flag, list string) *crinode.Node {
	t.Helper()
	require.Equal(t, 0, os.Geteuid(), "the e2e suite runs as root (namespaces, containerd)")
	bin, err := cnibuild.Binary(runtime.GOARCH)
	require.NoError(t, err)
	// Not t.TempDir: the socket's path must stay short.
	dir, err := os.MkdirTemp("", "cni-e2e-")
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(dir) })
	binDir, conf, err := crinode.Install(bin, dir, flag, list)
	require.NoError(t, err)
	n, err := crinode.Start(crinode.Options{Dir: filepath.Join(dir, "node"), BinDir: binDir,
		ConfList: conf, Pause: pause, PauseArchive: pauseArchive})
	require.NoError(t, err)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("containerd's log:\n%s", n.LogTail())
		}
		n.Close()
	})
	require.Eventually(t, func() bool { return n.CRI.NetworkReady() == nil }, 30*time.Second, 50*time.Millisecond,
		"the CRI loads the network config")
	return n
}

// startNodeWithPeer is startNode, a peer namespace on the node's network and the
// node's baseline state.
func startNodeWithPeer(t *testing.T, flag string) (*crinode.Node, *crinode.Peer, crinode.State) {
	t.Helper()
	return withPeer(t, startNode(t, flag))
}

// withPeer gives the running node n a peer namespace and takes its baseline state.
func withPeer(t *testing.T, n *crinode.Node) (*crinode.Node, *crinode.Peer, crinode.State) {
	t.Helper()
	peer, base := podtest.WithPeer(t, n, podNamespace)
	return n, peer, base
}

// podNamespace is the Kubernetes namespace of the suite's pods.
const podNamespace = "e2e"

// newPod is one pod of the suite, not yet run.
func newPod(name string, hostPort int32, bandwidth string) *podtest.Pod {
	return podtest.New(podNamespace, name, hostPort, bandwidth)
}

func TestPodsWithHostPortsAndBandwidthAnnotations(t *testing.T) {
	for _, l := range layouts {
		t.Run(l.name, func(t *testing.T) {
			n, peer, base := startNodeWithPeer(t, l.flag)

			pods := []*podtest.Pod{
				newPod("web", 8080, ""),
				newPod("bw-1m", 8081, "1M"),
				newPod("bw-15m", 8082, "15M"),
				newPod("bw-100m", 8083, "100M"),
				newPod("plain", 0, ""),
			}
			for _, p := range pods {
				p.Run(t, n)
			}
			qdiscs, err := n.Qdiscs()
			require.NoError(t, err)
			for _, p := range pods {
				if len(p.Ports) > 0 {
					p.Reach(t, peer)
				}
				if p.Rate != "" {
					// A tbf on the host veth (ingress) and one on the ifb (egress).
					assert.Equal(t, 2, strings.Count(qdiscs, "rate "+p.Rate+" "), "%s shaped at %s:\n%s", p.Name, p.Rate, qdiscs)
				}
			}
			// What requireNothingLeft looks for is there while the pods are up: each
			// listing looks where the runtime and the plugins keep their state.
			up, err := n.State()
			require.NoError(t, err)
			assert.Len(t, up.Netns, len(pods), "netns files")
			assert.Len(t, up.Reservations, len(pods), "IP reservations")
			assert.Len(t, up.Cache, 2*len(pods), "cache entries: cni-loopback's and ours per pod")
			assert.Len(t, up.Qdiscs, 3*3, "per shaped pod: a tbf and an ingress qdisc on its veth, a tbf on its ifb")
			assert.Greater(t, len(up.Links), len(base.Links)+len(pods), "veths and ifbs")
			assert.NotEqual(t, base.Rules, up.Rules, "the pods' masquerade and port mapping rules")
			// containerd logs what its plugins write on stderr: the clamp of its own
			// burst at 1M and 15M is said there.
			assert.Contains(t, n.Log(), "runtimeConfig.bandwidth.ingressBurst: 4294967295 bits clamped to 274877896 bits")
			for _, p := range pods {
				p.StopAndRemove(t, n)
			}
			podtest.RequireNothingLeft(t, n, base)
		})
	}
}

func TestTwentyPodsAtOnce(t *testing.T) {
	for _, l := range layouts {
		t.Run(l.name, func(t *testing.T) {
			n, peer, base := startNodeWithPeer(t, l.flag)

			podtest.ManyAtOnce(t, n, peer, podNamespace, 20)
			podtest.RequireNothingLeft(t, n, base)
		})
	}
}

func TestContainerdRestartWithPodsUp(t *testing.T) {
	n, peer, base := startNodeWithPeer(t, "--one-exec")
	pods := []*podtest.Pod{newPod("before-1", 8090, "1M"), newPod("before-2", 8091, "")}
	for _, p := range pods {
		p.Run(t, n)
	}

	require.NoError(t, n.Restart())
	require.Eventually(t, func() bool { return n.CRI.NetworkReady() == nil }, 30*time.Second, 50*time.Millisecond)

	podtest.AfterRestart(t, n, peer, podNamespace, pods)
	podtest.RequireNothingLeft(t, n, base)
}
