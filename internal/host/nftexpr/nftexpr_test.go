package nftexpr

import (
	"net"
	"net/netip"
	"testing"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cnikit/cni/internal/testbed/nfttest"
	"github.com/cnikit/cni/internal/testbed/testns"
)

// listed is one rule made by the helpers and the line `nft list` prints for it.
type listed struct {
	exprs []expr.Any
	nft   string
}

var (
	pfx  = netip.MustParsePrefix
	mac  = net.HardwareAddr{0x02, 0, 0, 0, 0, 0x01}
	ipv4 = nftables.TableFamilyIPv4
	ipv6 = nftables.TableFamilyIPv6
)

// rulesByFamily are the rules the helpers make, per table family, each with the line
// nft lists for it: what a reader of the plugins' code and of `nft list ruleset` sees.
func rulesByFamily(sets map[string]*nftables.Set) map[nftables.TableFamily][]listed {
	return map[nftables.TableFamily][]listed{
		ipv4: {
			{L4ProtoIs(6), "meta l4proto tcp"},
			{DPortIs(8080), "th dport 8080"},
			{Rule(L4ProtoIs(17), DPortIs(53)), "udp dport 53"},
			{ProtoDPortIs(132, 9000), "sctp dport 9000"},
			{SaddrIn(pfx("10.1.0.0/24")), "ip saddr 10.1.0.0/24"},
			{DaddrIn(pfx("10.1.0.5/32")), "ip daddr 10.1.0.5"},
			{NotIn(Daddr(false), pfx("224.0.0.0/4")), "ip daddr != 224.0.0.0/4"},
			{IIFNameIs("veth0"), `iifname "veth0"`},
			{Is(IIFName, IfName("veth*")), `iifname "veth*"`},
			{IsNot(OIFName, IfName("eth0")), `oifname != "eth0"`},
			{MarkIs(0x2000), "meta mark 0x00002000"},
			{Compare(Mark, expr.CmpOpNeq, HostOrder(0x10)), "meta mark != 0x00000010"},
			{Compare(IIFName, expr.CmpOpEq, IfName("eth1")), `iifname "eth1"`},
			{InPrefix(Saddr(false), pfx("10.2.0.0/16"), expr.CmpOpNeq), "ip saddr != 10.2.0.0/16"},
			{InPrefix(Daddr(false), pfx("10.3.0.0/16"), expr.CmpOpEq), "ip daddr 10.3.0.0/16"},
			{CtStatusDNAT(), "ct status dnat"},
			{Rule(L4ProtoIs(6), CtOriginalProtoDstIs(8080), Masquerade()), "meta l4proto tcp ct original proto-dst 8080 masquerade"},
			{Rule(FibDaddrTypeLocal(), Jump("target")), "fib daddr type local jump target"},
			{VMap(sets["ipv4 hostip_ports"], L4Proto, Daddr(false), THDport), "meta l4proto . ip daddr . th dport vmap @hostip_ports"},
			{VMap(sets["ipv4 ports"], L4Proto, THDport), "meta l4proto . th dport vmap @ports"},
			{Rule(CtStatusDNAT(), VMap(sets["ipv4 masq"], Daddr(false))), "ct status dnat ip daddr vmap @masq"},
			{Rule(ProtoDPortIs(6, 8080), DNAT(netip.MustParseAddrPort("10.1.0.5:80"))), "tcp dport 8080 dnat to 10.1.0.5:80"},
			{Rule(SaddrIn(pfx("127.0.0.0/8")), Masquerade()), "ip saddr 127.0.0.0/8 masquerade"},
			{Goto("target"), "goto target"},
			{Return(), "return"},
			{Drop(), "drop"},
		},
		ipv6: {
			{SaddrIn(pfx("fd00::/64")), "ip6 saddr fd00::/64"},
			{DaddrIn(pfx("fd00::5/128")), "ip6 daddr fd00::5"},
			{VMap(sets["ipv6 hostip_ports"], L4Proto, Daddr(true), THDport), "meta l4proto . ip6 daddr . th dport vmap @hostip_ports"},
			{Rule(ProtoDPortIs(17, 53), DaddrIn(pfx("fd00::1/128")), DNAT(netip.MustParseAddrPort("[fd00::5]:53"))),
				"udp dport 53 ip6 daddr fd00::1 dnat to [fd00::5]:53"},
		},
		nftables.TableFamilyINet: {
			{Rule(NFProtoIs(false), In(Daddr(false), pfx("224.0.0.0/4")), Return()), "ip daddr 224.0.0.0/4 return"},
			{Rule(NFProtoIs(true), VMap(sets["inet masq6"], Saddr(true))), "ip6 saddr vmap @masq6"},
			{NFProtoIs(true), "meta nfproto ipv6"},
			{Rule(NFProtoIs(false), In(Daddr(false), pfx("10.1.0.5/32")), CtStateEstablishedRelated(), Accept()),
				"ip daddr 10.1.0.5 ct state established,related accept"},
			{Rule(InSet(sets["inet policed"], IIFName), InSet(sets["inet policed"], OIFName), Drop()), "iifname @policed oifname @policed drop"},
			{VMap(sets["inet same"], IIFName, OIFName), "iifname . oifname vmap @same"},
			{Rule(InSet(sets["inet pairs"], IIFName, OIFName), Accept()), "iifname . oifname @pairs accept"},
		},
		nftables.TableFamilyBridge: {
			{Rule(EtherSaddrIs(mac), Return()), "ether saddr 02:00:00:00:00:01 return"},
			{Rule(IIFNameIs("veth0"), Jump("target")), `iifname "veth0" jump target`},
		},
	}
}

