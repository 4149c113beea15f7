package masq

import (
	"context"
	"net/netip"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cnikit/cni/internal/host/netfilter"
	"github.com/cnikit/cni/internal/spec/skel"
	"github.com/cnikit/cni/internal/testbed/testns"
)

// TestIPTablesReadsOnlyItsOwnChainsBesideKubeProxysRules runs, with each iptables
// flavour, on a host whose nat table holds kube-proxy's rules for 200 Services (its
// POSTROUTING jump first), Setup, Check, a repeated Setup, GC of a stale attachment and
// Teardown: none runs iptables-save, none lists or asks about a chain but the
// attachments' own and POSTROUTING, and Setup and Check never list POSTROUTING (they
// ask it about their jumps). The masquerade works beside kube-proxy's rules, and what
// GC and Teardown leave is kube-proxy's table as it was.
func TestIPTablesReadsOnlyItsOwnChainsBesideKubeProxysRules(t *testing.T) {
	testns.RequireRoot(t)
	for _, fl := range testns.IPTablesFlavours(t) {
		t.Run(fl.Name, func(t *testing.T) {
			w := newWorld(t)
			testns.LoadKubeProxyRules(t, w.host, fl.Tool("iptables-restore"), 200)
			listing := func() string {
				out, err := w.host.Exec(t, fl.Tool("iptables"), "-t", "nat", "-S")
				require.NoError(t, err, out)
				return out
			}
			kube := listing()
			log := testns.LogIPTables(t, fl.Dir)
			opts := Options{Backend: netfilter.IPTables, IPv4: true, IPv6: true}
			stale := Attachment{Network: "net1", ContainerID: "gone", IfName: "eth0",
				IPs: []netip.Prefix{netip.MustParsePrefix("10.1.0.9/24"), netip.MustParsePrefix("fd01::9/64")}}
			ours := map[string]bool{iptChainName("net1", "c1"): true, iptChainName("net1", "gone"): true}
			own := func(table, op, chain string) bool {
				return table == "nat" && (ours[chain] || chain == "POSTROUTING" && op == "-C")
			}
			ownOrPostrouting := func(table, _, chain string) bool { return table == "nat" && (ours[chain] || chain == "POSTROUTING") }

			w.do(t, func(ctx context.Context) error { return Setup(ctx, w.att, opts) })
			runs := log.RequireOwnReads(t, "Setup", own)
			assert.NotEmpty(t, runs, "the log sees the tools run")
			assert.Equal(t, host4, w.peer(t, ext4), "masqueraded beside kube-proxy's rules")
			assert.Equal(t, host6, w.peer(t, ext6))
			w.do(t, func(ctx context.Context) error { return Check(ctx, w.att, opts) })
			log.RequireOwnReads(t, "Check", own)
			w.do(t, func(ctx context.Context) error { return Setup(ctx, w.att, opts) })
			log.RequireOwnReads(t, "a repeated Setup", own)
			w.do(t, func(ctx context.Context) error { return Setup(ctx, stale, opts) })
			log.RequireOwnReads(t, "Setup of another", own)

			w.do(t, func(ctx context.Context) error {
				return GC(ctx, "net1", valid(skel.Attachment{ContainerID: "c1", IfName: "eth0"}))
			})
			log.RequireOwnReads(t, "GC", ownOrPostrouting)
			assert.NotContains(t, listing(), iptChainName("net1", "gone"))
			w.do(t, func(ctx context.Context) error { return Check(ctx, w.att, opts) })
			log.RequireOwnReads(t, "Check after GC", own)

			w.do(t, func(ctx context.Context) error { return Teardown(ctx, "net1", "c1", "eth0") })
			log.RequireOwnReads(t, "Teardown", ownOrPostrouting)
			assert.Equal(t, kube, listing(), "kube-proxy's table as it was")
			assert.Equal(t, ctr4.Addr(), w.peer(t, ext4))
		})
	}
}
