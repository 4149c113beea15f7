//go:build crio

package crioe2e

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cnikit/cni/tools/crinode"
	"github.com/cnikit/cni/tools/crinode/podtest"
)

// portmapMarks are what a portmap plugin, ours or the reference's, leaves in the
// firewall when it maps a port: our nftables table, the reference's nftables table, the
// reference's iptables chains.
var portmapMarks = []string{"cni_portmap", "cni_hostport", "CNI-HOSTPORT", "CNI-DN-"}

// checked is what CRI-O logs once CheckNetworkList has returned, only where the list's
// version has CHECK (ocicni; below 0.4.0 it logs another line); an error there would
// fail RunPodSandbox.
const checked = `msg="Checking CNI network std (config version=1.1.0)"`

// TestPodsCheckedAfterAddWithHostPortsMappedByCRIO: on each side, pods with host ports,
// bandwidth annotations and none come up through CRI-O, which CHECKs every pod right
// after its ADD (a false CHECK failure would fail RunPodSandbox); CRI-O maps the host
// ports itself while portmap is in the list (it gets no portMappings: no second
// mapping of ours), the pods reach each other and are reached through their host
// ports, and after Stop+Remove nothing is left.
func TestPodsCheckedAfterAddWithHostPortsMappedByCRIO(t *testing.T) {
	for _, side := range sides {
		t.Run(side.name, func(t *testing.T) {
			n := startCRIO(t, side, crioList, nil)
			peer, base := withPeer(t, n)

			pods := []*podtest.Pod{newPod("web", 8080, ""), newPod("bw-1m", 8081, "1M"), newPod("bw-15m", 8082, "15M"), newPod("plain", 0, "")}
			for _, p := range pods {
				checks := strings.Count(n.Log(), checked)
				p.Run(t, n)
				assert.Equal(t, checks+1, strings.Count(n.Log(), checked), "CRI-O CHECKed %s after its ADD", p.Name)
			}
			hostports, err := n.Run("nft", "list", "table", "ip", "crio-hostports")
			require.NoError(t, err)
			up, err := n.State()
			require.NoError(t, err)
			for _, p := range pods {
				if len(p.Ports) == 0 {
					continue
				}
				p.Reach(t, peer)
				assert.Contains(t, hostports, fmt.Sprintf("tcp . %d ", p.Ports[0].HostPort), "CRI-O maps %s's host port", p.Name)
			}
			for _, mark := range portmapMarks {
				assert.NotContains(t, up.Rules, mark, "portmap maps nothing: CRI-O gave it no portMappings")
			}
			// Pod to pod over the bridge: plain reaches web's server.
			plain, err := n.CRI.Status(pods[3].ID)
			require.NoError(t, err)
			ns, err := n.PodNetNS(plain)
			require.NoError(t, err)
			got, err := crinode.DialTCP(ns, pods[0].IP(t, n)+":80", 5*time.Second)
			require.NoError(t, err, "plain reaches web")
			assert.Equal(t, "web\n", got)
			// CRI-O asks for a burst of MaxUint32*8-1 bits (kubelet's MaxUint32 bytes in
			// bits), more than a tbf at 1 Mbit/s holds: ours clamps it and says so on
			// stderr, which CRI-O logs.
			if side.flag != "" {
				assert.Contains(t, n.Log(), "runtimeConfig.bandwidth.ingressBurst: 34359738359 bits clamped to 274877896 bits")
			}
			qdiscs, err := n.Qdiscs()
			require.NoError(t, err)
			for _, rate := range []string{"1Mbit", "15Mbit"} {
				assert.Equal(t, 2, strings.Count(qdiscs, "rate "+rate+" "), "shaped at %s (a tbf on the veth, one on the ifb):\n%s", rate, qdiscs)
			}
			// What requireNothingLeft looks for is there while the pods are up.
			assert.Len(t, up.Netns, len(pods), "netns files")
			assert.Len(t, up.Reservations, len(pods), "IP reservations")
			assert.Len(t, up.Cache, len(pods), "cache entries: CRI-O runs no loopback network")
			assert.Len(t, up.Qdiscs, 2*3, "per shaped pod: a tbf and an ingress qdisc on its veth, a tbf on its ifb")

			for _, p := range pods {
				p.StopAndRemove(t, n)
			}
			requireNothingLeft(t, n, base)
		})
	}
}

// withPeer gives the node a peer namespace on its network and takes its baseline: the
// state after one pod with a host port and a bandwidth limit has come and gone.
func withPeer(t *testing.T, n *crinode.Node) (*crinode.Peer, crinode.State) {
	t.Helper()
	return podtest.WithPeer(t, n, podNamespace)
}

// requireNothingLeft compares the node's state with the baseline, and checks that
// CRI-O logged no error.
func requireNothingLeft(t *testing.T, n *crinode.Node, base crinode.State) {
	t.Helper()
	podtest.RequireNothingLeft(t, n, base)
	assert.False(t, strings.Contains(n.Log(), "level=error"), "CRI-O logged no error")
}
