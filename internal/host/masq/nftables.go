package masq

import (
	"bytes"
	"crypto/sha512"
	"encoding/hex"
	"fmt"
	"iter"
	"net/netip"
	"slices"
	"strings"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
	"github.com/google/nftables/userdata"

	"github.com/cnikit/cni/internal/host/netfilter"
	"github.com/cnikit/cni/internal/host/nftexpr"
)

const (
	nftTableName = "cni_masquerade"
	nftBaseChain = "postrouting"
	nftMap4      = "masq4"
	nftMap6      = "masq6"
	// commentMax is the longest comment nft shows in full.
	commentMax = 128
)

// The objects of the layout. Their values are built per call; nothing is kept.
func nftTable() *nftables.Table {
	return &nftables.Table{Name: nftTableName, Family: nftables.TableFamilyINet}
}

func nftMap(t *nftables.Table, v6 bool) *nftables.Set {
	// A non-zero ID keeps AddSet from bumping the library's unguarded package-level ID
	// counter, a data race when several attachments are set up in one process.
	s := &nftables.Set{Table: t, ID: 1, Name: nftMap4, KeyType: nftables.TypeIPAddr, DataType: nftables.TypeVerdict, IsMap: true}
	if v6 {
		s.ID, s.Name, s.KeyType = 2, nftMap6, nftables.TypeIP6Addr
	}
	return s
}

// conn opens a netlink connection in the calling thread's network namespace; tests
// pass an option that records what goes through it.
func conn(opts ...nftables.ConnOption) (*nftables.Conn, error) {
	c, err := nftables.New(append([]nftables.ConnOption{nftables.AsLasting()}, opts...)...)
	if err != nil {
		return nil, fmt.Errorf("masquerade: nftables: %w", err)
	}
	return c, nil
}

// sourceDispatch is `ip saddr vmap @masq4` (`ip6 saddr vmap @masq6`).
func sourceDispatch(m *nftables.Set, v6 bool) []expr.Any {
	return nftexpr.Rule(nftexpr.NFProtoIs(v6), nftexpr.VMap(m, nftexpr.Saddr(v6)))
}

// daddrReturn is `ip daddr 10.1.0.0/24 return` (multicast, and an attachment's own
// subnet, are not masqueraded), in an inet table, where nft also matches the family
// (`meta nfproto ipv4`) but does not list it.
func daddrReturn(p netip.Prefix) []expr.Any {
	v6 := p.Addr().Is6()
	return nftexpr.Rule(nftexpr.NFProtoIs(v6), nftexpr.In(nftexpr.Daddr(v6), p), nftexpr.Return())
}

// nftBase adds the table, the maps and the base chain with its rules: multicast is never
// masqueraded, every other source is looked up in the family's map.
func nftBase(c *nftables.Conn) error {
	t := c.CreateTable(nftTable()) // fails the transaction if a concurrent Setup made it first
	chain := c.AddChain(&nftables.Chain{
		Name: nftBaseChain, Table: t, Type: nftables.ChainTypeNAT,
		Hooknum: nftables.ChainHookPostrouting, Priority: nftables.ChainPriorityNATSource,
	})
	for _, multicast := range []netip.Prefix{netip.MustParsePrefix("224.0.0.0/4"), netip.MustParsePrefix("ff00::/8")} {
		v6 := multicast.Addr().Is6()
		m := nftMap(t, v6)
		if err := c.AddSet(m, nil); err != nil {
			return fmt.Errorf("masquerade: nftables map %s: %w", m.Name, err)
		}
		c.AddRule(&nftables.Rule{Table: t, Chain: chain, Exprs: daddrReturn(multicast)})
		c.AddRule(&nftables.Rule{Table: t, Chain: chain, Exprs: sourceDispatch(m, v6)})
	}
	return nil
}

