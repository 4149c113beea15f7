package firewall

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"github.com/google/nftables"

	"github.com/cnikit/cni/internal/netfilter"
	"github.com/cnikit/cni/internal/nftexpr"
	"github.com/cnikit/cni/internal/owner"
)

// nftAttempts bounds the transactions of one ADD: a concurrent first ADD (the table
// made twice), a concurrent change of the base chain or an address still claimed by an
// attachment whose DEL never came each cost one more.
const nftAttempts = 5

func nftConn() (*nftables.Conn, error) {
	c, err := nftables.New(nftables.AsLasting())
	if err != nil {
		return nil, fmt.Errorf("firewall: nftables: %w", err)
	}
	return c, nil
}

// nftAdd installs the attachment's chain and map elements, the shared layout where it
// is missing, damaged or lacks the config's admin chain, and the ingress policy's
// elements for bridge: one transaction, which either all lands or changes nothing.
func nftAdd(conf *Config, att attachment, ips []netip.Addr, bridge string) error {
	if len(ips) == 0 {
		return nil
	}
	return nftTransact(func(c *nftables.Conn, l *nftLayout, retry bool) error {
		if err := l.planBase(c, conf); err != nil {
			return err
		}
		if err := l.planAttachment(c, att, ips, retry); err != nil {
			return err
		}
		return l.queuePolicy(c, conf.IngressPolicy, bridge)
	})
}

// nftIsolation installs the shared layout and the ingress policy's elements for bridge
// only: the firewalld backend's ingress policy on a node whose rule backend is nftables.
func nftIsolation(conf *Config, bridge string) error {
	if len(policyElements(newNFTLayout(), conf.IngressPolicy, bridge)) == 0 {
		return nil
	}
	return nftTransact(func(c *nftables.Conn, l *nftLayout, _ bool) error {
		if err := l.planBase(c, conf); err != nil {
			return err
		}
		return l.queuePolicy(c, conf.IngressPolicy, bridge)
	})
}

