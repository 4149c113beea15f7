package firewall

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"

	"github.com/cnikit/cni/internal/core/steps"
	"github.com/cnikit/cni/internal/host/iptables"
	"github.com/cnikit/cni/internal/host/netfilter"
)

// Adopting the reference plugin's rules. On a node whose plugins were replaced under
// running pods, CNI-FORWARD holds the reference's two rules per address of the pods it
// set up, `-d <ip>/32 -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT` and `-s
// <ip>/32 -j ACCEPT`, without the comment ours carry: nothing in them names a network
// or a container. DEL therefore removes them by the addresses prevResult gives (the
// runtime's cached result, also when the netns is gone), and CHECK accepts them in
// place of ours. GC cannot tell whose they are and leaves them: they only accept
// traffic of an address, which any later attachment of that address accepts anyway.
//
// With backend unset the reference picks iptables wherever it works, but the rule
// (netfilter.Detect) picks nftables on a node whose only iptables rules are the
// plugins' own: the pods set up before the upgrade keep their iptables rules there.
// CHECK therefore looks in iptables when the nftables backend it chose holds nothing
// of the attachment (checkAdopted), as masquerade and portmap do; a node without
// reference state pays nothing for it. The other way round too: the rule picks
// iptables once the host keeps rules of its own there (Docker, kube-proxy in iptables
// mode starting after the first pods), and the pods ADDed before keep their nftables
// elements, which CHECK finds when iptables holds nothing of the attachment
// (checkInNFTables). An attachment stays in the backend its ADD chose.

// errAbsent marks a check that found nothing of the attachment in the backend it
// looked in, as opposed to state that is there but damaged: only then is the other
// layout looked at.
var errAbsent = errors.New("nothing of the attachment")

// absentError is a check's own error marked errAbsent without a word added to what the
// operator reads.
type absentError struct{ err error }

func (e absentError) Error() string   { return e.err.Error() }
func (e absentError) Unwrap() []error { return []error{e.err, errAbsent} }
func markAbsent(err error) error      { return absentError{err} }

// checkAdopted is CHECK of an attachment the nftables backend holds nothing of (absent
// is its error): the iptables rules, ours or the reference's, where the filter table of
// a family the attachment has is in use and the tools to read it are installed. What is
// found there is checked as it stands; when nothing is, absent stands.
func checkAdopted(ctx context.Context, conf *Config, att attachment, ips []netip.Addr, bridge string, absent error) error {
	if !netfilter.IPTablesInstalled() || !slices.ContainsFunc(ipFamilies(ips), func(f iptables.Family) bool {
		return iptables.TableInUse(f, filterTable)
	}) {
		return absent
	}
	if err := iptCheck(ctx, conf, att, ips, bridge); !errors.Is(err, errAbsent) {
		return err
	}
	return absent
}

// checkInNFTables is CHECK of an attachment the iptables backend holds nothing of
// (absent is its error): the nftables sets, where its ADD put it while the node had no
// iptables rules of its own. When an address's element is the attachment's, the
// nftables layout is checked as it stands; when none is, absent stands.
func checkInNFTables(ctx context.Context, conf *Config, att attachment, ips []netip.Addr, bridge string, absent error) error {
	if !newNFTLayout().holds(att, ips) {
		return absent
	}
	return steps.Begin(ctx, steps.Firewall).Done(nftCheck(conf, att, ips, bridge))
}

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

// checkAddresses verifies that CNI-FORWARD holds (has tells), for each address of
// family fam, the attachment's two rules, or else the reference's two rules of that
// address.
func checkAddresses(has func(iptables.Rule) bool, att attachment, fam iptables.Family, ips []netip.Addr) error {
	for _, ip := range ips {
		if familyOf(ip) != fam {
			continue
		}
		ours, ref := ipRules(att, fam, []netip.Addr{ip}), referenceRules(ip)
		if holdsAll(has, ours) || holdsAll(has, ref) {
			continue
		}
		want := ours
		if slices.ContainsFunc(ref, has) {
			want = ref // the reference's pair, half of it there: name what it lacks
		}
		for _, r := range want {
			if !has(r) {
				return fmt.Errorf("chain %s lacks %q", privChain, r.String())
			}
		}
	}
	return nil
}

// holdsAny tells whether CNI-FORWARD holds (has tells) any rule, ours or the
// reference's, of the attachment's addresses of family fam.
func holdsAny(has func(iptables.Rule) bool, att attachment, fam iptables.Family, ips []netip.Addr) bool {
	return slices.ContainsFunc(ips, func(ip netip.Addr) bool {
		return familyOf(ip) == fam && (slices.ContainsFunc(ipRules(att, fam, []netip.Addr{ip}), has) || slices.ContainsFunc(referenceRules(ip), has))
	})
}

func holdsAll(has func(iptables.Rule) bool, rules []iptables.Rule) bool {
	return !slices.ContainsFunc(rules, func(r iptables.Rule) bool { return !has(r) })
}
