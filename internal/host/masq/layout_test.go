package masq

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cnikit/cni/internal/host/netfilter"
	"github.com/cnikit/cni/internal/testbed/nfttest"
)

// TestNFTablesLayoutReadsAsTheCodeSays: `nft list` shows each rule as the comment of the
// helper that builds it says, so the code and the ruleset read side by side.
func TestNFTablesLayoutReadsAsTheCodeSays(t *testing.T) {
	w := newWorld(t)
	w.do(t, func(ctx context.Context) error {
		return Setup(ctx, w.att, Options{Backend: netfilter.NFTables, IPv4: true, IPv6: true})
	})
	for chain, want := range map[string][]string{
		nftBaseChain: {"type nat hook postrouting priority srcnat; policy accept;",
			"ip daddr 224.0.0.0/4 return", "ip saddr vmap @masq4", "ip6 daddr ff00::/8 return", "ip6 saddr vmap @masq6"},
		nftChainName("net1", "c1", "eth0"): {"ip daddr 10.1.0.0/24 return", "ip6 daddr fd01::/64 return",
			`masquerade comment "ips=10.1.0.5,fd01::5 net=net1 id=c1 if=eth0"`},
	} {
		out, err := w.host.Exec(t, "nft", "list", "chain", "inet", nftTableName, chain)
		require.NoError(t, err, out)
		assert.Equal(t, want, nfttest.ListedRules(out), chain)
	}
}