// nftComment names the attachment; the addresses come first so that they survive when
// a long network or container name is cut.
func nftComment(att Attachment, ips []netip.Prefix) string {
	addrs := make([]string, len(ips))
	for i, p := range ips {
		addrs[i] = p.Addr().String()
	}
	s := fmt.Sprintf("ips=%s net=%s id=%s if=%s", strings.Join(addrs, ","), att.Network, att.ContainerID, att.IfName)
	if len(s) > commentMax {
		s = s[:commentMax]
	}
	return s
}

// commentIPs reads the addresses back from the comment of an attachment chain's rules.
func commentIPs(rules []*nftables.Rule) []netip.Addr {
	var out []netip.Addr
	for _, r := range rules {
		s, ok := userdata.GetString(r.UserData, userdata.TypeComment)
		if !ok {
			continue
		}
		list, ok := strings.CutPrefix(strings.Fields(s + " ")[0], "ips=")
		if !ok {
			continue
		}
		for _, a := range strings.Split(list, ",") {
			if ip, err := netip.ParseAddr(a); err == nil {
				out = append(out, ip)
			}
		}
	}
	return out
}

func commentField(rules []*nftables.Rule, key string) string {
	for _, r := range rules {
		s, _ := userdata.GetString(r.UserData, userdata.TypeComment)
		for _, f := range strings.Fields(s) {
			if v, ok := strings.CutPrefix(f, key+"="); ok {
				return v
			}
		}
	}
	return ""
}

// nftAttachment queues the attachment chain (emptied if it existed) and its map elements.
func nftAttachment(c *nftables.Conn, att Attachment, ips []netip.Prefix) error {
	t := nftTable()
	chain := c.AddChain(&nftables.Chain{Name: nftChainName(att.Network, att.ContainerID, att.IfName), Table: t})
	c.FlushChain(chain)
	for _, p := range ips {
		c.AddRule(&nftables.Rule{Table: t, Chain: chain, Exprs: daddrReturn(p)})
	}
	c.AddRule(&nftables.Rule{Table: t, Chain: chain, Exprs: nftexpr.Masquerade(),
		UserData: userdata.AppendString(nil, userdata.TypeComment, nftComment(att, ips))})
	for _, v6 := range []bool{false, true} {
		if elems := nftElements(addrsOf(ips), v6, chain.Name); len(elems) > 0 {
			if err := c.SetAddElements(nftMap(t, v6), elems); err != nil {
				return fmt.Errorf("masquerade: nftables map elements: %w", err)
			}
		}
	}
	return nil
}

// nftElements are the map elements of the addresses of one family; with a chain they
// jump there, without they serve as keys for deletion.
func nftElements(ips []netip.Addr, v6 bool, chain string) []nftables.SetElement {
	var out []nftables.SetElement
	for _, a := range ips {
		if a.Is6() != v6 {
			continue
		}
		e := nftables.SetElement{Key: a.AsSlice()}
		if chain != "" {
			e.VerdictData = nftexpr.GotoTo(chain)
		}
		out = append(out, e)
	}
	return out
}

func addrsOf(ips []netip.Prefix) []netip.Addr {
	out := make([]netip.Addr, len(ips))
	for i, p := range ips {
		out[i] = p.Addr()
	}
	return out
}

func nftSetup(att Attachment, ips []netip.Prefix) error {
	c, err := conn()
	if err != nil {
		return err
	}
	defer c.CloseLasting()
	for try := 1; ; try++ {
		if _, err := c.ListTableOfFamily(nftTableName, nftables.TableFamilyINet); err != nil { // no table yet
			if err := nftBase(c); err != nil {
				return err
			}
		} else if err := nftDropOwnStale(c, att, ips); err != nil {
			return err
		} else if try > 1 {
			// An address still maps to a stale attachment whose DEL never came: take it.
			if err := nftDropClaims(c, ips, nftChainName(att.Network, att.ContainerID, att.IfName)); err != nil {
				return err
			}
		}
		if err := nftAttachment(c, att, ips); err != nil {
			return err
		}
		if err := c.Flush(); err == nil {
			return nil
		} else if try == 3 {
			return fmt.Errorf("masquerade: nftables: %w", err)
		}
	}
}

