package firewall

import (
	"fmt"
	"net/netip"
	"slices"

	"github.com/cnikit/cni/internal/iptables"
)

// Adopting the reference plugin's rules. On a node whose plugins were replaced under
// running pods, CNI-FORWARD holds the reference's two rules per address of the pods it
// set up, `-d <ip>/32 -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT` and `-s
// <ip>/32 -j ACCEPT`, without the comment ours carry: nothing in them names a network
// or a container. DEL therefore removes them by the addresses prevResult gives (the
// runtime's cached result, also when the netns is gone), and CHECK accepts them in
// place of ours. GC cannot tell whose they are and leaves them: they only accept
// traffic of an address, which any later attachment of that address accepts anyway.

// referenceRules are the reference's rules of the address a, which carry no comment.
func referenceRules(a netip.Addr) []iptables.Rule {
	p := hostPrefix(a)
	return []iptables.Rule{
		{"-d", p, "-m", "conntrack", "--ctstate", "RELATED,ESTABLISHED", "-j", "ACCEPT"},
		{"-s", p, "-j", "ACCEPT"},
	}
}

// planRemoveReference queues the deletion of the reference's rules of the addresses of
// family fam among ips. The reference appends each rule once (AppendUnique), so every
// copy found is the one it made.
func planRemoveReference(b *iptables.Batch, fam iptables.Family, ips []netip.Addr) {
	var ref []iptables.Rule
	for _, ip := range ips {
		if familyOf(ip) == fam {
			ref = append(ref, referenceRules(ip)...)
		}
	}
	if len(ref) == 0 {
		return
	}
	b.DeleteRulesFunc(privChain, func(r iptables.Rule) bool { return slices.ContainsFunc(ref, r.Same) })
}

// checkAddresses verifies that c (CNI-FORWARD) holds, for each address of family fam,
// the attachment's two rules, or else the reference's two rules of that address.
func checkAddresses(c *iptables.Chain, att attachment, fam iptables.Family, ips []netip.Addr) error {
	for _, ip := range ips {
		if familyOf(ip) != fam {
			continue
		}
		ours, ref := ipRules(att, fam, []netip.Addr{ip}), referenceRules(ip)
		if holdsAll(c, ours) || holdsAll(c, ref) {
			continue
		}
		want := ours
		if slices.ContainsFunc(ref, c.Has) {
			want = ref // the reference's pair, half of it there: name what it lacks
		}
		for _, r := range want {
			if !c.Has(r) {
				return fmt.Errorf("chain %s lacks %q", privChain, r.String())
			}
		}
	}
	return nil
}

func holdsAll(c *iptables.Chain, rules []iptables.Rule) bool {
	return !slices.ContainsFunc(rules, func(r iptables.Rule) bool { return !c.Has(r) })
}
