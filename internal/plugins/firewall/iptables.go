package firewall

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os/exec"

	"github.com/cnikit/cni/internal/host/iptables"
	"github.com/cnikit/cni/internal/host/owner"
)

// The reference layout's names.
const (
	filterTable  = "filter"
	forwardChain = "FORWARD"
	privChain    = "CNI-FORWARD"

	forwardComment = "CNI firewall plugin rules"
	adminComment   = "CNI firewall plugin admin overrides"
)

var families = [...]iptables.Family{iptables.IPv4, iptables.IPv6}

func familyOf(a netip.Addr) iptables.Family { return iptables.FamilyOf(!a.Unmap().Is4()) }

// hostPrefix is the address as a single-host prefix (/32, /128), the form iptables
// prints for `-s`/`-d` and firewalld takes as a source.
func hostPrefix(a netip.Addr) string {
	a = a.Unmap()
	return netip.PrefixFrom(a, a.BitLen()).String()
}

// attachment is one container on one network, as its rules are keyed.
type attachment struct {
	network, containerID string
}

// comment tags the per-attachment rules, so that DEL and GC find them without the
// container's addresses. It is the masquerade rules' comment of the reference.
func (a attachment) comment() string {
	return owner.Comment("", a.network, a.containerID, iptables.MaxComment)
}

// parseComment returns the container field of network's comment (a hashed form for a
// long id), or false.
func parseComment(network, comment string) (string, bool) {
	net, id, ok := owner.Parse("", comment)
	return id, ok && owner.Names(net, network)
}

func forwardRule() iptables.Rule {
	return iptables.Rule{"-m", "comment", "--comment", forwardComment, "-j", privChain}
}

func adminRule(admin string) iptables.Rule {
	return iptables.Rule{"-m", "comment", "--comment", adminComment, "-j", admin}
}

// ipRules are the reference's two rules per address, plus the attachment's comment:
// replies to the container and everything from it are accepted.
func ipRules(att attachment, fam iptables.Family, ips []netip.Addr) []iptables.Rule {
	var out []iptables.Rule
	c := att.comment()
	for _, ip := range ips {
		if familyOf(ip) != fam {
			continue
		}
		p := hostPrefix(ip)
		out = append(out,
			iptables.Rule{"-d", p, "-m", "conntrack", "--ctstate", "RELATED,ESTABLISHED", "-m", "comment", "--comment", c, "-j", "ACCEPT"},
			iptables.Rule{"-s", p, "-m", "comment", "--comment", c, "-j", "ACCEPT"})
	}
	return out
}

// planShared queues the chains every attachment shares: FORWARD jumps first to
// CNI-FORWARD, whose first rule jumps to the admin chain. The admin chain is created
// empty and never flushed: it belongs to the operator. CNI-FORWARD is listed first:
// the attachment's rules, of two matches, are looked for there by meaning (Has), and
// FORWARD is asked about its jump alone.
func planShared(b *iptables.Batch, admin string) {
	b.EnsureChain(privChain)
	b.Chain(privChain)
	b.EnsureChain(admin)
	b.InsertRule(forwardChain, forwardRule())
	b.InsertRule(privChain, adminRule(admin))
}

// planRemove queues the deletion of the rules tagged with network's comments whose
// container field is stale.
func planRemove(b *iptables.Batch, network string, stale func(containerField string) bool) {
	b.DeleteRulesFunc(privChain, func(r iptables.Rule) bool {
		cid, ok := parseComment(network, r.Comment())
		return ok && stale(cid)
	})
}

// iptAdd installs the shared chains, the attachment's rules and the ingress policy, one
// restore per family that has addresses. A family done before a later one fails is
// undone through undo.
func iptAdd(ctx context.Context, conf *Config, att attachment, ips []netip.Addr, bridge string, push func(string, func() error)) error {
	for _, fam := range families {
		rules := ipRules(att, fam, ips)
		if len(rules) == 0 {
			continue
		}
		err := iptables.Update(ctx, fam, filterTable, func(b *iptables.Batch) error {
			planShared(b, conf.AdminChain)
			for _, r := range rules {
				b.AppendRule(privChain, r)
			}
			planIsolation(b, conf.IngressPolicy, bridge)
			return nil
		})
		if err != nil {
			return fmt.Errorf("firewall %s: %w", fam, err)
		}
		push("firewall rules "+fam.String(), func() error { return iptRemoveFamily(context.WithoutCancel(ctx), fam, att, nil) })
	}
	return nil
}

// iptRemoveFamily removes the attachment's rules of one family, found by their
// comment, and the reference plugin's rules of the addresses ips (adopt.go), in one
// restore.
func iptRemoveFamily(ctx context.Context, fam iptables.Family, att attachment, ips []netip.Addr) error {
	return iptables.Update(ctx, fam, filterTable, func(b *iptables.Batch) error {
		planRemove(b, att.network, func(id string) bool { return owner.Names(id, att.containerID) })
		planRemoveReference(b, fam, ips)
		return nil
	})
}

// iptDel removes the attachment's rules of both families, found by their comment, and
// the reference plugin's rules of the addresses prevResult gave (ips, none without
// it). The shared chains, the admin chain and the isolation rules (other attachments'
// too) stay.
func iptDel(ctx context.Context, att attachment, ips []netip.Addr) error {
	return removeEach("firewall", func(fam iptables.Family) error {
		err := iptRemoveFamily(ctx, fam, att, ips)
		if errors.Is(err, exec.ErrNotFound) {
			return nil // a filter table made by nft itself, and no iptables tools to have used it
		}
		return err
	})
}

