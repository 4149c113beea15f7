package firewall

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"github.com/cnikit/cni/internal/core/cnierror"
	"github.com/cnikit/cni/internal/host/iptables"
	"github.com/cnikit/cni/internal/host/sysctl"
)

// The Docker-style isolation chains of the reference's ingressPolicy. FORWARD jumps to
// stage 1 before CNI-FORWARD; stage 1 sends traffic entering from a policed bridge and
// leaving by another interface to stage 2, which drops it if that interface is a
// policed bridge. Traffic to and from the outside is untouched.
const (
	stage1Chain = "CNI-ISOLATION-STAGE-1"
	stage2Chain = "CNI-ISOLATION-STAGE-2"

	sameBridgeComment = "CNI firewall plugin rules (ingressPolicy: same-bridge)"
	isolatedComment   = "CNI firewall plugin rules (ingressPolicy: isolated)"
)

// withComment builds a rule from its interface matches and its target (the last two
// arguments, -j <target>), with the comment match between them, where both iptables
// flavours print it.
func withComment(comment string, r ...string) iptables.Rule {
	n := len(r) - 2 // the last two are -j <target>
	out := append(iptables.Rule{}, r[:n]...)
	out = append(out, "-m", "comment", "--comment", comment)
	return append(out, r[n:]...)
}

// isolationRules are the rules policy needs for bridge, per chain; none for "open".
// "isolated" adds a drop of traffic that enters and leaves by the bridge, so containers
// on one bridge cannot reach each other either (seen by iptables when the bridge hands
// frames to netfilter, net.bridge.bridge-nf-call-iptables=1, the kernel's default).
func isolationRules(policy, bridge string) map[string][]iptables.Rule {
	if policy == PolicyOpen || bridge == "" {
		return nil
	}
	out := map[string][]iptables.Rule{
		forwardChain: {withComment(sameBridgeComment, "-j", stage1Chain)},
		stage1Chain: {withComment(sameBridgeComment, "-i", bridge, "!", "-o", bridge, "-j", stage2Chain),
			withComment(sameBridgeComment, "-j", "RETURN")},
		stage2Chain: {withComment(sameBridgeComment, "-o", bridge, "-j", "DROP"),
			withComment(sameBridgeComment, "-j", "RETURN")},
	}
	if policy == PolicyIsolated {
		out[stage1Chain] = append([]iptables.Rule{withComment(isolatedComment, "-i", bridge, "-o", bridge, "-j", "DROP")},
			out[stage1Chain]...)
	}
	return out
}

// planIsolation queues the isolation chains and the bridge's rules: bridge rules go
// first in their chain and each chain ends in one RETURN, as the reference orders them.
// The FORWARD jump to stage 1 is inserted after the CNI-FORWARD jump was, so it comes
// first. Per-bridge rules are shared by every attachment of the bridge and stay on DEL.
func planIsolation(b *iptables.Batch, policy, bridge string) {
	rules := isolationRules(policy, bridge)
	if rules == nil {
		return
	}
	b.EnsureChain(stage1Chain)
	b.EnsureChain(stage2Chain)
	b.Prefetch(chainProbes(rules)...) // where the chains exist, one exec asks about every rule
	for _, chain := range []string{stage1Chain, stage2Chain} {
		rs := rules[chain]
		ret := rs[len(rs)-1]
		for i := len(rs) - 2; i >= 0; i-- {
			b.InsertRule(chain, rs[i])
		}
		b.AppendRule(chain, ret)
	}
	b.InsertRule(forwardChain, rules[forwardChain][0])
}

// iptIsolation installs only the ingress policy, for the firewalld backend.
func iptIsolation(ctx context.Context, conf *Config, ips []netip.Addr, bridge string) error {
	if isolationRules(conf.IngressPolicy, bridge) == nil {
		return nil
	}
	for _, fam := range ipFamilies(ips) {
		err := iptables.Update(ctx, fam, filterTable, func(b *iptables.Batch) error {
			planIsolation(b, conf.IngressPolicy, bridge)
			return nil
		})
		if err != nil {
			return fmt.Errorf("firewall ingressPolicy %s: %w", fam, err)
		}
	}
	return nil
}

// iptCheckIsolation verifies only the ingress policy, for the firewalld backend.
func iptCheckIsolation(ctx context.Context, conf *Config, ips []netip.Addr, bridge string) error {
	want := isolationRules(conf.IngressPolicy, bridge)
	if want == nil {
		return nil
	}
	for _, fam := range ipFamilies(ips) {
		err := iptables.Inspect(ctx, fam, filterTable, func(t *iptables.Table) error { return hasRules(t, want) })
		if err != nil {
			return fmt.Errorf("firewall check %s: %w", fam, err)
		}
	}
	return nil
}

// ipFamilies are the families of ips, IPv4 first.
func ipFamilies(ips []netip.Addr) []iptables.Family {
	var out []iptables.Family
	for _, fam := range families {
		if slices.ContainsFunc(ips, func(a netip.Addr) bool { return familyOf(a) == fam }) {
			out = append(out, fam)
		}
	}
	return out
}

// bridgedTrafficIsFiltered refuses "isolated" where frames crossing a bridge never reach
// iptables (br_netfilter not loaded, or bridge-nf-call-iptables off in this namespace):
// the same-bridge drop would silently do nothing, which the reference never tells.
func bridgedTrafficIsFiltered(policy string) error {
	if policy != PolicyIsolated {
		return nil
	}
	const name = "net/bridge/bridge-nf-call-iptables"
	v, err := sysctl.Get(name)
	if err != nil {
		return cnierror.Newf(cnierror.CodeInvalidConfig,
			"ingressPolicy: %q needs bridged traffic to pass iptables, but %s is unavailable (load br_netfilter): %v",
			policy, name, err)
	}
	if strings.TrimSpace(v) != "1" {
		return cnierror.Newf(cnierror.CodeInvalidConfig,
			"ingressPolicy: %q needs bridged traffic to pass iptables, but %s is %s", policy, name, strings.TrimSpace(v))
	}
	return nil
}
