package firewall

import (
	"cmp"
	"errors"
	"fmt"
	"net/netip"
	"slices"

	"github.com/google/nftables"

	"github.com/cnikit/cni/internal/host/netfilter"
	"github.com/cnikit/cni/internal/host/nftexpr"
	"github.com/cnikit/cni/internal/host/owner"
)

// nftAttempts bounds the transactions of one ADD: a concurrent first ADD (the table
// made twice) or a concurrent change of the base chain each cost one more.
const nftAttempts = 5

func nftConn() (*nftables.Conn, error) {
	c, err := nftables.New(nftables.AsLasting())
	if err != nil {
		return nil, fmt.Errorf("firewall: nftables: %w", err)
	}
	return c, nil
}

// nftAdd adds the attachment's addresses to the sets, the shared layout where it is
// missing, damaged or lacks the config's admin chain, and the ingress policy's
// elements for bridge: one transaction, which either all lands or changes nothing.
func nftAdd(conf *Config, att attachment, ips []netip.Addr, bridge string) error {
	if len(ips) == 0 {
		return nil
	}
	return nftTransact(nftPlan(conf, att, ips, bridge))
}

// nftIsolation installs the shared layout and the ingress policy's elements for bridge
// only: the firewalld backend's ingress policy on a node whose rule backend is nftables.
func nftIsolation(conf *Config, bridge string) error {
	if len(policyElements(newNFTLayout(), conf.IngressPolicy, bridge)) == 0 {
		return nil
	}
	return nftTransact(nftPlan(conf, attachment{}, nil, bridge))
}

// nftPlan is the plan of ADD's transaction: the shared layout, an element per address
// (none for nftIsolation's), and the ingress policy's elements.
func nftPlan(conf *Config, att attachment, ips []netip.Addr, bridge string) func(*nftables.Conn, *nftLayout) error {
	return func(c *nftables.Conn, l *nftLayout) error {
		if err := l.planBase(c, conf); err != nil {
			return err
		}
		if err := l.planAttachment(c, att, ips); err != nil {
			return err
		}
		return l.queuePolicy(c, conf.IngressPolicy, bridge)
	}
}

// nftTransact plans on a fresh read and sends the plan as one transaction, again on a
// fresh read when the kernel refuses it (another ADD changed what was read).
func nftTransact(plan func(c *nftables.Conn, l *nftLayout) error) error {
	c, err := nftConn()
	if err != nil {
		return err
	}
	defer c.CloseLasting()
	l := newNFTLayout()
	for try := 1; ; try++ {
		if err := plan(c, l); err != nil {
			return err
		}
		err := c.Flush()
		if err == nil {
			return nil
		}
		if try == nftAttempts {
			return fmt.Errorf("firewall: nftables: %w", err)
		}
	}
}

// planBase queues what the shared layout lacks for conf.
func (l *nftLayout) planBase(c *nftables.Conn, conf *Config) error {
	base, err := l.readBase(c)
	if err != nil {
		return err
	}
	if base.intact && slices.Contains(base.admins, conf.AdminChain) {
		return nil
	}
	return l.queueBase(c, base, conf.AdminChain)
}

// planAttachment queues an element per address, commented with the attachment. An
// address another attachment still holds (its DEL never came) is taken: the newest
// holder of an address is the one it belongs to. One lookup per address.
func (l *nftLayout) planAttachment(c *nftables.Conn, att attachment, ips []netip.Addr) error {
	comment := att.nftComment()
	for _, a := range ips {
		set := l.addrSet(a)
		e, err := netfilter.GetElement(set.Table.Family, set.Table.Name, set.Name, a.AsSlice())
		switch {
		case err == nil && e.Comment == comment:
			continue
		case err == nil:
			if err := c.SetDeleteElements(set, []nftables.SetElement{{Key: a.AsSlice()}}); err != nil {
				return err
			}
		case !netfilter.IsNotExist(err):
			return fmt.Errorf("firewall: nftables set %s: %w", set.Name, err)
		}
		if err := c.SetAddElements(set, []nftables.SetElement{{Key: a.AsSlice(), Comment: comment}}); err != nil {
			return fmt.Errorf("firewall: nftables set %s: %w", set.Name, err)
		}
	}
	return nil
}

