package nftexpr

import (
	"net/netip"
	"os/exec"
	"strings"
	"testing"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cnikit/cni/internal/testbed/testns"
)

// readBack writes the rules with nft (as the reference plugins' knftables does) into
// chain c of table <family> t in a test namespace and returns them as the kernel lists
// them, in order.
func readBack(t *testing.T, family string, rules ...string) [][]expr.Any {
	t.Helper()
	testns.RequireRoot(t)
	host := testns.New(t)
	script := "table " + family + " t {\n chain c {\n  " + strings.Join(rules, "\n  ") + "\n }\n}\n"
	var out []byte
	err := host.Do(func() error {
		var err error
		cmd := exec.Command("nft", "-f", "-")
		cmd.Stdin = strings.NewReader(script)
		out, err = cmd.CombinedOutput()
		return err
	})
	require.NoError(t, err, "%s", out)
	fam := map[string]nftables.TableFamily{"ip": ipv4, "ip6": ipv6, "inet": nftables.TableFamilyINet}[family]
	var got [][]expr.Any
	host.Run(t, func() error {
		c, err := nftables.New()
		if err != nil {
			return err
		}
		tb := &nftables.Table{Name: "t", Family: fam}
		rs, err := c.GetRules(tb, &nftables.Chain{Name: "c", Table: tb})
		for _, r := range rs {
			got = append(got, r.Exprs)
		}
		return err
	})
	require.Len(t, got, len(rules))
	return got
}

// TestReadersAcceptWhatNftCompiles reads rules that nft compiled (the reference
// plugins' masquerade and port-forwarding rules among them) and asks what they say.
func TestReadersAcceptWhatNftCompiles(t *testing.T) {
	inet := readBack(t, "inet",
		"ip saddr 10.66.0.2 ip daddr != 10.66.0.0/24 masquerade",
		"ip6 saddr fd66::2 ip6 daddr != fd66::/64 masquerade",
		"ip daddr != 10.0.0.0/12 return",
	)
	assert.True(t, HasPrefix(inet[0], Saddr(false), expr.CmpOpEq, pfx("10.66.0.2/32")))
	assert.True(t, HasPrefix(inet[0], Daddr(false), expr.CmpOpNeq, pfx("10.66.0.0/24")), "a 3-byte load")
	assert.False(t, HasPrefix(inet[0], Daddr(false), expr.CmpOpNeq, pfx("10.66.0.0/16")))
	assert.False(t, HasPrefix(inet[0], Daddr(false), expr.CmpOpEq, pfx("10.66.0.0/24")), "!= is not ==")
	assert.False(t, HasPrefix(inet[0], Saddr(false), expr.CmpOpEq, pfx("10.66.0.3/32")))
	assert.False(t, HasPrefix(inet[0], Saddr(true), expr.CmpOpEq, pfx("10.66.0.2/32")), "another field")
	assert.True(t, Masquerades(inet[0]))
	assert.True(t, HasPrefix(inet[1], Saddr(true), expr.CmpOpEq, pfx("fd66::2/128")))
	assert.True(t, HasPrefix(inet[1], Daddr(true), expr.CmpOpNeq, pfx("fd66::/64")), "an 8-byte load")
	assert.True(t, HasPrefix(inet[2], Daddr(false), expr.CmpOpNeq, pfx("10.0.0.0/12")), "a masked load")
	assert.False(t, HasPrefix(inet[2], Daddr(false), expr.CmpOpNeq, pfx("10.0.0.0/8")))
	assert.False(t, Masquerades(inet[2]))

	ip := readBack(t, "ip",
		"tcp dport 47000 dnat to 10.66.0.2:80",
		"ip daddr 10.99.0.1 udp dport 53 dnat to 10.66.0.2:5353",
		"ip saddr 127.0.0.1 ip daddr 10.66.0.2 masquerade",
	)
	assert.True(t, Has(ip[0], L4Proto, expr.CmpOpEq, []byte{6}))
	assert.True(t, Has(ip[0], THDport, expr.CmpOpEq, Port(47000)))
	assert.False(t, Has(ip[0], THDport, expr.CmpOpEq, Port(47001)))
	to, ok := DNATTo(ip[0])
	assert.True(t, ok)
	assert.Equal(t, netip.MustParseAddrPort("10.66.0.2:80"), to)
	assert.True(t, HasPrefix(ip[1], Daddr(false), expr.CmpOpEq, pfx("10.99.0.1/32")))
	assert.True(t, Has(ip[1], L4Proto, expr.CmpOpEq, []byte{17}))
	to, _ = DNATTo(ip[1])
	assert.Equal(t, netip.MustParseAddrPort("10.66.0.2:5353"), to)
	port, ok := Value(ip[1], THDport)
	assert.True(t, ok)
	assert.Equal(t, Port(53), port)
	daddr, _ := Value(ip[1], Daddr(false))
	assert.Equal(t, []byte{10, 99, 0, 1}, daddr)
	_, ok = Value(ip[0], Daddr(false))
	assert.False(t, ok, "no destination address in the rule")
	_, ok = Value(inet[0], Daddr(false))
	assert.False(t, ok, "!= and a 3-byte prefix are no value")
	_, ok = DNATTo(ip[2])
	assert.False(t, ok, "masquerade is no dnat")
	assert.True(t, HasPrefix(ip[2], Saddr(false), expr.CmpOpEq, pfx("127.0.0.1/32")))
	assert.True(t, HasPrefix(ip[2], Daddr(false), expr.CmpOpEq, pfx("10.66.0.2/32")))
}

// TestReadersAcceptWhatTheBuildersMake reads the builders' own expressions.
func TestReadersAcceptWhatTheBuildersMake(t *testing.T) {
	r := Rule(NFProtoIs(false), In(Saddr(false), pfx("10.1.0.0/20")), NotIn(Daddr(false), pfx("224.0.0.0/4")), Masquerade())
	assert.True(t, HasPrefix(r, Saddr(false), expr.CmpOpEq, pfx("10.1.0.0/20")))
	assert.True(t, HasPrefix(r, Daddr(false), expr.CmpOpNeq, pfx("224.0.0.0/4")))
	assert.True(t, Has(r, NFProto, expr.CmpOpEq, []byte{2}))
	assert.True(t, Masquerades(r))
	d := Rule(ProtoDPortIs(17, 53), DNAT(netip.MustParseAddrPort("[fd00::5]:53")))
	to, ok := DNATTo(d)
	assert.True(t, ok)
	assert.Equal(t, netip.MustParseAddrPort("[fd00::5]:53"), to)
}
