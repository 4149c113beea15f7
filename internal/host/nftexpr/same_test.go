package nftexpr

import (
	"fmt"
	"testing"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
	"github.com/stretchr/testify/assert"

	"github.com/cnikit/cni/internal/testbed/testns"
)

// TestSameMatchesEveryBuilderAsTheKernelListsIt: every helper's rule, installed and
// read back over netlink, is Same as the expressions it was built from, and as no
// other helper's rule of its family. Each rule has a chain of its own, since
// google/nftables fails a whole dump on an expression it cannot read (ct's direction).
func TestSameMatchesEveryBuilderAsTheKernelListsIt(t *testing.T) {
	testns.RequireRoot(t)
	host := testns.New(t)
	tables := familyTables()
	sets := testSets(tables)
	rules := rulesByFamily(sets)
	chain := func(fam nftables.TableFamily, i int) *nftables.Chain {
		return &nftables.Chain{Name: fmt.Sprintf("c%d", i), Table: tables[fam]}
	}
	read := map[nftables.TableFamily][][]expr.Any{}
	host.Run(t, func() error {
		c, err := nftables.New()
		if err != nil {
			return err
		}
		if err := addRules(c, tables, sets, rules, chain); err != nil {
			return err
		}
		if err := c.Flush(); err != nil {
			return err
		}
		for fam, rs := range rules {
			read[fam] = make([][]expr.Any, len(rs))
			for i, r := range rs {
				got, err := c.GetRules(tables[fam], chain(fam, i))
				if err != nil {
					t.Logf("%s %q: not readable by google/nftables: %v", familyNames[fam], r.nft, err)
					continue
				}
				if len(got) != 1 {
					return fmt.Errorf("%s %q: %d rules listed", familyNames[fam], r.nft, len(got))
				}
				read[fam][i] = got[0].Exprs
			}
		}
		return nil
	})
	for fam, rs := range rules {
		for i, r := range rs {
			if read[fam][i] == nil {
				continue
			}
			for j, other := range rs {
				assert.Equal(t, i == j, Same(byte(fam), read[fam][i], other.exprs),
					"%s: the kernel's %q against the builders' %q", familyNames[fam], r.nft, other.nft)
			}
		}
	}
}

// TestWithoutRegistersLeavesTheRuleAlone: the registers are zeroed in a copy (copyWith),
// never in the caller's expression, and the other fields are kept.
func TestWithoutRegistersLeavesTheRuleAlone(t *testing.T) {
	lookup := &expr.Lookup{SourceRegister: 1, DestRegister: 2, SetID: 7, SetName: "ports", IsDestRegSet: true}
	got := withoutRegisters(lookup)
	assert.Equal(t, &expr.Lookup{SetName: "ports", IsDestRegSet: true}, got)
	assert.Equal(t, &expr.Lookup{SourceRegister: 1, DestRegister: 2, SetID: 7, SetName: "ports", IsDestRegSet: true}, lookup)
	nat := &expr.NAT{Type: expr.NATTypeDestNAT, RegAddrMin: 1, RegAddrMax: 2, RegProtoMin: 3, RegProtoMax: 4}
	assert.Equal(t, &expr.NAT{Type: expr.NATTypeDestNAT}, withoutRegisters(nat))
	assert.Equal(t, uint32(3), nat.RegProtoMin)
	other := &expr.Counter{Packets: 1}
	assert.Same(t, other, withoutRegisters(other), "an expression without registers is itself")
}
