//go:build e2e

package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/cnikit/cni/tools/internal/cnibuild"
)

// daemonSetConfList is the network config the shipped DaemonSet installs: the data
// of deploy/kubernetes/cni.yaml's ConfigMap, which its init container hands to cni
// install --conf.
func daemonSetConfList(t *testing.T) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(cnibuild.Root(), "deploy", "kubernetes", "cni.yaml"))
	require.NoError(t, err)
	for _, doc := range strings.Split(string(data), "\n---\n") {
		var tm metav1.TypeMeta
		require.NoError(t, yaml.Unmarshal([]byte(doc), &tm))
		if tm.Kind != "ConfigMap" {
			continue
		}
		var cm corev1.ConfigMap
		require.NoError(t, yaml.Unmarshal([]byte(doc), &cm))
		require.Len(t, cm.Data, 1, "the ConfigMap holds one network config")
		for _, list := range cm.Data {
			return list
		}
	}
	t.Fatal("deploy/kubernetes/cni.yaml holds no ConfigMap")
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

	pods := []*pod{newPod("ds-web", 8080, ""), newPod("ds-bw-1m", 8081, "1M")}
	for _, p := range pods {
		p.run(t, n)
	}
	qdiscs, err := n.Qdiscs()
	require.NoError(t, err)
	for _, p := range pods {
		p.reach(t, peer)
	}
	// A tbf on the host veth (the pod's ingress) and one on the ifb (its egress).
	assert.Equal(t, 2, strings.Count(qdiscs, "tbf "), "only the annotated pod is shaped:\n%s", qdiscs)
	assert.Equal(t, 2, strings.Count(qdiscs, "rate 1Mbit "), "ds-bw-1m shaped at 1Mbit:\n%s", qdiscs)
	// containerd's burst (4294967295 bits) clamped to the most a tbf holds at 1 Mbit/s:
	// 274877896 bits, 275 s of rate, as the node's own tc prints it.
	assert.Equal(t, 2, strings.Count(qdiscs, "rate 1Mbit burst 34359737b "), "the clamped burst:\n%s", qdiscs)
	for _, p := range pods {
		p.stopAndRemove(t, n)
	}
	requireNothingLeft(t, n, base)
}
