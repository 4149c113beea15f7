// Package nfttest reads the nf_tables ruleset of a test's network namespace over netlink
// and writes it as text, for tests that must also run where no nft binary is (the
// no-firewall-binaries mode, see testns.FirewallBinariesHidden): every table, chain, set
// element and rule, with the addresses, ports, interface names, jump targets and comments
// they hold spelled as nft spells them. The text is for "is this address, chain or
// container id still anywhere?" and "did anything change?" questions; its layout is not
// nft's and no test should compare it with nft's.
package nfttest

import (
	"encoding/binary"
	"fmt"
	"net"
	"net/netip"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
	"github.com/google/nftables/userdata"
	"github.com/stretchr/testify/require"

	"github.com/cnikit/cni/internal/host/netfilter"
	"github.com/cnikit/cni/internal/testbed/testns"
)

// Ruleset is the namespace's ruleset as text; the test fails if it cannot be read.
func Ruleset(t testing.TB, n *testns.NS) string {
	t.Helper()
	var out string
	n.Run(t, func() (err error) {
		out, err = Dump()
		return err
	})
	return out
}

// Firewall is the namespace's whole firewall state as text: Ruleset and, where the
// firewall binaries are, iptables-save's tables (nft does not show the comments of
// rules iptables-nft made, and legacy tables are not in nf_tables at all).
func Firewall(t testing.TB, n *testns.NS) string {
	t.Helper()
	out := Ruleset(t, n)
	if !testns.FirewallBinariesHidden() {
		save, err := n.Exec(t, "iptables-save")
		require.NoError(t, err, save)
		out += comparableSave(save)
	}
	return out
}

// counters are the packet and byte counts iptables-save gives each built-in chain.
var counters = regexp.MustCompile(`\[[0-9]+:[0-9]+\]`)

// comparableSave is iptables-save's output without what changes with no change of the
// rules: its "Generated on"/"Completed on" comment lines, whose clock moves on, and the
// chains' counters, which traffic moves.
func comparableSave(save string) string {
	var b strings.Builder
	for _, line := range strings.SplitAfter(save, "\n") {
		if !strings.HasPrefix(line, "#") {
			b.WriteString(counters.ReplaceAllString(line, "[0:0]"))
		}
	}
	return b.String()
}

// Dump writes the ruleset of the calling thread's network namespace as text.
func Dump() (string, error) {
	c, err := nftables.New(nftables.AsLasting())
	if err != nil {
		return "", err
	}
	defer c.CloseLasting()
	tables, err := c.ListTables()
	if err != nil {
		return "", fmt.Errorf("nfttest: tables: %w", err)
	}
	chains, err := c.ListChains()
	if err != nil {
		return "", fmt.Errorf("nfttest: chains: %w", err)
	}
	var b strings.Builder
	for _, t := range tables {
		fmt.Fprintf(&b, "table %s %s\n", netfilter.FamilyName(t.Family), t.Name)
		if err := writeSets(&b, c, t); err != nil {
			return "", err
		}
		for _, ch := range chains {
			if ch.Table.Name != t.Name || ch.Table.Family != t.Family {
				continue
			}
			if err := writeChain(&b, c, t, ch); err != nil {
				return "", err
			}
		}
	}
	return b.String(), nil
}

func writeSets(b *strings.Builder, c *nftables.Conn, t *nftables.Table) error {
	sets, err := c.GetSets(t)
	if err != nil {
		return fmt.Errorf("nfttest: sets of %s: %w", t.Name, err)
	}
	for _, s := range sets {
		elems, err := c.GetSetElements(s)
		if err != nil && !netfilter.IsNotExist(err) {
			return fmt.Errorf("nfttest: elements of %s %s: %w", t.Name, s.Name, err)
		}
		lines := make([]string, 0, len(elems))
		for _, e := range elems {
			line := "\telement " + key(s.KeyType, e.Key)
			if chain := netfilter.VerdictChain(e.Val); chain != "" {
				line += " : " + chain
			} else if len(e.Val) > 0 && !s.IsMap {
				line += " : " + value(e.Val)
			}
			if e.Comment != "" {
				line += fmt.Sprintf(" comment %q", e.Comment)
			}
			lines = append(lines, line+"\n")
		}
		// The kernel lists a hash set's elements in its own order.
		slices.Sort(lines)
		fmt.Fprintf(b, "  set %s\n%s", s.Name, strings.Join(lines, ""))
	}
	return nil
}