// nftDropOwnStale queues the deletion of the map elements of addresses that an earlier
// Setup of the same attachment gave and this one does not (an ADD repeated without DEL),
// so that none is left pointing at the chain.
func nftDropOwnStale(c *nftables.Conn, att Attachment, ips []netip.Prefix) error {
	rules, err := nftRules(c, nftChainName(att.Network, att.ContainerID, att.IfName))
	if err != nil {
		return fmt.Errorf("masquerade: nftables: %w", err)
	}
	var stale []netip.Addr
	for _, a := range commentIPs(rules) {
		if !slices.Contains(addrsOf(ips), a) {
			stale = append(stale, a)
		}
	}
	return nftDeleteKeys(c, stale)
}

// nftDeleteKeys queues the deletion of the map elements of ips, in both maps.
func nftDeleteKeys(c *nftables.Conn, ips []netip.Addr) error {
	for _, v6 := range []bool{false, true} {
		if elems := nftElements(ips, v6, ""); len(elems) > 0 {
			if err := c.SetDeleteElements(nftMap(nftTable(), v6), elems); err != nil {
				return err
			}
		}
	}
	return nil
}

// nftDropClaims queues the deletion of map elements for ips that jump elsewhere.
func nftDropClaims(c *nftables.Conn, ips []netip.Prefix, chain string) error {
	err := nftDropElements(c, func(e nftables.SetElement) bool {
		mine := slices.ContainsFunc(ips, func(p netip.Prefix) bool { return bytes.Equal(p.Addr().AsSlice(), e.Key) })
		return mine && netfilter.VerdictChain(e.Val) != chain
	})
	if err != nil {
		return fmt.Errorf("masquerade: %w", err)
	}
	return nil
}

// nftDropElements queues the deletion of the elements of both maps that drop picks.
func nftDropElements(c *nftables.Conn, drop func(nftables.SetElement) bool) error {
	t := nftTable()
	for _, v6 := range []bool{false, true} {
		m := nftMap(t, v6)
		elems, err := c.GetSetElements(m)
		if err != nil {
			return fmt.Errorf("nftables map %s: %w", m.Name, err)
		}
		var gone []nftables.SetElement
		for _, e := range elems {
			if drop(e) {
				gone = append(gone, nftables.SetElement{Key: e.Key})
			}
		}
		if len(gone) > 0 {
			if err := c.SetDeleteElements(m, gone); err != nil {
				return err
			}
		}
	}
	return nil
}

// nftRules returns the rules of an attachment chain; none when it or the table is
// missing.
func nftRules(c *nftables.Conn, name string) ([]*nftables.Rule, error) {
	t := nftTable()
	rules, err := c.GetRules(t, &nftables.Chain{Name: name, Table: t})
	if netfilter.IsNotExist(err) {
		return nil, nil // the library does not wrap this error
	}
	return rules, err
}

// nftRemove queues the deletion of an attachment chain and of the map elements its
// comment names that still go to it: an address taken over by another attachment
// (nftSetup, when a stale attachment's DEL never came) keeps its element, which a late
// DEL or GC of the stale one used to delete, leaving the other unmasqueraded. One
// lookup per address.
func nftRemove(c *nftables.Conn, name string, rules []*nftables.Rule) error {
	t := nftTable()
	var ours []netip.Addr
	for _, a := range commentIPs(rules) {
		m := nftMap(t, a.Is6())
		e, err := netfilter.GetElement(m.Table.Family, m.Table.Name, m.Name, a.AsSlice())
		switch {
		case netfilter.IsNotExist(err):
		case err != nil:
			return err
		case e.VerdictChain == name:
			ours = append(ours, a)
		}
	}
	if err := nftDeleteKeys(c, ours); err != nil {
		return err
	}
	c.DelChain(&nftables.Chain{Name: name, Table: t})
	return nil
}

