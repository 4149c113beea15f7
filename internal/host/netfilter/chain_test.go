package netfilter_test

import (
	"fmt"
	"testing"

	"github.com/google/nftables"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cnikit/cni/internal/host/netfilter"
	"github.com/cnikit/cni/internal/host/nftexpr"
	"github.com/cnikit/cni/internal/testbed/foreigntables"
	"github.com/cnikit/cni/internal/testbed/nfttest"
	"github.com/cnikit/cni/internal/testbed/testns"
)

// TestChainsWithRulesReadsOnlyItsTable: the chains of one table are read from a rule
// dump the kernel narrows to it: beside a table of 2,000 chains with a rule each, only
// the table's own rules come back. A chain without rules is not listed.
func TestChainsWithRulesReadsOnlyItsTable(t *testing.T) {
	testns.RequireRoot(t)
	n := testns.New(t)
	foreigntables.KubeProxyNFT(t, n, 1000)
	nfttest.Apply(t, n, func(c *nftables.Conn) error {
		tbl := c.AddTable(&nftables.Table{Family: nftables.TableFamilyIPv4, Name: "ours"})
		for i, rules := range []int{2, 0, 1} {
			ch := c.AddChain(&nftables.Chain{Table: tbl, Name: fmt.Sprintf("c%d", i)})
			for range rules {
				c.AddRule(&nftables.Rule{Table: tbl, Chain: ch, Exprs: nftexpr.Return()})
			}
		}
		return nil
	})
	var (
		names    []string
		messages int
	)
	n.Run(t, func() (err error) {
		if names, err = netfilter.ChainsWithRules(nftables.TableFamilyIPv4, "ours"); err != nil {
			return err
		}
		messages, err = netfilter.RulesOfTable(nftables.TableFamilyIPv4, "ours")
		return err
	})
	assert.Equal(t, []string{"c0", "c2"}, names)
	assert.Equal(t, 3, messages, "the table's three rules, nothing of kube-proxy's")
	n.Run(t, func() (err error) {
		names, err = netfilter.ChainsWithRules(nftables.TableFamilyIPv6, "ours")
		return err
	})
	assert.Empty(t, names, "no such table in that family")
}

// TestLookupChainTellsAMissingChainFromAFailure: a chain or table that is not there is
// nil without an error; one that is comes back with its hook and policy.
func TestLookupChainTellsAMissingChainFromAFailure(t *testing.T) {
	testns.RequireRoot(t)
	n := testns.New(t)
	tbl := &nftables.Table{Family: nftables.TableFamilyIPv4, Name: "filter"}
	nfttest.Apply(t, n, func(c *nftables.Conn) error {
		c.AddTable(tbl)
		drop := nftables.ChainPolicyDrop
		c.AddChain(&nftables.Chain{Table: tbl, Name: "FORWARD", Type: nftables.ChainTypeFilter,
			Hooknum: nftables.ChainHookForward, Priority: nftables.ChainPriorityFilter, Policy: &drop})
		return nil
	})
	n.Run(t, func() error {
		c, err := nftables.New()
		require.NoError(t, err)
		ch, err := netfilter.LookupChain(c, tbl, "FORWARD")
		if assert.NoError(t, err) && assert.NotNil(t, ch) {
			assert.Equal(t, nftables.ChainPolicyDrop, *ch.Policy)
			assert.Equal(t, *nftables.ChainHookForward, *ch.Hooknum)
		}
		ch, err = netfilter.LookupChain(c, tbl, "INPUT")
		assert.NoError(t, err)
		assert.Nil(t, ch, "no such chain")
		ch, err = netfilter.LookupChain(c, &nftables.Table{Family: nftables.TableFamilyIPv6, Name: "filter"}, "FORWARD")
		assert.NoError(t, err)
		assert.Nil(t, ch, "no such table")
		return nil
	})
}
