package portmap

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"

	"github.com/cnikit/cni/internal/core/steps"
	"github.com/cnikit/cni/internal/host/iptables"
	"github.com/cnikit/cni/internal/host/netfilter"
	"github.com/cnikit/cni/internal/host/nftexpr"
	"github.com/cnikit/cni/internal/spec/skel"
)

// Adopting the reference plugin's mappings. On a node whose plugins were replaced under
// running pods, a pod's mappings may be the reference's. Its iptables layout is ours,
// chain for chain, so DEL and GC handle it as our own; CHECK only has to find it when
// we would have chosen nftables (the reference picks iptables whenever iptables works).
// Its nftables layout (v1.6+, `"backend": "nftables"`) is its own:
//
//	table ip cni_hostport {            # and table ip6 cni_hostport
//	  chain hostports { tcp dport 8080 dnat to 10.1.0.5:80 comment "<containerID>" ... }
//	  chain hostip_hostports { }       # held mappings with a hostIP before v1.7
//	  chain masquerading { ip saddr 10.1.0.5 ip daddr 10.1.0.5 masquerade comment "<containerID>"
//	                       ip saddr 127.0.0.1 ip daddr 10.1.0.5 masquerade comment "<containerID>" }
//	  ... base chains prerouting, output, hostports_all that hold no pod's rules
//	}
//
// Its rules name the container id and nothing else: DEL removes those of the container
// (only those reaching the addresses prevResult gives, when it gives any: the reference
// itself removes every rule of the id, another network's too), CHECK accepts them in
// place of ours, and GC, which cannot tell which network they belong to, leaves them.
// What GC left goes at the latest when IPAM hands the address out again: ADD removes
// the rules of the reference's reaching the new pod's addresses whose container is
// provably gone (no entry of the runtime's result cache names it, or those that do
// name network namespaces that are gone: liveness.go); the same address may be a live
// pod's on another network, whose rules stay.
// The base chains stay, as the reference leaves them.
const refTableName = "cni_hostport"

// refRuleChains are the reference's chains that hold a pod's rules.
var refRuleChains = []string{"hostports", "hostip_hostports", "masquerading"}

// refTables returns the reference's tables on this node, found with one dump of the
// table list: none on a node that never ran the reference's nftables backend.
func refTables(c *nftables.Conn) ([]*nftables.Table, error) {
	all, err := c.ListTablesOfFamily(nftables.TableFamilyUnspecified)
	if err != nil {
		return nil, fmt.Errorf("nftables: list tables: %w", err)
	}
	return slices.DeleteFunc(all, func(t *nftables.Table) bool {
		return t.Name != refTableName || (t.Family != nftables.TableFamilyIPv4 && t.Family != nftables.TableFamilyIPv6)
	}), nil
}

// refRules returns the rules in the reference's chains of table t that match.
func refRules(c *nftables.Conn, t *nftables.Table, match func(*nftables.Rule) bool) ([]*nftables.Rule, error) {
	var out []*nftables.Rule
	for _, name := range refRuleChains {
		rules, err := c.GetRules(t, &nftables.Chain{Name: name, Table: t})
		if err != nil && !netfilter.IsNotExist(err) {
			return nil, fmt.Errorf("nftables: list %s %s: %w", refTableName, name, err)
		}
		for _, r := range rules {
			if match(r) {
				out = append(out, r)
			}
		}
	}
	return out, nil
}

// refTarget is the container address a reference rule reaches: the dnat target of a
// hostports rule, the destination a masquerading rule matches.
func refTarget(r *nftables.Rule, v6 bool) (netip.Addr, bool) {
	if to, ok := nftexpr.DNATTo(r.Exprs); ok {
		return to.Addr(), true
	}
	b, ok := nftexpr.Value(r.Exprs, nftexpr.Daddr(v6))
	a, _ := netip.AddrFromSlice(b)
	return a, ok
}

// removeReference removes the reference's nftables rules of the container cid, in one
// transaction for both families, and returns the mappings they made. With targets
// (the container's addresses), only rules reaching one of them go. A node without the
// reference's tables costs one table-list dump.
func (b nftBackend) removeReference(ctx context.Context, cid string, targets []netip.Addr) ([]flow, error) {
	return b.removeReferenceRules(ctx, "the rules of "+cid, func(r *nftables.Rule, target netip.Addr, ok bool) bool {
		return ruleComment(r) == cid && (len(targets) == 0 || ok && slices.Contains(targets, target))
	})
}