// iptGC removes the rules of network's containers that are not in keep.
func iptGC(ctx context.Context, network string, keep owner.Set) error {
	return removeEach("firewall gc", func(fam iptables.Family) error {
		return iptables.Update(ctx, fam, filterTable, func(b *iptables.Batch) error {
			planRemove(b, network, func(id string) bool { return !keep.Has(id) })
			return nil
		})
	})
}

// removeEach runs remove for each family whose CNI-FORWARD may exist: one without it
// holds no rules, and no exec is spent finding that out. Every family is tried.
func removeEach(what string, remove func(iptables.Family) error) error {
	var errs []error
	for _, fam := range families {
		if !iptables.ChainsMayExist(fam, filterTable, privChain) {
			continue
		}
		if err := remove(fam); err != nil {
			errs = append(errs, fmt.Errorf("%s %s: %w", what, fam, err))
		}
	}
	return errors.Join(errs...)
}

// iptCheck verifies, per family with addresses, the jumps, the admin chain, the
// attachment's rules and the ingress policy's rules. Its error is errAbsent only when no
// family holds a rule of the attachment (ours or the reference's): one family without
// them beside another with them is damage.
func iptCheck(ctx context.Context, conf *Config, att attachment, ips []netip.Addr, bridge string) error {
	var absent error
	found := false
	for _, fam := range ipFamilies(ips) {
		err := iptables.Inspect(ctx, fam, filterTable, func(t *iptables.Table) error {
			return checkTable(t, conf, att, fam, ips, bridge)
		})
		switch {
		case err == nil:
			found = true
		case errors.Is(err, errAbsent):
			absent = cmp.Or(absent, fmt.Errorf("firewall check %s: %w", fam, err))
		default:
			return fmt.Errorf("firewall check %s: %w", fam, err)
		}
	}
	if absent != nil && found {
		return errors.New(absent.Error()) // the same words, but no longer errAbsent
	}
	return absent
}

// checkTable verifies one family's filter table. Every rule it looks for is asked
// about at once (one exec where all are there); CNI-FORWARD is listed only when one of
// the attachment's rules is not found as written, FORWARD never, and of the admin chain
// only its existence is asked.
func checkTable(t *iptables.Table, conf *Config, att attachment, fam iptables.Family, ips []netip.Addr, bridge string) error {
	t.Prefetch(append(chainProbes(sharedRules(conf, bridge)), addressProbes(att, fam, ips)...)...)
	var readErr error
	has := func(r iptables.Rule) bool {
		ok, err := t.Has(privChain, r)
		readErr = cmp.Or(readErr, err)
		return ok
	}
	err := checkShared(t, conf, bridge)
	if err == nil {
		err = checkAddresses(has, att, fam, ips)
	}
	if err != nil && !holdsAny(has, att, fam, ips) {
		err = markAbsent(err)
	}
	return cmp.Or(readErr, err)
}

// chainProbes are the lookups of rules, per chain, for Prefetch.
func chainProbes(rules map[string][]iptables.Rule) []iptables.Probe {
	var probes []iptables.Probe
	for chain, rs := range rules {
		for _, r := range rs {
			probes = append(probes, iptables.Probe{Chain: chain, Rule: r})
		}
	}
	return probes
}

// addressProbes are the lookups of the rules, ours and the reference's, of the
// attachment's addresses of family fam in CNI-FORWARD, for Prefetch.
func addressProbes(att attachment, fam iptables.Family, ips []netip.Addr) []iptables.Probe {
	var probes []iptables.Probe
	for _, ip := range ips {
		if familyOf(ip) == fam {
			for _, r := range append(ipRules(att, fam, []netip.Addr{ip}), referenceRules(ip)...) {
				probes = append(probes, iptables.Probe{Chain: privChain, Rule: r})
			}
		}
	}
	return probes
}

// checkShared verifies the admin chain and the jumps every attachment shares, with the
// ingress policy's rules for bridge.
func checkShared(t *iptables.Table, conf *Config, bridge string) error {
	if ok, err := t.Exists(conf.AdminChain); err != nil || !ok {
		return cmp.Or(err, fmt.Errorf("admin chain %s missing", conf.AdminChain))
	}
	return hasRules(t, sharedRules(conf, bridge))
}

// sharedRules are the rules every attachment shares, per chain: the jumps to
// CNI-FORWARD and to the admin chain, and the ingress policy's rules for bridge.
func sharedRules(conf *Config, bridge string) map[string][]iptables.Rule {
	want := map[string][]iptables.Rule{
		forwardChain: {forwardRule()},
		privChain:    {adminRule(conf.AdminChain)},
	}
	for chain, rs := range isolationRules(conf.IngressPolicy, bridge) {
		want[chain] = append(want[chain], rs...)
	}
	return want
}

// hasRules reports the first wanted rule the table lacks.
func hasRules(t *iptables.Table, want map[string][]iptables.Rule) error {
	for chain, rs := range want {
		if ok, err := t.Exists(chain); err != nil || !ok {
			return cmp.Or(err, fmt.Errorf("chain %s missing", chain))
		}
		for _, r := range rs {
			if has, err := t.Has(chain, r); err != nil || !has {
				return cmp.Or(err, fmt.Errorf("chain %s lacks %q", chain, r.String()))
			}
		}
	}
	return nil
}