// queuePolicy adds the bridge to the ingress policy's sets. Elements are only ever added
// (a bridge once isolated stays so), as the iptables backend's rules accumulate.
func (l *nftLayout) queuePolicy(c *nftables.Conn, policy, bridge string) error {
	for s, key := range policyElements(l, policy, bridge) {
		if err := c.SetAddElements(s, []nftables.SetElement{{Key: key}}); err != nil {
			return fmt.Errorf("firewall: nftables set %s: %w", s.Name, err)
		}
	}
	return nil
}

// policyElements are the set elements policy needs for bridge; none for "open".
func policyElements(l *nftLayout, policy, bridge string) map[*nftables.Set][]byte {
	if policy == PolicyOpen || bridge == "" {
		return nil
	}
	name := nftexpr.IfName(bridge)
	pair := nftexpr.Key(name, name)
	out := map[*nftables.Set][]byte{l.policed: name, l.sameBridge: pair}
	if policy == PolicyIsolated {
		out[l.isolated] = pair
	}
	return out
}

// rules returns a chain's rules and whether it exists. The kernel lists no rules, not
// an error, for a chain that does not exist, so an empty answer costs one more lookup.
func (l *nftLayout) rules(c *nftables.Conn, name string) ([]*nftables.Rule, bool, error) {
	rules, err := c.GetRules(l.table, l.chain(name))
	if err == nil && len(rules) == 0 {
		_, err = c.ListChain(l.table, name)
	}
	if netfilter.IsNotExist(err) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("firewall: nftables chain %s: %w", name, err)
	}
	return rules, true, nil
}

// nftDel removes the elements commented with the attachment, found by the comment alone
// (no addresses needed): one read of each set and one transaction. A kernel without
// nf_tables, or a node without the table, holds nothing of ours.
func nftDel(att attachment) error {
	comment := att.nftComment()
	return nftRemove(func(c string) bool { return c == comment })
}

// nftGC removes the elements of network's attachments whose container is not in valid.
func nftGC(network string, valid []string) error {
	keep := owner.NewSet(valid...)
	return nftRemove(func(comment string) bool {
		net, id, ok := owner.ParseTag("", comment)
		return ok && owner.Names(net, network) && !keep.Has(id)
	})
}

// nftRemove deletes, in one transaction, every address element whose comment matches.
func nftRemove(match func(comment string) bool) error {
	c, err := nftables.New(nftables.AsLasting())
	if err != nil {
		return nil
	}
	defer c.CloseLasting()
	l := newNFTLayout()
	if _, err := c.ListTableOfFamily(nftTableName, nftables.TableFamilyINet); err != nil {
		return nil
	}
	queued := 0
	for _, set := range []*nftables.Set{l.ctr4, l.ctr6} {
		elems, err := c.GetSetElements(set)
		if netfilter.IsNotExist(err) {
			continue
		}
		if err != nil {
			return fmt.Errorf("firewall: nftables set %s: %w", set.Name, err)
		}
		var drop []nftables.SetElement
		for _, e := range elems {
			if match(e.Comment) {
				drop = append(drop, nftables.SetElement{Key: e.Key})
			}
		}
		if len(drop) > 0 {
			if err := c.SetDeleteElements(set, drop); err != nil {
				return err
			}
			queued += len(drop)
		}
	}
	if queued == 0 {
		return nil
	}
	if err := c.Flush(); err != nil {
		return fmt.Errorf("firewall: nftables: %w", err)
	}
	return nil
}

