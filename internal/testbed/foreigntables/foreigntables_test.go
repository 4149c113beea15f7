package foreigntables

import (
	"strings"
	"testing"

	"github.com/google/nftables"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cnikit/cni/internal/testbed/nfttest"
	"github.com/cnikit/cni/internal/testbed/testns"
)

// family is how nft names the families these tests use.
func family(f nftables.TableFamily) string {
	return map[nftables.TableFamily]string{nftables.TableFamilyIPv4: "ip", nftables.TableFamilyIPv6: "ip6", nftables.TableFamilyBridge: "bridge"}[f]
}

// chainsOf counts the namespace's chains per table ("ip kube-proxy": n).
func chainsOf(t *testing.T, n *testns.NS) map[string]int {
	t.Helper()
	out := map[string]int{}
	n.Run(t, func() error {
		c, err := nftables.New()
		if err != nil {
			return err
		}
		chains, err := c.ListChains()
		for _, ch := range chains {
			out[family(ch.Table.Family)+" "+ch.Table.Name]++
		}
		return err
	})
	return out
}

// TestKubeProxyTablesHoldWhatTheySay: the foreign tables the cost tests stand beside
// have the size and shape their comments give: two chains per Service, kube-proxy's
// base chains, kubelet's canaries, the jumps from the built-in chains.
func TestKubeProxyTablesHoldWhatTheySay(t *testing.T) {
	testns.RequireRoot(t)
	nft, ipt := testns.New(t), testns.New(t)
	KubeProxyNFT(t, nft, 1000)
	KubeProxyIPTables(t, ipt, 1000)

	got := chainsOf(t, nft)
	assert.Equal(t, 2*1000+3+5, got["ip kube-proxy"], "a service- and an endpoint- chain per Service, beside kube-proxy's own")
	for _, tbl := range []string{"ip mangle", "ip nat", "ip filter", "ip6 mangle", "ip6 nat", "ip6 filter"} {
		assert.Equal(t, 1, got[tbl], "kubelet's canary alone in %s", tbl)
	}
	rs := nfttest.Ruleset(t, nft)
	assert.Contains(t, rs, "chain service-000003E7-ns/svc-999/tcp/http")
	assert.Contains(t, rs, "goto endpoint-000003E7-ns/svc-999/tcp/http__10.244.3.231/8080")

	got = chainsOf(t, ipt)
	assert.Equal(t, 2*1000+3+3, got["ip nat"], "a KUBE-SVC- and a KUBE-SEP- chain per Service, beside the built-in and kube-proxy's own")
	rs = nfttest.Ruleset(t, ipt)
	_, forward, ok := strings.Cut(rs, "chain FORWARD ")
	require.True(t, ok, "table ip filter has its FORWARD")
	forward, _, _ = strings.Cut(forward, "  chain ")
	assert.Contains(t, forward, "jump KUBE-FORWARD", "rules of the host's in a built-in chain")
	assert.Equal(t, 1000, strings.Count(rs, "jump KUBE-SVC-"), "one jump per Service in KUBE-SERVICES")
}

// TestTableHoldsItsChains: as many chains as asked, a rule in each.
func TestTableHoldsItsChains(t *testing.T) {
	testns.RequireRoot(t)
	n := testns.New(t)
	Table(t, n, nftables.TableFamilyBridge, "theirs", 300)
	assert.Equal(t, map[string]int{"bridge theirs": 300}, chainsOf(t, n))
	assert.Equal(t, 300, strings.Count(nfttest.Ruleset(t, n), "\treturn"))
}