func nftTeardown(network, containerID, ifName string) error {
	c, err := conn()
	if err != nil {
		return nil // no nf_tables in this kernel: nothing of ours can exist
	}
	defer c.CloseLasting()
	name := nftChainName(network, containerID, ifName)
	instance := refInstanceHash(network, ifName, containerID)
	err = nftTeardownTx(c, name, instance, false)
	if err != nil {
		// The comment and the map disagree (an element removed or added by hand): find
		// the chain's elements in the maps instead.
		err = nftTeardownTx(c, name, instance, true)
	}
	if err != nil {
		return fmt.Errorf("masquerade teardown: nftables chain %s: %w", name, err)
	}
	return nil
}

// nftTeardownTx removes an attachment chain, its map elements and any reference rule of
// the instance in one transaction. Thorough looks the elements up in the maps (a dump)
// instead of trusting the chain's comment.
func nftTeardownTx(c *nftables.Conn, name, instance string, thorough bool) error {
	rules, err := nftRules(c, name)
	if err != nil {
		return err
	}
	queued := 0
	switch {
	case len(rules) == 0:
	case thorough:
		err := nftDropElements(c, func(e nftables.SetElement) bool { return netfilter.VerdictChain(e.Val) == name })
		if err != nil {
			return err
		}
		c.DelChain(&nftables.Chain{Name: name, Table: nftTable()})
		queued++
	default:
		if err := nftRemove(c, name, rules); err != nil {
			return err
		}
		queued++
	}
	n, err := refRemove(c, func(comment string) bool { return strings.HasPrefix(comment, instance) })
	if err != nil {
		return err
	}
	if queued+n == 0 {
		return nil
	}
	return c.Flush()
}

func nftCheck(att Attachment, ips []netip.Prefix) error {
	c, err := conn()
	if err != nil {
		return err
	}
	defer c.CloseLasting()
	name := nftChainName(att.Network, att.ContainerID, att.IfName)
	rules, err := nftRules(c, name)
	if err != nil {
		return fmt.Errorf("masquerade check: nftables chain %s: %w", name, err)
	}
	if len(rules) == 0 {
		return fmt.Errorf("masquerade check: nftables chain %s %w", name, errAbsent)
	}
	if len(rules) != len(ips)+1 {
		return fmt.Errorf("masquerade check: nftables chain %s incomplete", name)
	}
	for _, v6 := range []bool{false, true} { // the IPv4 addresses first
		m := nftMap(nftTable(), v6)
		for _, a := range addrsOf(ips) {
			if a.Is6() != v6 {
				continue
			}
			// One lookup per address: CHECK costs the same with 300 attachments as with 10.
			e, err := netfilter.GetElement(m.Table.Family, m.Table.Name, m.Name, a.AsSlice())
			if err != nil && !netfilter.IsNotExist(err) {
				return fmt.Errorf("masquerade check: nftables map: %w", err)
			}
			if err != nil || e.VerdictChain != name {
				return fmt.Errorf("masquerade check: %s not in nftables map", a)
			}
		}
	}
	return nil
}

// nftGC deletes the chains (and map elements) of network's attachments not in valid,
// in one transaction. Chains are found by their network prefix and confirmed by comment,
// among the chains of our table that hold rules (netfilter.ChainsWithRules: the inet
// family's chain dump would hold firewalld's table and any other). An attachment's
// chain always holds its rules: only one emptied by hand is not found, and stays,
// masquerading nothing.
func nftGC(network string, valid iter.Seq2[string, string], opts ...nftables.ConnOption) error {
	c, err := conn(opts...)
	if err != nil {
		return nil
	}
	defer c.CloseLasting()
	queued, err := nftGCChains(c, network, valid)
	if err != nil {
		return fmt.Errorf("masquerade gc: %w", err)
	}
	n, err := refGC(c, network, valid)
	if err != nil {
		return fmt.Errorf("masquerade gc: %w", err)
	}
	if queued+n == 0 {
		return nil
	}
	if err := c.Flush(); err != nil {
		return fmt.Errorf("masquerade gc: nftables: %w", err)
	}
	return nil
}