// nftCheck verifies the base chain and its jump to the config's admin chain, the admin
// chain, the attachment's elements and the ingress policy's elements.
func nftCheck(conf *Config, att attachment, ips []netip.Addr, bridge string) error {
	if len(ips) == 0 {
		return nil
	}
	return nftRead(func(c *nftables.Conn, l *nftLayout) error {
		return errors.Join(l.checkBase(c, conf), l.checkAttachment(att, ips), l.checkPolicy(c, conf.IngressPolicy, bridge))
	})
}

// nftRead runs a CHECK's read on a fresh connection and layout.
func nftRead(read func(c *nftables.Conn, l *nftLayout) error) error {
	c, err := nftConn()
	if err != nil {
		return err
	}
	defer c.CloseLasting()
	if err := read(c, newNFTLayout()); err != nil {
		return fmt.Errorf("firewall check: nftables: %w", err)
	}
	return nil
}

func (l *nftLayout) checkBase(c *nftables.Conn, conf *Config) error {
	base, err := l.readBase(c)
	if err != nil {
		return err
	}
	if !base.intact {
		return fmt.Errorf("chain %s missing or incomplete", nftForwardChain)
	}
	if !slices.Contains(base.admins, conf.AdminChain) {
		return fmt.Errorf("chain %s lacks the jump to admin chain %s", nftForwardChain, conf.AdminChain)
	}
	if _, exists, err := l.rules(c, conf.AdminChain); err != nil || !exists {
		return fmt.Errorf("admin chain %s missing (%v)", conf.AdminChain, err)
	}
	return nil
}

// checkAttachment looks each address up once: its element must be there, the
// attachment's. When no address's element is the attachment's, the error is errAbsent:
// the attachment may be one the reference set up in iptables (checkAdopted).
func (l *nftLayout) checkAttachment(att attachment, ips []netip.Addr) error {
	comment := att.nftComment()
	var missing error
	held := false
	for _, a := range ips {
		set := l.addrSet(a)
		e, err := netfilter.GetElement(set.Table.Family, set.Table.Name, set.Name, a.AsSlice())
		switch {
		case err != nil && !netfilter.IsNotExist(err):
			return err
		case err != nil:
			missing = cmp.Or(missing, fmt.Errorf("%s not in set %s", a, set.Name))
		case e.Comment != comment:
			missing = cmp.Or(missing, fmt.Errorf("%s in set %s is another attachment's (%q)", a, set.Name, e.Comment))
		default:
			held = true
		}
	}
	if missing != nil && !held {
		return markAbsent(missing)
	}
	return missing
}

// holds tells whether the element of any of the addresses is the attachment's. A set
// that cannot be read holds nothing of it.
func (l *nftLayout) holds(att attachment, ips []netip.Addr) bool {
	comment := att.nftComment()
	return slices.ContainsFunc(ips, func(a netip.Addr) bool {
		set := l.addrSet(a)
		e, err := netfilter.GetElement(set.Table.Family, set.Table.Name, set.Name, a.AsSlice())
		return err == nil && e.Comment == comment
	})
}

// nftCheckIsolation verifies the ingress policy's elements only, for the firewalld
// backend.
func nftCheckIsolation(conf *Config, bridge string) error {
	return nftRead(func(c *nftables.Conn, l *nftLayout) error { return l.checkPolicy(c, conf.IngressPolicy, bridge) })
}

func (l *nftLayout) checkPolicy(c *nftables.Conn, policy, bridge string) error {
	want := policyElements(l, policy, bridge)
	if len(want) == 0 {
		return nil
	}
	if rules, _, err := l.rules(c, nftIsolationChain); err != nil || len(rules) != len(l.isolationRules()) {
		return fmt.Errorf("chain %s missing or incomplete (%v)", nftIsolationChain, err)
	}
	for s, key := range want {
		if _, err := netfilter.GetElement(s.Table.Family, s.Table.Name, s.Name, key); err != nil {
			return fmt.Errorf("ingressPolicy %s: bridge %s not in set %s: %w", policy, bridge, s.Name, err)
		}
	}
	return nil
}
