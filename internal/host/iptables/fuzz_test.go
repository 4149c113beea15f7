package iptables

import (
	"slices"
	"strings"
	"testing"
	"unicode"
)

// FuzzParse reads arbitrary iptables-save text: no panic, and an accepted table, written
// back as save text (chain lines, then each rule rendered by Rule.String), reads back
// to the same chains, policies and rules in the same order. Chain names that are not
// plain tokens are left out of the round trip: iptables-save never prints them, and a
// ":" line cannot carry them.
func FuzzParse(f *testing.F) {
	for _, seed := range []string{
		sample,
		"*filter\n:INPUT ACCEPT [0:0]\n:FORWARD DROP [0:0]\n:CNI-FORWARD - [0:0]\n:CNI-ADMIN - [0:0]\n" +
			"-A FORWARD -m comment --comment \"CNI firewall plugin rules\" -j CNI-FORWARD\n" +
			"-A CNI-FORWARD -m comment --comment \"CNI firewall plugin admin overrides\" -j CNI-ADMIN\n" +
			"-A CNI-FORWARD -d 10.88.0.5/32 -m conntrack --ctstate RELATED,ESTABLISHED -m comment --comment \"name: \\\"n\\\" id: \\\"c\\\"\" -j ACCEPT\n" +
			"COMMIT\n",
		"*nat\n:CNI-HOSTPORT-DNAT - [0:0]\n-A CNI-HOSTPORT-DNAT -p tcp -m comment --comment \"dnat name: \\\"n\\\" id: \\\"c\\\"\" " +
			"-m multiport --dports 8080,8081 -j CNI-DN-0c3ac60309c13c95757d3\n-A CNI-DN-0c3ac60309c13c95757d3 -s 10.88.0.0/24 " +
			"-p tcp -m tcp --dport 8080 -j CNI-HOSTPORT-SETMARK\nCOMMIT\n",
		"*nat\r\n-A X \"a b\" \"\" \\\"q\r\nCOMMIT\r\n",
		"*nat\n-A X \"unterminated\nCOMMIT\n",
		"*nat\nbogus\n", "*nat\n:X\n", "*nat\n-A\n", "*nat\n-A \"a b\" -j X\n",
	} {
		f.Add(seed, "nat")
		f.Add(seed, "filter")
	}
	f.Fuzz(func(t *testing.T, save, table string) {
		tab, err := Parse(IPv4, table, save)
		if err != nil || strings.IndexFunc(save, func(c rune) bool { return unicode.IsControl(c) && c != '\n' && c != '\t' }) >= 0 {
			return // control characters do not round-trip (FuzzRuleString)
		}
		var b strings.Builder
		b.WriteString("*" + table + "\n")
		var kept []*Chain
		for _, c := range tab.Chains() {
			if c != tab.Chain(c.Name) {
				t.Fatalf("chain %q listed but not found", c.Name)
			}
			if quote(c.Name) != c.Name || strings.IndexFunc(c.Name, unicode.IsSpace) >= 0 || strings.HasPrefix(c.Name, "#") || c.Name == "COMMIT" {
				continue
			}
			kept = append(kept, c)
			b.WriteString(":" + c.Name + " " + c.Policy + " [0:0]\n")
		}
		for _, c := range kept {
			for _, r := range c.Rules {
				b.WriteString("-A " + c.Name + " " + r.String() + "\n")
			}
		}
		b.WriteString("COMMIT\n")
		again, err := Parse(IPv4, table, b.String())
		if err != nil {
			t.Fatalf("save text of a parsed table does not parse: %v\n%s", err, b.String())
		}
		if !sameChains(kept, again.Chains()) {
			t.Fatalf("save text of a parsed table reads back differently\nfirst:  %q\nsecond: %q", save, b.String())
		}
	})
}

func sameChains(a, b []*Chain) bool {
	return slices.EqualFunc(a, b, func(x, y *Chain) bool {
		return x.Name == y.Name && x.Policy == y.Policy && slices.EqualFunc(x.Rules, y.Rules, func(r, s Rule) bool { return slices.Equal(r, s) })
	})
}

// FuzzRuleString renders a rule (its arguments separated by NUL in the input) and
// splits it again as iptables-restore would: for arguments without control characters
// the split gives the same arguments, and as a -A line of save text the rule reads
// back unchanged.
func FuzzRuleString(f *testing.F) {
	for _, r := range append([]Rule{
		{"-i", "eth\u00a0", "-j", "DROP\u00a0"},
		{"-s", "1.2.3.4\nCOMMIT\n*filter\n-F"},
		{"a'b", "\"", "\\\"", " ", "\t"},
	}, quotedRules...) {
		f.Add(strings.Join(r, "\x00"))
	}
	f.Fuzz(func(t *testing.T, in string) {
		r := Rule(strings.Split(in, "\x00"))
		_, _ = r.Target(), r.Comment()
		line := r.String()
		if strings.IndexFunc(in, func(c rune) bool { return c != 0 && unicode.IsControl(c) }) >= 0 {
			return
		}
		got, err := split(line)
		if err != nil || !slices.Equal(r, Rule(got)) {
			t.Fatalf("%q renders as %q, which splits to %q (%v)", []string(r), line, got, err)
		}
		tab, err := Parse(IPv6, "mangle", "*mangle\n-A X "+line+"\nCOMMIT\n")
		if err != nil || tab.Chain("X") == nil || len(tab.Chain("X").Rules) != 1 || !slices.Equal(r, tab.Chain("X").Rules[0]) {
			t.Fatalf("%q renders as %q, which does not read back as one rule (%v)", []string(r), line, err)
		}
	})
}
