package netfilter

import (
	"testing"

	"github.com/google/nftables"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cnikit/cni/internal/testbed/testns"
)

// forwardChain adds a base chain at the forward hook with policy p to a table of family
// f, in the namespace.
func forwardChain(t *testing.T, ns *testns.NS, f nftables.TableFamily, table, chain string, p nftables.ChainPolicy) {
	t.Helper()
	nfttestApply(t, ns, func(c *nftables.Conn) {
		tbl := c.AddTable(&nftables.Table{Family: f, Name: table})
		c.AddChain(&nftables.Chain{Table: tbl, Name: chain, Type: nftables.ChainTypeFilter,
			Hooknum: nftables.ChainHookForward, Priority: nftables.ChainPriorityFilter, Policy: &p})
	})
}

// forwardDropIn runs ForwardDrop in the namespace.
func forwardDropIn(t *testing.T, ns *testns.NS, v4, v6 bool, own Backend) (drop string) {
	t.Helper()
	ns.Run(t, func() (err error) { drop, err = ForwardDrop(v4, v6, own); return err })
	return drop
}

// TestForwardDropNamesTheHostsDroppingForwardChains: iptables' FORWARD of ip filter
// dropping by policy (Docker's) drops an nftables attachment's traffic, not an
// iptables one's, whose accepts sit in that chain; a table's chain "forward" dropping
// by policy drops both; a chain of the other family, a policy of accept, and the
// plugins' own tables do not count.
func TestForwardDropNamesTheHostsDroppingForwardChains(t *testing.T) {
	testns.RequireRoot(t)
	host := testns.New(t)
	forwardChain(t, host, nftables.TableFamilyINet, "cni_firewall", "forward", nftables.ChainPolicyDrop)
	forwardChain(t, host, nftables.TableFamilyINet, "filter", "forward", nftables.ChainPolicyAccept)
	forwardChain(t, host, nftables.TableFamilyIPv6, "filter", "FORWARD", nftables.ChainPolicyDrop)
	assert.Empty(t, forwardDropIn(t, host, true, false, NFTables), "ours, an accept, another family")
	assert.Equal(t, "chain FORWARD of table ip6 filter (hook forward) drops by policy", forwardDropIn(t, host, false, true, NFTables))

	forwardChain(t, host, nftables.TableFamilyIPv4, "filter", "FORWARD", nftables.ChainPolicyDrop)
	assert.Equal(t, "chain FORWARD of table ip filter (hook forward) drops by policy", forwardDropIn(t, host, true, false, NFTables))
	assert.Empty(t, forwardDropIn(t, host, true, false, IPTables), "the iptables attachment's accepts are in that chain")

	forwardChain(t, host, nftables.TableFamilyINet, "host", "forward", nftables.ChainPolicyDrop)
	require.Equal(t, "chain forward of table inet host (hook forward) drops by policy", forwardDropIn(t, host, true, false, IPTables))
}

func TestFamilyNameIsNftsNameOfEachFamily(t *testing.T) {
	for f, want := range map[nftables.TableFamily]string{
		nftables.TableFamilyIPv4: "ip", nftables.TableFamilyIPv6: "ip6", nftables.TableFamilyINet: "inet",
		nftables.TableFamilyBridge: "bridge", nftables.TableFamilyARP: "arp", nftables.TableFamilyNetdev: "netdev",
		nftables.TableFamilyUnspecified: "0", 4: "4", 200: "200",
	} {
		assert.Equal(t, want, FamilyName(f), "family %d", f)
	}
}