// nftTransact plans on a fresh read and sends the plan as one transaction, again on a
// fresh read (retry true) when the kernel refuses it.
func nftTransact(plan func(c *nftables.Conn, l *nftLayout, retry bool) error) error {
	c, err := nftConn()
	if err != nil {
		return err
	}
	defer c.CloseLasting()
	l := newNFTLayout()
	for try := 1; ; try++ {
		if err := plan(c, l, try > 1); err != nil {
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

// planAttachment queues the attachment's chain, its map elements and the removal of
// the elements of addresses an earlier ADD gave it; on a retry it also takes its
// addresses from other attachments.
func (l *nftLayout) planAttachment(c *nftables.Conn, att attachment, ips []netip.Addr, takeOver bool) error {
	name := att.nftChainName()
	old, _, err := l.rules(c, name)
	if err != nil {
		return err
	}
	ch := c.AddChain(l.chain(name))
	c.FlushChain(ch)
	for _, r := range l.attachmentRules(ch, att, ips) {
		c.AddRule(r)
	}
	var drop []netip.Addr
	for _, a := range recordedAddrs(old) {
		if !slices.Contains(ips, a) {
			drop = append(drop, a)
		}
	}
	if err := l.queueElementRemoval(c, drop, func(chain string) bool { return chain == name }); err != nil {
		return err
	}
	if takeOver {
		// An address still jumps to an attachment whose DEL never came: the newest
		// holder of an address is the one the address belongs to.
		if err := l.queueElementRemoval(c, ips, func(chain string) bool { return chain != name }); err != nil {
			return err
		}
	}
	for _, a := range ips {
		e := nftables.SetElement{Key: a.AsSlice(), VerdictData: nftexpr.JumpTo(name)}
		if err := c.SetAddElements(l.addrMap(a), []nftables.SetElement{e}); err != nil {
			return fmt.Errorf("firewall: nftables map %s: %w", l.addrMap(a).Name, err)
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

// queueElementRemoval queues the deletion of the map elements of addrs whose chain
// matches; one lookup per address, whatever the map's size.
func (l *nftLayout) queueElementRemoval(c *nftables.Conn, addrs []netip.Addr, match func(chain string) bool) error {
	for _, a := range addrs {
		m := l.addrMap(a)
		e, err := netfilter.GetElement(m.Table.Family, m.Table.Name, m.Name, a.AsSlice())
		if netfilter.IsNotExist(err) {
			continue
		}
		if err != nil {
			return fmt.Errorf("firewall: nftables map %s: %w", m.Name, err)
		}
		if match(e.VerdictChain) {
			if err := c.SetDeleteElements(m, []nftables.SetElement{{Key: a.AsSlice()}}); err != nil {
				return err
			}
		}
	}
	return nil
}

// queueDropPointing queues the deletion of every map element that jumps to chain: a
// dump of both maps, for when the chain's records and the maps disagree.
func (l *nftLayout) queueDropPointing(c *nftables.Conn, chain string) error {
	for _, m := range []*nftables.Set{l.ctr4, l.ctr6} {
		elems, err := c.GetSetElements(m)
		if err != nil {
			return fmt.Errorf("firewall: nftables map %s: %w", m.Name, err)
		}
		var drop []nftables.SetElement
		for _, e := range elems {
			if netfilter.VerdictChain(e.Val) == chain {
				drop = append(drop, nftables.SetElement{Key: e.Key})
			}
		}
		if len(drop) > 0 {
			if err := c.SetDeleteElements(m, drop); err != nil {
				return err
			}
		}
	}
	return nil
}

// nftDel removes the attachment's chain and the map elements that jump to it, found by
// the chain's name alone. A kernel without nf_tables holds nothing of ours.
func nftDel(att attachment) error {
	c, err := nftables.New(nftables.AsLasting())
	if err != nil {
		return nil
	}
	defer c.CloseLasting()
	return newNFTLayout().remove(c, att.nftChainName())
}

// remove deletes one attachment chain in one transaction, trusting its records; when
// they and the maps disagree (an element added or removed by hand) it looks the
// elements up in the maps instead.
func (l *nftLayout) remove(c *nftables.Conn, name string) error {
	err := l.removeTx(c, name, false)
	if err != nil {
		err = l.removeTx(c, name, true)
	}
	if err != nil {
		return fmt.Errorf("firewall: nftables chain %s: %w", name, err)
	}
	return nil
}

func (l *nftLayout) removeTx(c *nftables.Conn, name string, thorough bool) error {
	rules, exists, err := l.rules(c, name)
	if err != nil || !exists {
		return err
	}
	if thorough {
		err = l.queueDropPointing(c, name)
	} else {
		err = l.queueElementRemoval(c, recordedAddrs(rules), func(chain string) bool { return chain == name })
	}
	if err != nil {
		return err
	}
	c.DelChain(l.chain(name))
	return c.Flush()
}

// nftGC removes the chains of network's attachments whose container is not in valid:
// one listing of the chains, then one transaction per stale attachment.
func nftGC(network string, valid []string) error {
	c, err := nftables.New(nftables.AsLasting())
	if err != nil {
		return nil
	}
	defer c.CloseLasting()
	l := newNFTLayout()
	if _, err := c.ListTableOfFamily(nftTableName, nftables.TableFamilyINet); err != nil {
		return nil // no table: nothing of ours
	}
	keep := map[string]bool{}
	for _, id := range valid {
		keep[attachment{network: network, containerID: id}.nftChainName()] = true
	}
	chains, err := c.ListChainsOfTableFamily(nftables.TableFamilyINet)
	if err != nil {
		return fmt.Errorf("firewall gc: nftables chains: %w", err)
	}
	prefix := nftChainPrefix(network)
	for _, ch := range chains {
		if ch.Table.Name != nftTableName || !strings.HasPrefix(ch.Name, prefix) || keep[ch.Name] {
			continue
		}
		rules, _, err := l.rules(c, ch.Name)
		if err != nil {
			return fmt.Errorf("firewall gc: %w", err)
		}
		if !ownedBy(rules, network) {
			continue // a hash prefix shared with another network
		}
		if err := l.remove(c, ch.Name); err != nil {
			return fmt.Errorf("firewall gc: %w", err)
		}
	}
	return nil
}

// ownedBy reports whether an attachment chain's comments name network; an empty chain
// (its rules removed by hand) is taken as its name says.
func ownedBy(rules []*nftables.Rule, network string) bool {
	for _, r := range rules {
		if net, _, ok := owner.ParseTag("", commentOf(r)); ok {
			return owner.Names(net, network)
		}
	}
	return true
}

// nftCheck verifies the base chain and its jump to the config's admin chain, the admin
// chain, the attachment's rules and map elements, and the ingress policy's elements.
func nftCheck(conf *Config, att attachment, ips []netip.Addr, bridge string) error {
	if len(ips) == 0 {
		return nil
	}
	c, err := nftConn()
	if err != nil {
		return err
	}
	defer c.CloseLasting()
	l := newNFTLayout()
	if err := l.checkBase(c, conf); err != nil {
		return fmt.Errorf("firewall check: nftables: %w", err)
	}
	if err := l.checkAttachment(c, att, ips); err != nil {
		return fmt.Errorf("firewall check: nftables: %w", err)
	}
	if err := l.checkPolicy(c, conf.IngressPolicy, bridge); err != nil {
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

func (l *nftLayout) checkAttachment(c *nftables.Conn, att attachment, ips []netip.Addr) error {
	name := att.nftChainName()
	rules, _, err := l.rules(c, name)
	if err != nil {
		return err
	}
	got := recordedAddrs(rules)
	if len(rules) != 2*len(ips) || len(got) != len(ips) {
		return fmt.Errorf("chain %s missing or incomplete", name)
	}
	for _, a := range ips {
		if !slices.Contains(got, a) {
			return fmt.Errorf("chain %s lacks the rules of %s", name, a)
		}
		m := l.addrMap(a)
		e, err := netfilter.GetElement(m.Table.Family, m.Table.Name, m.Name, a.AsSlice())
		if err != nil && !netfilter.IsNotExist(err) {
			return err
		}
		if err != nil || e.VerdictChain != name {
			return fmt.Errorf("%s not in map %s", a, m.Name)
		}
	}
	return nil
}

// nftCheckIsolation verifies the ingress policy's elements only, for the firewalld
// backend.
func nftCheckIsolation(conf *Config, bridge string) error {
	c, err := nftConn()
	if err != nil {
		return err
	}
	defer c.CloseLasting()
	if err := newNFTLayout().checkPolicy(c, conf.IngressPolicy, bridge); err != nil {
		return fmt.Errorf("firewall check: nftables: %w", err)
	}
	return nil
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
