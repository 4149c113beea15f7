package masq

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cnikit/cni/internal/host/netfilter"
)

// TestCheckAcceptsTheReferencePluginsIPTablesMasquerade is a node upgraded from the
// reference plugins, which chose iptables where we choose nftables: CHECK finds none
// of our nftables state and passes on the reference's intact iptables chain and jumps,
// and fails once a jump is gone.
func TestCheckAcceptsTheReferencePluginsIPTablesMasquerade(t *testing.T) {
	w := newWorld(t)
	referenceIPTables(t, w, "", "")
	opts := Options{Backend: netfilter.NFTables, IPv4: true, IPv6: true}
	w.do(t, func(ctx context.Context) error { return Check(ctx, w.att, opts) })

	chain := iptChainName("net1", "c1")
	out, err := w.host.Exec(t, "ip6tables", "-t", "nat", "-D", "POSTROUTING", "-s", "fd01::5", "-m", "comment",
		"--comment", `name: "net1" id: "c1"`, "-j", chain)
	require.NoError(t, err, out)
	w.do(t, func(ctx context.Context) error {
		err := Check(ctx, w.att, opts)
		assert.ErrorContains(t, err, "ip6tables POSTROUTING lacks")
		return nil
	})
}

// TestCheckAcceptsTheReferencePluginsNftablesMasquerade: with ipMasqBackend nftables the
// reference wrote its own table; CHECK passes on it (whichever backend we chose) while
// it is intact, and fails when an address's rule or the base chain's jump is gone.
func TestCheckAcceptsTheReferencePluginsNftablesMasquerade(t *testing.T) {
	w := newWorld(t)
	referenceNFTables(t, w, [2]string{"c1", ctr4.String()}, [2]string{"c1", ctr6.String()})
	assert.Equal(t, host4, w.peer(t, ext4), "the reference rules work")
	for _, b := range backends {
		w.do(t, func(ctx context.Context) error { return Check(ctx, w.att, Options{Backend: b, IPv4: true, IPv6: true}) })
	}
	opts := Options{Backend: netfilter.NFTables, IPv4: true, IPv6: true}
	other := w.att
	other.ContainerID = "c2"
	w.do(t, func(ctx context.Context) error {
		assert.ErrorContains(t, Check(ctx, other, opts), "missing", "another container's rules are not this one's")
		return nil
	})

	out, err := w.host.Exec(t, "nft", "flush", "chain", "inet", "cni_plugins_masquerade", "postrouting")
	require.NoError(t, err, out)
	w.do(t, func(ctx context.Context) error {
		assert.ErrorContains(t, Check(ctx, w.att, opts), "postrouting does not go to masq_checks")
		return nil
	})

	w.do(t, func(ctx context.Context) error { return Teardown(ctx, "net1", "c1", "eth0") })
	referenceNFTables(t, w, [2]string{"c1", ctr4.String()})
	w.do(t, func(ctx context.Context) error {
		assert.ErrorContains(t, Check(ctx, w.att, opts), "does not masquerade fd01::5")
		return nil
	})
}