// testSets are the maps the lookups name, per family.
func testSets(tables map[nftables.TableFamily]*nftables.Table) map[string]*nftables.Set {
	v := nftables.TypeVerdict
	return map[string]*nftables.Set{
		"ipv4 hostip_ports": {Table: tables[ipv4], ID: 1, Name: "hostip_ports", IsMap: true, Concatenation: true, DataType: v,
			KeyType: nftables.MustConcatSetType(nftables.TypeInetProto, nftables.TypeIPAddr, nftables.TypeInetService)},
		"ipv4 ports": {Table: tables[ipv4], ID: 2, Name: "ports", IsMap: true, Concatenation: true, DataType: v,
			KeyType: nftables.MustConcatSetType(nftables.TypeInetProto, nftables.TypeInetService)},
		"ipv4 masq": {Table: tables[ipv4], ID: 3, Name: "masq", IsMap: true, KeyType: nftables.TypeIPAddr, DataType: v},
		"ipv6 hostip_ports": {Table: tables[ipv6], ID: 4, Name: "hostip_ports", IsMap: true, Concatenation: true, DataType: v,
			KeyType: nftables.MustConcatSetType(nftables.TypeInetProto, nftables.TypeIP6Addr, nftables.TypeInetService)},
		"inet masq6":   {Table: tables[nftables.TableFamilyINet], ID: 5, Name: "masq6", IsMap: true, KeyType: nftables.TypeIP6Addr, DataType: v},
		"inet policed": {Table: tables[nftables.TableFamilyINet], ID: 6, Name: "policed", KeyType: nftables.TypeIFName},
		"inet same": {Table: tables[nftables.TableFamilyINet], ID: 7, Name: "same", IsMap: true, Concatenation: true, DataType: v,
			KeyType: nftables.MustConcatSetType(nftables.TypeIFName, nftables.TypeIFName)},
		"inet pairs": {Table: tables[nftables.TableFamilyINet], ID: 8, Name: "pairs", Concatenation: true,
			KeyType: nftables.MustConcatSetType(nftables.TypeIFName, nftables.TypeIFName)},
	}
}

var familyNames = map[nftables.TableFamily]string{ipv4: "ip", ipv6: "ip6", nftables.TableFamilyINet: "inet", nftables.TableFamilyBridge: "bridge"}

// declareFamily queues table, the chain "target" its rules jump to, and those of sets
// that belong to it.
func declareFamily(c *nftables.Conn, table *nftables.Table, sets map[string]*nftables.Set) error {
	c.AddTable(table)
	c.AddChain(&nftables.Chain{Name: "target", Table: table})
	for _, s := range sets {
		if s.Table == table {
			if err := c.AddSet(s, nil); err != nil {
				return err
			}
		}
	}
	return nil
}

// addRules queues every family's declarations and its rules, rule i of family fam in
// chainFor(fam, i) (queued as often as it is named: adding a chain that exists is no error).
func addRules(c *nftables.Conn, tables map[nftables.TableFamily]*nftables.Table, sets map[string]*nftables.Set,
	rules map[nftables.TableFamily][]listed, chainFor func(nftables.TableFamily, int) *nftables.Chain) error {
	for fam, rs := range rules {
		if err := declareFamily(c, tables[fam], sets); err != nil {
			return err
		}
		for i, r := range rs {
			c.AddRule(&nftables.Rule{Table: tables[fam], Chain: c.AddChain(chainFor(fam, i)), Exprs: r.exprs})
		}
	}
	return nil
}

// familyTables is one table "t" per family of familyNames.
func familyTables() map[nftables.TableFamily]*nftables.Table {
	tables := map[nftables.TableFamily]*nftables.Table{}
	for fam := range familyNames {
		tables[fam] = &nftables.Table{Name: "t", Family: fam}
	}
	return tables
}

// TestRulesReadAsNftListsThem installs every helper's rule in a test namespace and
// compares `nft list` with the text the helper's comment promises.
func TestRulesReadAsNftListsThem(t *testing.T) {
	testns.RequireFirewallBinaries(t, "compares with nft's own listing")
	testns.RequireRoot(t)
	host := testns.New(t)
	tables := familyTables()
	sets := testSets(tables)
	rules := rulesByFamily(sets)
	host.Run(t, func() error {
		c, err := nftables.New()
		if err != nil {
			return err
		}
		if err := addRules(c, tables, sets, rules, func(fam nftables.TableFamily, _ int) *nftables.Chain {
			return &nftables.Chain{Name: "c", Table: tables[fam]}
		}); err != nil {
			return err
		}
		return c.Flush()
	})
	for fam, rs := range rules {
		out, err := host.Exec(t, "nft", "list", "chain", familyNames[fam], "t", "c")
		require.NoError(t, err, out)
		got := nfttest.ListedRules(out)
		want := make([]string, len(rs))
		for i, r := range rs {
			want[i] = r.nft
		}
		assert.Equal(t, want, got, "family %s", familyNames[fam])
	}
}

// The expressions below are written by no plugin; the tests check that the
// building blocks render them as nft prints them.

// DaddrIn is `ip daddr 10.1.0.0/24` (`ip6 daddr` for an IPv6 prefix).
func DaddrIn(p netip.Prefix) []expr.Any { return In(Daddr(p.Addr().Is6()), p) }

// IsNot is `<field> != <value>`.
func IsNot(f Field, value []byte) []expr.Any { return Compare(f, expr.CmpOpNeq, value) }

// MarkIs is `meta mark 0x00000001`.
func MarkIs(v uint32) []expr.Any { return Is(Mark, HostOrder(v)) }

// Goto is `goto <chain>`.
func Goto(chain string) []expr.Any { return verdict(expr.VerdictGoto, chain) }
