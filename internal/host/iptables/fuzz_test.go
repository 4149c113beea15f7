package iptables

import (
	"slices"
	"strings"
	"testing"
	"unicode"
)

// FuzzParseRules reads arbitrary `iptables -S` text: no panic, and accepted chains,
// written back as iptables prints them (the -P and -N lines, then each rule rendered by
// Rule.String), read back to the same chains, policies and rules in the same order;
// the table they make answers for each of them.
func FuzzParseRules(f *testing.F) {
	for _, seed := range []string{
		sample,
		"-P INPUT ACCEPT\n-P FORWARD DROP\n-N CNI-FORWARD\n-N CNI-ADMIN\n" +
			"-A FORWARD -m comment --comment \"CNI firewall plugin rules\" -j CNI-FORWARD\n" +
			"-A CNI-FORWARD -m comment --comment \"CNI firewall plugin admin overrides\" -j CNI-ADMIN\n" +
			"-A CNI-FORWARD -d 10.88.0.5/32 -m conntrack --ctstate RELATED,ESTABLISHED -m comment --comment \"name: \\\"n\\\" id: \\\"c\\\"\" -j ACCEPT\n",
		"-N CNI-HOSTPORT-DNAT\n-A CNI-HOSTPORT-DNAT -p tcp -m comment --comment \"dnat name: \\\"n\\\" id: \\\"c\\\"\" " +
			"-m multiport --dports 8080,8081 -j CNI-DN-0c3ac60309c13c95757d3\n-N CNI-DN-0c3ac60309c13c95757d3\n-A CNI-DN-0c3ac60309c13c95757d3 -s 10.88.0.0/24 " +
			"-p tcp -m tcp --dport 8080 -j CNI-HOSTPORT-SETMARK\n",
		"# Warning: iptables-legacy tables present, use iptables-legacy to see them\n-P POSTROUTING ACCEPT\n",
		"-A X \"a b\" \"\" \\\"q\r\n",
		"-A X \"unterminated\n",
		"bogus\n", "-P X\n", "-A\n", "-A \"a b\" -j X\n", "-N \"\"\n-P \"\" \"x y\"\n", "*nat\nCOMMIT\n",
	} {
		f.Add(seed, "nat")
		f.Add(seed, "filter")
	}
	f.Fuzz(func(t *testing.T, listing, table string) {
		chains, err := parseRules(IPv4, listing)
		if err != nil || strings.IndexFunc(listing, func(c rune) bool { return unicode.IsControl(c) && c != '\n' && c != '\t' }) >= 0 {
			return // control characters do not round-trip (FuzzRuleString)
		}
		tab, err := ParseRules(IPv4, table, listing)
		if err != nil {
			t.Fatalf("parseRules accepts what ParseRules refuses: %v", err)
		}
		var b strings.Builder
		for _, c := range chains {
			if got, err := tab.Chain(c.Name); err != nil || got == nil || !sameChains([]*Chain{c}, []*Chain{got}) {
				t.Fatalf("chain %q listed but not found as listed (%v)", c.Name, err)
			}
			if c.Policy == "-" {
				b.WriteString("-N " + quote(c.Name) + "\n")
			} else {
				b.WriteString("-P " + quote(c.Name) + " " + quote(c.Policy) + "\n")
			}
		}
		for _, c := range chains {
			for _, r := range c.Rules {
				b.WriteString("-A " + quote(c.Name) + " " + r.String() + "\n")
			}
		}
		again, err := parseRules(IPv4, b.String())
		if err != nil {
			t.Fatalf("listing of parsed chains does not parse: %v\n%s", err, b.String())
		}
		if !sameChains(chains, again) {
			t.Fatalf("listing of parsed chains reads back differently\nfirst:  %q\nsecond: %q", listing, b.String())
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
// the split gives the same arguments, and as a -A line of a listing the rule reads
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
		chains, err := parseRules(IPv6, "-A X "+line+"\n")
		if err != nil || len(chains) != 1 || len(chains[0].Rules) != 1 || !slices.Equal(r, chains[0].Rules[0]) {
			t.Fatalf("%q renders as %q, which does not read back as one rule (%v)", []string(r), line, err)
		}
	})
}
