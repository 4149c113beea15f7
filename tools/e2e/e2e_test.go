//go:build e2e

package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cnikit/cni/tools/crinode"
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
	peer, err := n.NewPeer()
	require.NoError(t, err)
	t.Cleanup(peer.Close)
	return n, peer, baseline(t, n)
}

// pod is one pod of a test with what the test expects of it.
type pod struct {
	crinode.Pod
	id   string
	rate string // tc's spelling of the shaped rate, "" when not shaped
}

func newPod(name string, hostPort int32, bandwidth string) *pod {
	p := &pod{Pod: crinode.Pod{Name: name, Namespace: "e2e", UID: "uid-" + name}}
	if hostPort > 0 {
		p.Ports = []crinode.Port{{HostPort: hostPort, ContainerPort: 80}}
	}
	if bandwidth != "" {
		p.Annotations = map[string]string{"kubernetes.io/ingress-bandwidth": bandwidth, "kubernetes.io/egress-bandwidth": bandwidth}
		p.rate = strings.TrimSuffix(bandwidth, "M") + "Mbit"
	}
	return p
}

// run is RunPodSandbox, then a check that the pod is ready with an address of the
// network, and a server on its port 80 that answers with the pod's name.
func (p *pod) run(t *testing.T, n *crinode.Node) {
	t.Helper()
	id, err := n.CRI.RunPod(p.Pod)
	require.NoError(t, err)
	p.id = id
	p.serve(t, n)
}

func (p *pod) serve(t *testing.T, n *crinode.Node) {
	t.Helper()
	st, err := n.CRI.Status(p.id)
	require.NoError(t, err)
	require.True(t, st.Ready, "%s is ready", p.Name)
	assert.True(t, strings.HasPrefix(st.IP, "10.88."), "%s: address %q from the network's range", p.Name, st.IP)
	if len(p.Ports) == 0 {
		return
	}
	ns, err := n.PodNetNS(st)
	require.NoError(t, err)
	l, err := crinode.Serve(ns, ":80", p.Name)
	require.NoError(t, err)
	t.Cleanup(func() { l.Close() })
}

// reach connects from the peer to the pod's host port on the node's address.
func (p *pod) reach(t *testing.T, peer *crinode.Peer) {
	t.Helper()
	addr := fmt.Sprintf("%s:%d", peer.NodeAddr, p.Ports[0].HostPort)
	got, err := crinode.DialTCP(peer.NetNS(), addr, 5*time.Second)
	require.NoError(t, err, "%s through host port %s", p.Name, addr)
	assert.Equal(t, p.Name+"\n", got)
}

// stopAndRemove is StopPodSandbox, then RemovePodSandbox, as kubelet deletes a pod.
func (p *pod) stopAndRemove(t *testing.T, n *crinode.Node) {
	t.Helper()
	require.NoError(t, n.CRI.StopPod(p.id))
	require.NoError(t, n.CRI.RemovePod(p.id))
}

// baseline runs one pod with a port mapping and a bandwidth limit and removes it, and
// returns the node's state then: what every later pod must leave unchanged (a bridge,
// a peer link, the plugins' empty chains).
func baseline(t *testing.T, n *crinode.Node) crinode.State {
	t.Helper()
	warm := newPod("warm-up", 7000, "10M")
	warm.run(t, n)
	warm.stopAndRemove(t, n)
	s, err := n.State()
	require.NoError(t, err)
	assert.Empty(t, s.Qdiscs)
	assert.Empty(t, s.Reservations)
	assert.Empty(t, s.Cache)
	assert.Empty(t, s.Netns)
	return s
}

// requireNothingLeft compares the node's state with the baseline.
func requireNothingLeft(t *testing.T, n *crinode.Node, base crinode.State) {
	t.Helper()
	s, err := n.State()
	require.NoError(t, err)
	assert.Equal(t, base.Links, s.Links, "links")
	assert.Empty(t, s.Qdiscs, "qdiscs")
	assert.Equal(t, base.Rules, s.Rules, "firewall rules")
	assert.Empty(t, s.Reservations, "IP reservations")
	assert.Empty(t, s.Cache, "libcni cache entries")
	assert.Empty(t, s.Netns, "netns files")
	ids, err := n.CRI.Pods()
	require.NoError(t, err)
	assert.Empty(t, ids, "sandboxes")
}

