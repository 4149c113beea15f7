//go:build cluster

package cluster_test

import (
	"os"
	"runtime"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/cnikit/cni/tools/cluster"
	"github.com/cnikit/cni/tools/crinode"
	"github.com/cnikit/cni/tools/internal/cnibuild"
)

// The lab's outside programs, which make test-cluster builds at pinned versions and
// names here.
const (
	flanneldEnv      = "CNI_LAB_FLANNELD"          // flanneld
	referenceEnv     = "CNI_LAB_REFERENCE"         // the reference plugins' dir
	refFlannelEnv    = "CNI_LAB_REFERENCE_FLANNEL" // the reference flannel plugin
	makeTestCluster  = "make test-cluster builds it and sets it"
	labNetworkName   = "cbr0"
	labPodsNamespace = "lab"
)

var pause, pauseArchive string

func TestMain(m *testing.M) {
	os.Exit(crinode.RunTests(m, func(p, a string) { pause, pauseArchive = p, a }))
}

// program is the file an environment variable of make test-cluster names.
func program(t *testing.T, env string) string {
	t.Helper()
	p := os.Getenv(env)
	require.NotEmpty(t, p, "%s is not set: %s", env, makeTestCluster)
	_, err := os.Stat(p)
	require.NoError(t, err, "%s: %s", env, makeTestCluster)
	return p
}

// ours is the cni binary the image ships for this machine's architecture.
func ours(t *testing.T) string {
	t.Helper()
	bin, err := cnibuild.Binary(runtime.GOARCH)
	require.NoError(t, err)
	return bin
}

// startLab starts a lab of n nodes, each laid out as kubeadm leaves a node, and stops
// it when the test ends.
func startLab(t *testing.T, n int) *cluster.Lab {
	t.Helper()
	require.Equal(t, 0, os.Geteuid(), "the lab runs as root (namespaces, containerd, flanneld)")
	// Not t.TempDir: containerd's socket path must stay short.
	dir, err := os.MkdirTemp("", "cni-lab-")
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(dir) })
	lab, err := cluster.Start(cluster.Options{
		Dir: dir, Nodes: n, Flanneld: program(t, flanneldEnv),
		Pause: pause, PauseArchive: pauseArchive,
		Prepare: cluster.KubeadmNode(program(t, referenceEnv)),
	})
	require.NoError(t, err)
	t.Cleanup(func() {
		if t.Failed() {
			for _, node := range lab.Nodes {
				if node.Node != nil {
					t.Logf("%s: containerd's log:\n%s", node.Name, node.LogTail())
				}
				t.Logf("%s: flanneld's log:\n%s", node.Name, node.FlanneldLog())
			}
		}
		lab.Close()
	})
	return lab
}

func runtimeArch() string { return runtime.GOARCH }
