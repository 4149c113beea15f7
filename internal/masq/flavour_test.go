package masq

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cnikit/cni/internal/netfilter"
	"github.com/cnikit/cni/internal/testns"
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
			save := func() string {
				var b strings.Builder
				for _, tool := range []string{"iptables-save", "ip6tables-save"} {
					out, err := w.host.Exec(t, fl.Tool(tool), "-t", "nat")
					require.NoError(t, err, out)
					b.WriteString(savedRules(out))
				}
				return b.String()
			}
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

// savedRules is iptables-save output without what changes by itself: the "# Generated
// on <time>" lines and the packet counters of the chain lines.
func savedRules(save string) string {
	var b strings.Builder
	for _, line := range strings.SplitAfter(save, "\n") {
		switch {
		case strings.HasPrefix(line, "#"):
		case strings.HasPrefix(line, ":"):
			chain, _, _ := strings.Cut(line, " [")
			b.WriteString(chain + "\n")
		default:
			b.WriteString(line)
		}
	}
	return b.String()
}