// removeStale is ADD's removal of the reference's rules reaching the pod's addresses
// that were made for a container provably gone (nftBackend.removeStale), and of their
// mappings' conntrack entries. What it removes, and what it keeps although it reaches
// the pod's addresses, it says on stderr with the reason.
func removeStale(req *skel.Request) error {
	cid := req.Args.ContainerID
	live := readLiveness(req)
	defer live.close()
	decided := map[string]string{}
	var order []string
	isGone := func(owner string) bool {
		if owner == cid {
			return false
		}
		ok, why := live.gone(owner)
		if _, seen := decided[owner]; !seen {
			order = append(order, owner)
			verb := "kept"
			if ok {
				verb = "removed"
			}
			decided[owner] = fmt.Sprintf("portmap: %s the reference's %s rules of container %s reaching %s, the addresses of container %s: %s",
				verb, refTableName, owner, req.PrevResult.Addrs(), cid, why)
		}
		return ok
	}
	flows, err := nftBackend{}.removeStale(req.Context(), req.PrevResult.Addrs(), isGone)
	if err != nil {
		return fmt.Errorf("portmap: the reference's stale mappings to %s's addresses: %w", cid, err)
	}
	for _, owner := range order {
		fmt.Fprintln(req.Stderr, decided[owner])
	}
	return forgetFlows(req.Context(), flows)
}

// removeStale removes the reference's nftables rules reaching any of addrs whose
// container (the rule's comment) is gone, and returns the mappings they made. ADD calls
// it with the new pod's addresses: a rule of the reference's reaching them made for a
// pod that is gone without a DEL (a GC, which cannot take the rules as its network's, or
// a lost cache entry) would hand that pod's host ports to this one. Only gone decides:
// the same address may be a live pod's on another network (overlapping ranges, static
// IPAM, the ips capability), whose host ports must stay. A node without the reference's
// tables costs one table-list dump.
func (b nftBackend) removeStale(ctx context.Context, addrs []netip.Addr, gone func(containerID string) bool) ([]flow, error) {
	if len(addrs) == 0 {
		return nil, nil
	}
	return b.removeReferenceRules(ctx, fmt.Sprint("the rules reaching ", addrs), func(r *nftables.Rule, target netip.Addr, ok bool) bool {
		return ok && slices.Contains(addrs, target) && gone(ruleComment(r))
	})
}

// removeReferenceRules removes the rules of the reference's tables that match, given
// the container address each reaches (refTarget), in one transaction for both
// families, and returns the mappings they made. what names the rules in errors.
func (b nftBackend) removeReferenceRules(ctx context.Context, what string, match func(r *nftables.Rule, target netip.Addr, ok bool) bool) (_ []flow, err error) {
	defer steps.Begin(ctx, steps.Firewall).End(&err)
	c, err := b.newConn()
	if err != nil {
		return nil, nil // no nf_tables: nothing of the reference's can exist
	}
	defer c.CloseLasting()
	tables, err := refTables(c)
	if err != nil || len(tables) == 0 {
		return nil, err
	}
	var flows []flow
	for _, t := range tables {
		v6 := t.Family == nftables.TableFamilyIPv6
		rules, err := refRules(c, t, func(r *nftables.Rule) bool {
			target, ok := refTarget(r, v6)
			return match(r, target, ok)
		})
		if err != nil {
			return nil, err
		}
		for _, r := range rules {
			if err := c.DelRule(r); err != nil {
				return nil, fmt.Errorf("nftables: %s: %w", refTableName, err)
			}
			if f, ok := refFlow(r.Exprs); ok {
				flows = append(flows, f)
			}
		}
	}
	if err := c.Flush(); err != nil {
		return nil, fmt.Errorf("nftables: remove %s in %s: %w", what, refTableName, err)
	}
	return flows, nil
}

// refFlow reads the mapping of a reference hostports rule: `tcp dport 8080 ... dnat to
// 10.1.0.5:80`.
func refFlow(exprs []expr.Any) (flow, bool) {
	to, ok := nftexpr.DNATTo(exprs)
	proto, okProto := nftexpr.Value(exprs, nftexpr.L4Proto)
	port, okPort := nftexpr.Value(exprs, nftexpr.THDport)
	if !ok || !okProto || !okPort || len(proto) != 1 || len(port) != 2 {
		return flow{}, false
	}
	for _, p := range protocols {
		if proto[0] == p.number {
			return flow{proto: p.name, hostPort: uint16(port[0])<<8 | uint16(port[1]), target: to.Addr()}, true
		}
	}
	return flow{}, false
}

// errNothing marks a check that found nothing of the attachment in the place it looked.
var errNothing = errors.New("nothing of the attachment")

// checkAdopted is CHECK of an attachment the chosen backend holds nothing of: the
// iptables layout (the reference's default, ours too) when nftables was chosen, then
// the reference's nftables rules. What is found is checked as it stands; when nothing
// is, the chosen backend's error (failed) stands.
func checkAdopted(ctx context.Context, chosen netfilter.Backend, o attachment, s *settings, fams []family, failed error) error {
	if chosen == netfilter.NFTables {
		if holds, err := (nftBackend{}).holds(o.hash()); err != nil || holds {
			return failed
		}
		if iptHolds(o.hash()) {
			return iptBackend{}.check(ctx, o, s, fams)
		}
	} else if iptHolds(o.hash()) {
		return failed
	}
	if err := (nftBackend{}).checkReference(ctx, o.cid, s, fams); !errors.Is(err, errNothing) {
		return err
	}
	return failed
}

