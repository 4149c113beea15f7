//go:build e2e

package e2e

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cnikit/cni/tools/crinode/podtest"

	"github.com/cnikit/cni/tools/internal/cnibuild"
	"github.com/cnikit/cni/tools/manifest"
)

// daemonSetConfList is the network config the single-node profile's DaemonSet
// installs: the data of deploy/kubernetes/cni-single-node.yaml's ConfigMap, which its
// init container hands to cni install --conf. (The cluster lab, make test-cluster,
// runs the other profiles.)
func daemonSetConfList(t *testing.T) string {
	t.Helper()
	objs, err := manifest.Load(filepath.Join(cnibuild.Root(), "deploy", "kubernetes", "cni-single-node.yaml"))
	require.NoError(t, err)
	require.Len(t, objs.ConfigMaps, 1)
	cm := objs.ConfigMaps[0]
	require.Len(t, cm.Data, 1, "the ConfigMap holds one network config")
	for _, list := range cm.Data {
		return list
	}
	return ""
}

// The DaemonSet's own config, as its init container installs it, under containerd 1.6
// (whose libcni must accept its cniVersion): pods start, their host ports answer, a
// bandwidth annotation of 1M shapes at 1M both ways, and Stop then Remove leaves the
// node as it was.
func TestDaemonSetConfigUnderContainerd(t *testing.T) {
	list := daemonSetConfList(t)
	require.Contains(t, list, `"type": "chain"`, "the DaemonSet ships the chain plugin")
	n, peer, base := withPeer(t, startNodeWith(t, "--conf", list))

	pods := []*podtest.Pod{newPod("ds-web", 8080, ""), newPod("ds-bw-1m", 8081, "1M")}
	for _, p := range pods {
		p.Run(t, n)
	}
	qdiscs, err := n.Qdiscs()
	require.NoError(t, err)
	for _, p := range pods {
		p.Reach(t, peer)
	}
	// A tbf on the host veth (the pod's ingress) and one on the ifb (its egress).
	assert.Equal(t, 2, strings.Count(qdiscs, "tbf "), "only the annotated pod is shaped:\n%s", qdiscs)
	assert.Equal(t, 2, strings.Count(qdiscs, "rate 1Mbit "), "ds-bw-1m shaped at 1Mbit:\n%s", qdiscs)
	// containerd's burst (4294967295 bits) clamped to the most a tbf holds at 1 Mbit/s:
	// 274877896 bits, 275 s of rate, as the node's own tc prints it.
	assert.Equal(t, 2, strings.Count(qdiscs, "rate 1Mbit burst 34359737b "), "the clamped burst:\n%s", qdiscs)
	for _, p := range pods {
		p.StopAndRemove(t, n)
	}
	podtest.RequireNothingLeft(t, n, base)
}
