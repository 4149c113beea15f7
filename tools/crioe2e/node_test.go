//go:build crio

package crioe2e

import (
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cnikit/cni/tools/crinode"
	"github.com/cnikit/cni/tools/crinode/podtest"
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

// podNamespace is the Kubernetes namespace of the suite's pods.
const podNamespace = "crio"

// newPod is one pod of the suite, not yet run.
func newPod(name string, hostPort int32, bandwidth string) *podtest.Pod {
	return podtest.New(podNamespace, name, hostPort, bandwidth)
}
