package masq

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
	"github.com/google/nftables/userdata"

	"github.com/cnikit/cni/internal/core/steps"
	"github.com/cnikit/cni/internal/host/iptables"
	"github.com/cnikit/cni/internal/host/netfilter"
	"github.com/cnikit/cni/internal/host/nftexpr"
)

// Adopting the reference plugins' masquerade. On a node whose plugins were replaced
// under running pods, an attachment's masquerade may be the reference's: in the
// iptables layout, which is ours too and which the reference picks whenever iptables
// works (Detect picks nftables where no legacy table is in use), or in the reference's
// nftables table (ipMasqBackend "nftables"). Teardown and GC always clean both; CHECK
// looks there only when the chosen backend holds nothing of the attachment, so a node
// without reference state pays nothing for it.

// errAbsent marks a check that found nothing of the attachment, as opposed to state
// that is there but damaged: only then is the reference's state looked for.
var errAbsent = errors.New("missing")

// checkAdopted checks the attachment's masquerade where the chosen backend holds none
// (absent is that backend's error): the iptables layout unless that was the backend
// checked (the reference's default), else our own nftables layout, then the
// reference's nftables table. Our nftables layout is looked for because the rule's
// answer can change under an attachment: an nftables node whose host later keeps
// rules of its own in iptables (Docker, kube-proxy) is an iptables node for the CHECK
// of every pod set up before. State found anywhere is checked as it stands; none
// anywhere is absent.
func checkAdopted(ctx context.Context, chosen netfilter.Backend, att Attachment, ips []netip.Prefix, absent error) error {
	if chosen != netfilter.IPTables && iptTablesInUse() {
		if err := iptCheck(ctx, att, ips); !errors.Is(err, errAbsent) {
			return err
		}
	}
	if chosen != netfilter.NFTables {
		if err := steps.Begin(ctx, steps.Firewall).Done(nftCheck(att, ips)); !errors.Is(err, errAbsent) {
			return err
		}
	}
	if err := steps.Begin(ctx, steps.Firewall).Done(refCheck(att, ips)); !errors.Is(err, errAbsent) {
		return err
	}
	return absent
}

// iptTablesInUse tells, without an exec, whether either family has a nat table that
// could hold the reference's chains.
func iptTablesInUse() bool {
	return slices.ContainsFunc(families[:], func(f iptables.Family) bool { return iptables.TableInUse(f, natTable) })
}

// refCheck verifies the reference's nftables masquerade of the attachment: for each
// address a rule in masq_checks, tagged with the attachment's instance hash, that
// masquerades what the address sends outside its subnet (`ip saddr 10.1.0.5 ip daddr
// != 10.1.0.0/24 masquerade`), and the base chain going to masq_checks.
func refCheck(att Attachment, ips []netip.Prefix) error {
	c, err := conn()
	if err != nil {
		return fmt.Errorf("masquerade check: %w", errAbsent)
	}
	defer c.CloseLasting()
	t, err := c.ListTableOfFamily(refTableName, nftables.TableFamilyINet)
	if err != nil {
		return fmt.Errorf("masquerade check: nftables table %s %w", refTableName, errAbsent)
	}
	rules, err := c.GetRules(t, &nftables.Chain{Name: refChainName, Table: t})
	if err != nil && !netfilter.IsNotExist(err) {
		return fmt.Errorf("masquerade check: nftables chain %s %s: %w", refTableName, refChainName, err)
	}
	instance := refInstanceHash(att.Network, att.IfName, att.ContainerID)
	rules = slices.DeleteFunc(rules, func(r *nftables.Rule) bool {
		comment, _ := userdata.GetString(r.UserData, userdata.TypeComment)
		return !strings.HasPrefix(comment, instance)
	})
	if len(rules) == 0 {
		return fmt.Errorf("masquerade check: nftables chain %s %s: rules of %s %w", refTableName, refChainName, instance, errAbsent)
	}
	for _, p := range ips {
		if !slices.ContainsFunc(rules, func(r *nftables.Rule) bool { return refMasquerades(r.Exprs, p) }) {
			return fmt.Errorf("masquerade check: nftables chain %s %s does not masquerade %s", refTableName, refChainName, p.Addr())
		}
	}
	base, err := c.GetRules(t, &nftables.Chain{Name: nftBaseChain, Table: t})
	if err != nil || !slices.ContainsFunc(base, func(r *nftables.Rule) bool { return nftexpr.VerdictChain(r.Exprs) == refChainName }) {
		return fmt.Errorf("masquerade check: nftables chain %s %s does not go to %s", refTableName, nftBaseChain, refChainName)
	}
	return nil
}

// refMasquerades tells whether exprs is the reference's rule for the address p:
// `ip saddr <addr> ip daddr != <subnet> masquerade`.
func refMasquerades(exprs []expr.Any, p netip.Prefix) bool {
	a := p.Addr()
	return nftexpr.HasPrefix(exprs, nftexpr.Saddr(a.Is6()), expr.CmpOpEq, netip.PrefixFrom(a, a.BitLen())) &&
		nftexpr.HasPrefix(exprs, nftexpr.Daddr(a.Is6()), expr.CmpOpNeq, p.Masked()) &&
		nftexpr.Masquerades(exprs)
}