// nftGCChains queues the removal of network's chains (with their map elements) of
// attachments not in valid, and returns how many it queued.
func nftGCChains(c *nftables.Conn, network string, valid iter.Seq2[string, string]) (int, error) {
	keep := map[string]bool{}
	for cid, ifName := range valid {
		keep[nftChainName(network, cid, ifName)] = true
	}
	chains, err := netfilter.ChainsWithRules(nftables.TableFamilyINet, nftTableName)
	if err != nil {
		return 0, err
	}
	prefix, queued := nftChainPrefix(network), 0
	for _, name := range chains {
		if !strings.HasPrefix(name, prefix) || keep[name] {
			continue
		}
		rules, err := nftRules(c, name)
		if err != nil {
			return 0, fmt.Errorf("nftables chain %s: %w", name, err)
		}
		if net := commentField(rules, "net"); net != "" && !strings.HasPrefix(network, net) {
			continue // a hash prefix shared with another network
		}
		if err := nftRemove(c, name, rules); err != nil {
			return 0, err
		}
		queued++
	}
	return queued, nil
}

// The reference plugins' nftables layout (v1.6+): table inet cni_plugins_masquerade,
// one rule per address in chain masq_checks, with a comment that starts with
// hex(sha512(network))[:16] "-" hex(sha512(ifName ":" containerID))[:16]. Teardown and
// GC also remove those rules, so a node upgraded from the reference is left clean.
const (
	refTableName = "cni_plugins_masquerade"
	refChainName = "masq_checks"
)

func refNetworkHash(network string) string {
	sum := sha512.Sum512([]byte(network))
	return hex.EncodeToString(sum[:8])
}

func refInstanceHash(network, ifName, containerID string) string {
	sum := sha512.Sum512([]byte(ifName + ":" + containerID))
	return refNetworkHash(network) + "-" + hex.EncodeToString(sum[:8])
}

// refRemove queues the deletion of the reference rules whose comment matches and
// returns how many it queued; a node without the reference table costs one lookup.
func refRemove(c *nftables.Conn, match func(comment string) bool) (int, error) {
	t, err := c.ListTableOfFamily(refTableName, nftables.TableFamilyINet)
	if err != nil {
		return 0, nil // the table does not exist
	}
	chain := &nftables.Chain{Name: refChainName, Table: t}
	rules, err := c.GetRules(t, chain)
	if err != nil && !netfilter.IsNotExist(err) {
		return 0, fmt.Errorf("nftables chain %s %s: %w", refTableName, refChainName, err)
	}
	n := 0
	for _, r := range rules {
		comment, _ := userdata.GetString(r.UserData, userdata.TypeComment)
		if comment != "" && match(comment) {
			if err := c.DelRule(&nftables.Rule{Table: t, Chain: chain, Handle: r.Handle}); err != nil {
				return 0, err
			}
			n++
		}
	}
	return n, nil
}

// refGC queues the removal of the reference plugins' rules of network's attachments
// not in valid, and returns how many it queued.
func refGC(c *nftables.Conn, network string, valid iter.Seq2[string, string]) (int, error) {
	keep := map[string]bool{}
	for cid, ifName := range valid {
		keep[refInstanceHash(network, ifName, cid)] = true
	}
	netHash := refNetworkHash(network) + "-"
	return refRemove(c, func(comment string) bool {
		inst, _, _ := strings.Cut(comment, ",")
		return strings.HasPrefix(inst, netHash) && !keep[inst]
	})
}