func TestPodsWithHostPortsAndBandwidthAnnotations(t *testing.T) {
	for _, l := range layouts {
		t.Run(l.name, func(t *testing.T) {
			n, peer, base := startNodeWithPeer(t, l.flag)

			pods := []*pod{
				newPod("web", 8080, ""),
				newPod("bw-1m", 8081, "1M"),
				newPod("bw-15m", 8082, "15M"),
				newPod("bw-100m", 8083, "100M"),
				newPod("plain", 0, ""),
			}
			for _, p := range pods {
				p.run(t, n)
			}
			qdiscs, err := n.Qdiscs()
			require.NoError(t, err)
			for _, p := range pods {
				if len(p.Ports) > 0 {
					p.reach(t, peer)
				}
				if p.rate != "" {
					// A tbf on the host veth (ingress) and one on the ifb (egress).
					assert.Equal(t, 2, strings.Count(qdiscs, "rate "+p.rate+" "), "%s shaped at %s:\n%s", p.Name, p.rate, qdiscs)
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
				p.stopAndRemove(t, n)
			}
			requireNothingLeft(t, n, base)
		})
	}
}

func TestTwentyPodsAtOnce(t *testing.T) {
	for _, l := range layouts {
		t.Run(l.name, func(t *testing.T) {
			n, peer, base := startNodeWithPeer(t, l.flag)

			pods := make([]*pod, 20)
			for i := range pods {
				bw := ""
				if i%2 == 0 {
					bw = "50M"
				}
				pods[i] = newPod(fmt.Sprintf("many-%d", i), int32(9000+i), bw)
			}
			parallel(t, pods, func(p *pod) error {
				id, err := n.CRI.RunPod(p.Pod)
				p.id = id
				return err
			})
			ips := map[string]string{}
			for _, p := range pods {
				p.serve(t, n)
				st, err := n.CRI.Status(p.id)
				require.NoError(t, err)
				assert.Empty(t, ips[st.IP], "%s and %s share %s", ips[st.IP], p.Name, st.IP)
				ips[st.IP] = p.Name
				p.reach(t, peer)
			}
			parallel(t, pods, func(p *pod) error {
				if err := n.CRI.StopPod(p.id); err != nil {
					return err
				}
				return n.CRI.RemovePod(p.id)
			})
			requireNothingLeft(t, n, base)
		})
	}
}

// parallel runs fn for every pod at once, as kubelet's pod workers do.
func parallel(t *testing.T, pods []*pod, fn func(*pod) error) {
	t.Helper()
	errs := make([]error, len(pods))
	var wg sync.WaitGroup
	for i, p := range pods {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = fn(p)
		}()
	}
	wg.Wait()
	for _, err := range errs {
		require.NoError(t, err)
	}
}

func TestContainerdRestartWithPodsUp(t *testing.T) {
	n, peer, base := startNodeWithPeer(t, "--one-exec")
	pods := []*pod{newPod("before-1", 8090, "1M"), newPod("before-2", 8091, "")}
	for _, p := range pods {
		p.run(t, n)
	}

	require.NoError(t, n.Restart())
	require.Eventually(t, func() bool { return n.CRI.NetworkReady() == nil }, 30*time.Second, 50*time.Millisecond)

	for _, p := range pods {
		st, err := n.CRI.Status(p.id)
		require.NoError(t, err)
		assert.True(t, st.Ready, "%s survives the restart", p.Name)
		p.reach(t, peer)
	}
	after := newPod("after", 8092, "15M")
	after.run(t, n)
	after.reach(t, peer)
	for _, p := range append(pods, after) {
		p.stopAndRemove(t, n)
	}
	requireNothingLeft(t, n, base)
}