func writeChain(b *strings.Builder, c *nftables.Conn, t *nftables.Table, ch *nftables.Chain) error {
	fmt.Fprintf(b, "  chain %s", ch.Name)
	if ch.Hooknum != nil {
		fmt.Fprintf(b, " hook %d", *ch.Hooknum)
	}
	if ch.Priority != nil {
		fmt.Fprintf(b, " priority %d", *ch.Priority)
	}
	b.WriteString("\n")
	rules, err := c.GetRules(t, ch)
	if err != nil {
		return fmt.Errorf("nfttest: rules of %s %s: %w", t.Name, ch.Name, err)
	}
	for _, r := range rules {
		words := make([]string, 0, len(r.Exprs)+1)
		for _, e := range r.Exprs {
			words = append(words, exprText(e))
		}
		fmt.Fprintf(b, "\t%s%s\n", strings.Join(words, " "), userdataText(r.UserData))
	}
	return nil
}

// userdataText is every string of a rule's userdata: nft's comment and the records the
// plugins keep there.
func userdataText(ud []byte) string {
	var out string
	for typ := userdata.Type(0); typ < 0x80; typ++ {
		if s, ok := userdata.GetString(ud, typ); ok && s != "" {
			out += fmt.Sprintf(" comment %q", s)
		}
	}
	return out
}

func exprText(e expr.Any) string {
	switch e := e.(type) {
	case *expr.Cmp:
		if e.Op == expr.CmpOpNeq {
			return "!= " + value(e.Data)
		}
		if e.Op != expr.CmpOpEq {
			return fmt.Sprintf("cmp%d %s", e.Op, value(e.Data))
		}
		return value(e.Data)
	case *expr.Immediate:
		return value(e.Data)
	case *expr.Bitwise:
		return "& " + value(e.Mask)
	case *expr.Lookup:
		return "@" + e.SetName
	case *expr.Verdict:
		if e.Chain != "" {
			return verdictName(e.Kind) + " " + e.Chain
		}
		return verdictName(e.Kind)
	case *expr.Meta:
		if name, ok := metaNames[e.Key]; ok {
			return name
		}
		return "meta" + strconv.Itoa(int(e.Key))
	case *expr.Payload:
		return payloadText(e)
	case *expr.NAT:
		return "nat"
	case *expr.Masq:
		return "masquerade"
	case *expr.Match:
		return "xt match " + e.Name
	case *expr.Target:
		return "xt target " + e.Name
	}
	return strings.TrimPrefix(fmt.Sprintf("%T", e), "*expr.")
}

// metaNames are the meta keys the plugins match on, by their nft names.
var metaNames = map[expr.MetaKey]string{
	expr.MetaKeyL4PROTO: "meta l4proto", expr.MetaKeyNFPROTO: "meta nfproto", expr.MetaKeyIIFNAME: "iifname",
	expr.MetaKeyOIFNAME: "oifname", expr.MetaKeyMARK: "meta mark",
}

// payloadField is a header field as a payload expression loads it.
type payloadField struct {
	base      expr.PayloadBase
	off, size uint32
}

// payloadNames are the header fields the plugins load, by their nft names.
var payloadNames = map[payloadField]string{
	{expr.PayloadBaseNetworkHeader, 12, 4}:  "ip saddr",
	{expr.PayloadBaseNetworkHeader, 16, 4}:  "ip daddr",
	{expr.PayloadBaseNetworkHeader, 8, 16}:  "ip6 saddr",
	{expr.PayloadBaseNetworkHeader, 24, 16}: "ip6 daddr",
	{expr.PayloadBaseTransportHeader, 0, 2}: "sport",
	{expr.PayloadBaseTransportHeader, 2, 2}: "dport",
	{expr.PayloadBaseLLHeader, 6, 6}:        "ether saddr",
}