// holds tells whether either family's table has the attachment's dn- chain.
func (b nftBackend) holds(hash string) (bool, error) {
	c, err := b.newConn()
	if err != nil {
		return false, err
	}
	defer c.CloseLasting()
	for _, v6 := range []bool{false, true} {
		if ok, err := newNFTFamily(v6).chainExists(c, nftDNPrefix+hash); ok || err != nil {
			return ok, err
		}
	}
	return false, nil
}

// iptHolds tells whether either family may have the attachment's CNI-DN chain.
func iptHolds(hash string) bool {
	dn := iptDNPrefix + hash
	return iptables.ChainsMayExist(iptables.IPv4, "nat", dn) || iptables.ChainsMayExist(iptables.IPv6, "nat", dn)
}

// checkReference verifies the reference's nftables rules of the container cid: per
// family, a hostports rule for each mapping (protocol, host port, host address, dnat
// target) and, with snat, the masquerading rules of hairpin and (IPv4) localhost
// traffic. It is errNothing when no rule of the container exists.
func (b nftBackend) checkReference(ctx context.Context, cid string, s *settings, fams []family) (err error) {
	defer steps.Begin(ctx, steps.Firewall).End(&err)
	c, err := b.newConn()
	if err != nil {
		return errNothing
	}
	defer c.CloseLasting()
	tables, err := refTables(c)
	if err != nil {
		return err
	}
	found := false
	for _, fa := range fams {
		// refTables holds only IPv4 and IPv6 tables.
		i := slices.IndexFunc(tables, func(t *nftables.Table) bool { return (t.Family == nftables.TableFamilyIPv6) == fa.v6 })
		var rules []*nftables.Rule
		if i >= 0 {
			if rules, err = refRules(c, tables[i], func(r *nftables.Rule) bool { return ruleComment(r) == cid }); err != nil {
				return err
			}
		}
		if len(rules) == 0 {
			continue
		}
		found = true
		if err := checkReferenceFamily(rules, s, fa); err != nil {
			return err
		}
	}
	if !found {
		return errNothing
	}
	return nil
}

func checkReferenceFamily(rules []*nftables.Rule, s *settings, fa family) error {
	target := fa.addr.Addr()
	for _, m := range fa.mappings {
		if !slices.ContainsFunc(rules, func(r *nftables.Rule) bool { return refMaps(r.Exprs, m, target) }) {
			return fmt.Errorf("nftables: %s has no rule for port mapping %s", refTableName, nftMapping{mapping: m, target: target}.record())
		}
	}
	if !s.snat {
		return nil
	}
	sources := []netip.Addr{target}
	if !fa.v6 {
		sources = append(sources, netip.MustParseAddr("127.0.0.1"))
	}
	for _, src := range sources {
		if !slices.ContainsFunc(rules, func(r *nftables.Rule) bool { return refMasquerades(r.Exprs, src, target) }) {
			return fmt.Errorf("nftables: %s does not masquerade %s to %s", refTableName, src, target)
		}
	}
	return nil
}

// refMaps tells whether exprs is the reference's rule of mapping m to target:
// `[ip daddr <hostIP>] tcp dport <hostPort> dnat to <target>:<containerPort>`.
func refMaps(exprs []expr.Any, m mapping, target netip.Addr) bool {
	to, ok := nftexpr.DNATTo(exprs)
	if !ok || to != netip.AddrPortFrom(target, m.containerPort) ||
		!nftexpr.Has(exprs, nftexpr.L4Proto, expr.CmpOpEq, []byte{protoNumber(m.proto)}) ||
		!nftexpr.Has(exprs, nftexpr.THDport, expr.CmpOpEq, nftexpr.Port(m.hostPort)) {
		return false
	}
	return !m.hostIP.IsValid() ||
		nftexpr.HasPrefix(exprs, nftexpr.Daddr(m.hostIP.Is6()), expr.CmpOpEq, netip.PrefixFrom(m.hostIP, m.hostIP.BitLen()))
}

// refMasquerades tells whether exprs is `ip saddr <src> ip daddr <dst> masquerade`.
func refMasquerades(exprs []expr.Any, src, dst netip.Addr) bool {
	v6 := dst.Is6()
	return nftexpr.Masquerades(exprs) &&
		nftexpr.HasPrefix(exprs, nftexpr.Saddr(v6), expr.CmpOpEq, netip.PrefixFrom(src, src.BitLen())) &&
		nftexpr.HasPrefix(exprs, nftexpr.Daddr(v6), expr.CmpOpEq, netip.PrefixFrom(dst, dst.BitLen()))
}
