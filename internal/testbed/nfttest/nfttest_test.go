package nfttest

import (
	"net/netip"
	"testing"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
	"github.com/google/nftables/userdata"
	"github.com/stretchr/testify/assert"

	"github.com/cnikit/cni/internal/host/nftexpr"
	"github.com/cnikit/cni/internal/testbed/testns"
)

// TestRulesetSpellsWhatTheRulesHold: the addresses, ports, names, jumps and comments of
// rules and elements all appear in the text, and two reads of one ruleset are equal.
func TestRulesetSpellsWhatTheRulesHold(t *testing.T) {
	testns.RequireRoot(t)
	host := testns.New(t)
	Apply(t, host, func(c *nftables.Conn) error {
		tbl := c.AddTable(&nftables.Table{Family: nftables.TableFamilyIPv4, Name: "t"})
		target := c.AddChain(&nftables.Chain{Table: tbl, Name: "target"})
		ch := c.AddChain(&nftables.Chain{Table: tbl, Name: "base", Type: nftables.ChainTypeNAT,
			Hooknum: nftables.ChainHookPrerouting, Priority: nftables.ChainPriorityNATDest})
		ports := &nftables.Set{Table: tbl, ID: 1, Name: "ports", IsMap: true, Concatenation: true, DataType: nftables.TypeVerdict,
			KeyType: nftables.MustConcatSetType(nftables.TypeInetProto, nftables.TypeIPAddr, nftables.TypeInetService)}
		if err := c.AddSet(ports, []nftables.SetElement{{
			Key:         nftexpr.Key([]byte{6}, netip.MustParseAddr("10.9.0.1").AsSlice(), nftexpr.Port(8443)),
			VerdictData: nftexpr.JumpTo(target.Name),
		}}); err != nil {
			return err
		}
		names := &nftables.Set{Table: tbl, ID: 2, Name: "names", KeyType: nftables.TypeIFName}
		if err := c.AddSet(names, []nftables.SetElement{{Key: nftexpr.IfName("br-x"), Comment: "a bridge"}}); err != nil {
			return err
		}
		c.AddRule(&nftables.Rule{Table: tbl, Chain: ch, UserData: userdata.AppendString(nil, userdata.TypeComment, "id=ctr-1"),
			Exprs: nftexpr.Rule(nftexpr.IIFNameIs("veth-a"), nftexpr.ProtoDPortIs(6, 8080),
				nftexpr.DNAT(netip.MustParseAddrPort("10.1.0.5:80")))})
		c.AddRule(&nftables.Rule{Table: tbl, Chain: ch, Exprs: nftexpr.Rule(nftexpr.SaddrIn(netip.MustParsePrefix("10.2.0.0/16")), []expr.Any{&expr.Verdict{Kind: expr.VerdictGoto, Chain: "target"}})})
		return nil
	})
	text := Ruleset(t, host)
	for _, want := range []string{
		"table ip t", "chain base", "chain target", "set ports", "set names",
		"element tcp . 10.9.0.1 . 8443 : target", `element "br-x" comment "a bridge"`,
		`iifname "veth-a"`, "dport 8080", "10.1.0.5", "80", `comment "id=ctr-1"`, "ip saddr & 255.255.0.0 10.2.0.0 goto target",
	} {
		assert.Contains(t, text, want)
	}
	assert.Equal(t, text, Ruleset(t, host), "the same ruleset reads the same")
	assert.Empty(t, Ruleset(t, testns.New(t)), "an empty namespace has no ruleset")
}
