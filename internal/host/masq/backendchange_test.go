package masq

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cnikit/cni/internal/host/netfilter"
	"github.com/cnikit/cni/internal/testbed/testns"
)

// TestCheckFindsTheNFTablesMasqueradeOnceTheNodeTurnedToIPTables: on a node without
// rules of its own the backend rule picks nftables, and an attachment's masquerade goes
// there. When the host later keeps rules of its own in iptables (Docker, or kube-proxy
// in iptables mode, starting after the first pods), the rule picks iptables for the
// CHECK of that same attachment, which must find its nftables state instead of failing
// on an iptables chain it never had (it failed with code 999, "iptables chain CNI-...
// missing", for every pod up before the change). Damage to that nftables state is still
// reported.
func TestCheckFindsTheNFTablesMasqueradeOnceTheNodeTurnedToIPTables(t *testing.T) {
	testns.RequireFirewallBinaries(t, "the host's own rule is made with iptables")
	w := newWorld(t)
	opts := Options{IPv4: true, IPv6: true} // no backend: the node's rule decides
	var chosen netfilter.Backend
	w.do(t, func(ctx context.Context) error {
		chosen = netfilter.Detect()
		return Setup(ctx, w.att, opts)
	})
	require.Equal(t, netfilter.NFTables, chosen, "a node without rules of its own is an nftables node")
	t.Cleanup(func() { w.do(t, func(ctx context.Context) error { return Teardown(ctx, "net1", "c1", "eth0") }) })

	for _, args := range [][]string{{"-N", "DOCKER-USER"}, {"-A", "FORWARD", "-j", "DOCKER-USER"}} {
		out, err := w.host.Exec(t, "iptables", append([]string{"-t", "filter"}, args...)...)
		require.NoError(t, err, out)
	}
	w.do(t, func(ctx context.Context) error {
		chosen = netfilter.Detect()
		return nil
	})
	require.Equal(t, netfilter.IPTables, chosen, "the host's own FORWARD rule makes it an iptables node")

	w.do(t, func(ctx context.Context) error { return Check(ctx, w.att, opts) })
	assert.Equal(t, host4, w.peer(t, ext4), "the attachment is still masqueraded")

	out, err := w.host.Exec(t, "nft", "delete", "element", "inet", nftTableName, nftMap4, "{ 10.1.0.5 }")
	require.NoError(t, err, out)
	w.do(t, func(ctx context.Context) error {
		assert.ErrorContains(t, Check(ctx, w.att, opts), "10.1.0.5 not in nftables map")
		return nil
	})
}