// payloadText names a header field a payload expression loads as nft does ("ip saddr",
// "dport").
func payloadText(p *expr.Payload) string {
	if name, ok := payloadNames[payloadField{p.Base, p.Offset, p.Len}]; ok {
		return name
	}
	return fmt.Sprintf("payload%d+%d/%d", p.Base, p.Offset, p.Len)
}

func verdictName(k expr.VerdictKind) string {
	switch k {
	case expr.VerdictAccept:
		return "accept"
	case expr.VerdictDrop:
		return "drop"
	case expr.VerdictReturn:
		return "return"
	case expr.VerdictJump:
		return "jump"
	case expr.VerdictGoto:
		return "goto"
	}
	return "verdict" + strconv.Itoa(int(k))
}

// key writes a set element's key field by field, as the set's type says.
func key(t nftables.SetDatatype, k []byte) string {
	if t == nftables.TypeVerdict {
		// google/nftables v0.3.0 reads a verdict map's data type into its key type, so
		// the key's type is lost: go by the key layouts the plugins use.
		return guessKey(k)
	}
	if !strings.Contains(t.Name, " . ") {
		return typed(t.Name, k)
	}
	var parts []string
	for _, f := range nftables.ConcatSetTypeElements(t) {
		n := int(f.Bytes+3) / 4 * 4
		if n == 0 || n > len(k) {
			return value(k)
		}
		parts = append(parts, typed(f.Name, k[:f.Bytes]))
		k = k[n:]
	}
	return strings.Join(parts, " . ")
}

// guessKey writes a key of unknown type by its length: an address (4, 16), a protocol
// and a port (8), a protocol, an address and a port (12, 24), two interface names (32).
func guessKey(k []byte) string {
	switch len(k) {
	case 8:
		return typed("inet_proto", k[:1]) + " . " + typed("inet_service", k[4:6])
	case 12, 24:
		return typed("inet_proto", k[:1]) + " . " + typed("ipv4_addr", k[4:len(k)-4]) + " . " + typed("inet_service", k[len(k)-4:len(k)-2])
	case 32:
		return typed("ifname", k[:16]) + " . " + typed("ifname", k[16:])
	}
	return value(k)
}

func typed(name string, v []byte) string {
	switch name {
	case "ipv4_addr", "ipv6_addr":
		if a, ok := netip.AddrFromSlice(v); ok {
			return a.String()
		}
	case "inet_service":
		if len(v) == 2 {
			return strconv.Itoa(int(binary.BigEndian.Uint16(v)))
		}
	case "inet_proto":
		if len(v) == 1 {
			return protoName(v[0])
		}
	case "ifname":
		return strconv.Quote(strings.TrimRight(string(v), "\x00"))
	}
	return value(v)
}

func protoName(p byte) string {
	switch p {
	case 6:
		return "tcp"
	case 17:
		return "udp"
	case 132:
		return "sctp"
	}
	return strconv.Itoa(int(p))
}

// value writes data whose type the expression does not carry, by its length: an IPv4 or
// IPv6 address, a port, an interface name (NUL-padded text), else hex.
func value(v []byte) string {
	if s := strings.TrimRight(string(v), "\x00"); len(v) == 16 && s != "" && printable(s) {
		return strconv.Quote(s)
	}
	switch len(v) {
	case 6:
		return net.HardwareAddr(v).String()
	case 4, 16:
		a, _ := netip.AddrFromSlice(v)
		return a.String()
	case 2:
		return strconv.Itoa(int(binary.BigEndian.Uint16(v)))
	case 1:
		return strconv.Itoa(int(v[0]))
	}
	return fmt.Sprintf("0x%x", v)
}

func printable(s string) bool {
	for _, r := range s {
		if r < 0x21 || r > 0x7e {
			return false
		}
	}
	return true
}
