//go:build crio

package crioe2e

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
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

// crioList is the standard chain at cniVersion 1.1.0, as CRI-O takes it.
var crioList = crinode.StandardList11

// plugins is one set of plugins a node runs the standard chain with: ours in one of
// cni install's layouts, or the reference's.
type plugins struct {
	name string
	// flag is cni install's layout flag; "" for the reference plugins.
	flag string
}

// sides are ours (both layouts) and the reference's: every scenario runs on each.
var sides = []plugins{{"ours four plugins", "--conf"}, {"ours chain plugin", "--one-exec"}, {"reference", ""}}

// crioPrograms are make test-crio's builds (bin/crio, bin/pinns, bin/crio-load, bin/crio-runc).
func crioPrograms(t *testing.T) *crinode.CRIO {
	t.Helper()
	c := &crinode.CRIO{Bin: os.Getenv("CNI_CRIO"), Pinns: os.Getenv("CNI_CRIO_PINNS"), Load: os.Getenv("CNI_CRIO_LOAD"),
		Runc: os.Getenv("CNI_CRIO_RUNC")}
	if c.Bin == "" || c.Pinns == "" || c.Load == "" || c.Runc == "" {
		t.Fatal("CNI_CRIO, CNI_CRIO_PINNS, CNI_CRIO_LOAD and CNI_CRIO_RUNC name make's builds: run make test-crio")
	}
	return c
}

// nodeDir is a new short dir for a node (its socket's path must fit 108 bytes).
func nodeDir(t *testing.T) string {
	t.Helper()
	require.Equal(t, 0, os.Geteuid(), "the CRI-O suite runs as root (namespaces, CRI-O)")
	dir, err := os.MkdirTemp("", "cni-crio-")
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

// installPlugins puts the side's plugins and list into dir as a node holds them: its
// bin dir and the config's bytes.
func installPlugins(t *testing.T, dir string, side plugins, list string) (string, []byte) {
	t.Helper()
	if side.flag == "" {
		ref := os.Getenv("CNI_CRIO_REFERENCE")
		require.NotEmpty(t, ref, "CNI_CRIO_REFERENCE names the reference plugins (make test-crio)")
		binDir, err := crinode.InstallReference(ref, dir)
		require.NoError(t, err)
		return binDir, []byte(list)
	}
	bin, err := cnibuild.Binary(runtime.GOARCH)
	require.NoError(t, err)
	binDir, conf, err := crinode.Install(bin, dir, side.flag, list)
	require.NoError(t, err)
	return binDir, conf
}

// startCRIO starts a CRI-O node on the side's plugins with list, and waits for its
// network to be ready.
func startCRIO(t *testing.T, side plugins, list string, edit func(*crinode.Options)) *crinode.Node {
	t.Helper()
	return startCRIOWith(t, crioOptions(t, side, list, edit))
}

// crioOptions are a new CRI-O node's options on the side's plugins with list, edited.
func crioOptions(t *testing.T, side plugins, list string, edit func(*crinode.Options)) crinode.Options {
	t.Helper()
	dir := nodeDir(t)
	binDir, conf := installPlugins(t, dir, side, list)
	o := crinode.Options{Dir: filepath.Join(dir, "node"), BinDir: binDir, ConfList: conf,
		Pause: pause, PauseArchive: pauseArchive, CRIO: crioPrograms(t)}
	if edit != nil {
		edit(&o)
	}
	return o
}

// startCRIOWith starts a CRI-O node with o, closed when the test ends, and waits for
// its network to be ready: CRI-O has then run its GC of stale attachments (it runs GC
// before it first reports the network ready).
func startCRIOWith(t *testing.T, o crinode.Options) *crinode.Node {
	t.Helper()
	n, err := crinode.Start(o)
	require.NoError(t, err)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("CRI-O's log:\n%s", n.LogTail())
		}
		n.Close()
	})
	waitNetworkReady(t, n)
	return n
}

func waitNetworkReady(t *testing.T, n *crinode.Node) {
	t.Helper()
	require.Eventually(t, func() bool { return n.CRI.NetworkReady() == nil }, 30*time.Second, 50*time.Millisecond,
		"CRI-O loads the network config")
}

// pod is one pod of a test with what the test expects of it.
type pod struct {
	crinode.Pod
	id string
}

func newPod(name string, hostPort int32, bandwidth string) *pod {
	p := &pod{Pod: crinode.Pod{Name: name, Namespace: "crio", UID: "uid-" + name}}
	if hostPort > 0 {
		p.Ports = []crinode.Port{{HostPort: hostPort, ContainerPort: 80}}
	}
	if bandwidth != "" {
		p.Annotations = map[string]string{"kubernetes.io/ingress-bandwidth": bandwidth, "kubernetes.io/egress-bandwidth": bandwidth}
	}
	return p
}

// run is RunPodSandbox (CRI-O's ADD, then its CHECK), then a check that the pod is
// ready with an address of the network, and a server on its port 80 that answers with
// the pod's name.
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
	ns, err := n.PodNetNS(st)
	require.NoError(t, err)
	l, err := crinode.Serve(ns, ":80", p.Name)
	require.NoError(t, err)
	t.Cleanup(func() { l.Close() })
}

// ip is the pod's address as CRI-O reports it.
func (p *pod) ip(t *testing.T, n *crinode.Node) string {
	t.Helper()
	st, err := n.CRI.Status(p.id)
	require.NoError(t, err)
	return st.IP
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
