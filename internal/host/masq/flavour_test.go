package masq

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cnikit/cni/internal/host/netfilter"
	"github.com/cnikit/cni/internal/testbed/testns"
)

// TestIPTablesLayoutHoldsWithEitherFlavour runs the iptables backend with the tools of
// iptables-nft and of iptables-legacy in turn (first in PATH, as on a node that uses
// either): Setup masquerades, Check passes, a repeated Setup changes nothing, and
// Teardown leaves nothing of the attachment. (Both flavours print these one-match rules
// as we write them; rules they print otherwise are tested in package iptables, portmap
// and firewall.) Not parallel: PATH is the process's.
func TestIPTablesLayoutHoldsWithEitherFlavour(t *testing.T) {
	testns.RequireRoot(t)
	for _, fl := range testns.IPTablesFlavours(t) {
		t.Run(fl.Name, func(t *testing.T) {
			t.Setenv("PATH", fl.PATH())
			w := newWorld(t)
			opts := Options{Backend: netfilter.IPTables, IPv4: true, IPv6: true}
			save := func() string { return fl.Rules(t, w.host, "nat") }
			w.do(t, func(ctx context.Context) error { return Setup(ctx, w.att, opts) })
			assert.Equal(t, host4, w.peer(t, ext4))
			assert.Equal(t, host6, w.peer(t, ext6))
			w.do(t, func(ctx context.Context) error { return Check(ctx, w.att, opts) })
			before := save()
			require.Contains(t, before, iptChainName("net1", "c1"))
			w.do(t, func(ctx context.Context) error { return Setup(ctx, w.att, opts) })
			assert.Equal(t, before, save(), "a repeated Setup changes nothing")

			w.do(t, func(ctx context.Context) error { return Teardown(ctx, "net1", "c1", "eth0") })
			after := save()
			for _, gone := range []string{iptChainName("net1", "c1"), "10.1.0.5", "fd01::5", `id: \"c1\"`} {
				assert.NotContains(t, after, gone)
			}
			assert.Equal(t, ctr4.Addr(), w.peer(t, ext4))
		})
	}
}
