//go:build cluster

package cluster_test

import (
	"net/netip"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cnikit/cni/tools/cluster"
)

// TestSingleNodeProfile installs the single-node profile on a kubeadm-shaped node: its
// config (the standard chain on 10.88.0.0/16, held by one chain plugin) takes over from
// containerd's default, pods get its addresses and their host ports answer from
// outside, and cni install --uninstall leaves the node as it was found.
func TestSingleNodeProfile(t *testing.T) {
	lab := startLab(t, 1)
	n := lab.Nodes[0]
	found := snapshot(t, n)
	out, err := n.RunInstallStep(cluster.Profile("cni-single-node.yaml"), ours(t))
	require.NoError(t, err)
	assert.Contains(t, out, "write /host/etc/cni/net.d/10-cni.conflist")
	waitNetworkNamed(t, n, "cni", oursTypes)
	assertOursInstalled(t, n)
	base := warmUp(t, n)
	assertNoPods(t, n, base)

	pods := []*pod{newPod("single-port", 30090, ""), newPod("single-bw", 0, "10M")}
	for _, p := range pods {
		p.run(t, n)
		assert.True(t, netip.MustParsePrefix("10.88.0.0/16").Contains(p.ip), "%s: %s from the profile's range", p.Name, p.ip)
	}
	shaped(t, n, "10Mbit")
	assert.Equal(t, lab.Outside.Addr.String(), pods[0].hostPortFrom(t, lab.Outside.NetNS()), "the host port from outside")
	pods[0].reachFrom(t, pods[1])
	for _, p := range pods {
		p.stopAndRemove(t)
	}
	requireNothingLeft(t, n, base, pods, true)

	out, err = n.Uninstall()
	require.NoError(t, err, out)
	assert.Equal(t, found, snapshot(t, n), "the node's plugins and configs as found")
}

// TestPluginsOnlyProfile installs the plugins-only profile on a kubeadm-shaped node:
// every plugin name is ours and the node's config dir is untouched, so the network the
// node already had (containerd's default: bridge, host-local, portmap) runs on our
// plugins; cni install --uninstall puts the reference's back.
func TestPluginsOnlyProfile(t *testing.T) {
	lab := startLab(t, 1)
	n := lab.Nodes[0]
	found := snapshot(t, n)
	out, err := n.RunInstallStep(cluster.Profile("cni-plugins-only.yaml"), ours(t))
	require.NoError(t, err)
	assert.NotContains(t, out, "/etc/cni/net.d", "no config is written")
	assertOursInstalled(t, n)
	assert.Equal(t, found[1], snapshot(t, n)[1], "%s untouched", cluster.ConfDir)
	waitNetworkNamed(t, n, "containerd-net", []string{"bridge", "portmap"})

	p := newPod("plugins-only", 30091, "")
	p.run(t, n)
	assert.True(t, netip.MustParsePrefix("10.88.0.0/16").Contains(p.ip), "%s: %s from containerd's default network", p.Name, p.ip)
	// The runtime execs /opt/cni/bin/bridge and host-local: ours now, whose host-local
	// keeps an index beside the reference's files, naming the pod.
	index, err := os.ReadDir(n.Path(filepath.Join(cluster.StateDir, "networks", "containerd-net", ".cni-index")))
	require.NoError(t, err, "our host-local's index")
	require.Len(t, index, 1)
	assert.Contains(t, index[0].Name(), p.id)
	assert.Equal(t, lab.Outside.Addr.String(), p.hostPortFrom(t, lab.Outside.NetNS()), "the host port from outside")
	p.stopAndRemove(t)

	out, err = n.Uninstall()
	require.NoError(t, err, out)
	assert.Equal(t, found, snapshot(t, n), "the node's plugins and configs as found")
}
