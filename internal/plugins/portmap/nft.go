package portmap

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"strconv"
	"strings"
	"syscall"

	"github.com/google/nftables"
	"github.com/google/nftables/binaryutil"
	"github.com/google/nftables/expr"
	"github.com/google/nftables/userdata"

	"github.com/cnikit/cni/internal/netfilter"
)

// The nftables layout, one table per family (ip and ip6 "cni_portmap"):
//
//	chain prerouting  { type nat hook prerouting priority dstnat; fib daddr type local jump hostports }
//	chain output      { type nat hook output priority dstnat;     fib daddr type local jump hostports }
//	chain hostports   { meta l4proto . ip daddr . th dport vmap @hostip_ports
//	                    meta l4proto . th dport vmap @ports }
//	chain postrouting { type nat hook postrouting priority srcnat; ct status dnat ip daddr vmap @masq }
//	map hostip_ports  { inet_proto . ipv4_addr . inet_service : verdict }  # mappings with a hostIP
//	map ports         { inet_proto . inet_service : verdict }              # mappings on any local address
//	map masq          { ipv4_addr : verdict }                              # container address -> its mq- chain
//
// and per attachment (hash as in the iptables CNI-DN-<hash> chain):
//
//	chain dn-<hash> { [conditions] meta l4proto tcp th dport 8080 [ip daddr H] dnat ip to 10.1.0.5:80 ... }
//	chain mq-<hash> { ip saddr 10.1.0.0/24 masquerade; ip saddr 127.0.0.0/8 masquerade }  # only with snat
//
// A packet costs one hash lookup, then a walk of its own attachment's few rules. Every
// map element jumps to its attachment's chain and carries the owner comment, and every
// dn- rule records its mapping in its userdata, so DEL needs nothing but the network
// name and container id: it reads its own dn- chain (one small dump), deletes the
// elements by key and the two chains, all in one transaction. Nothing is kept outside
// the kernel.
const (
	nftTableName  = "cni_portmap"
	nftHostports  = "hostports"
	nftDNPrefix   = "dn-"
	nftMasqPrefix = "mq-"
	// udMapping is the userdata type under which a dn- rule records its mapping;
	// nft ignores userdata types it does not know.
	udMapping userdata.Type = 0x70
	// ipsDstNAT is IPS_DST_NAT of the conntrack status bits.
	ipsDstNAT = 1 << 5
	// rtnLocal is RTN_LOCAL, the fib address type of a local address.
	rtnLocal = 2
)

// nftBackend installs port mappings with nftables over netlink.
type nftBackend struct{}

// nftFamily holds the objects of one family's table. Set IDs are fixed per batch (the
// library's global allocator is not safe for concurrent connections).
type nftFamily struct {
	v6          bool
	table       *nftables.Table
	hostIPPorts *nftables.Set
	ports       *nftables.Set
	masq        *nftables.Set
}

func newNFTFamily(v6 bool) *nftFamily {
	fam, addr := nftables.TableFamilyIPv4, nftables.TypeIPAddr
	if v6 {
		fam, addr = nftables.TableFamilyIPv6, nftables.TypeIP6Addr
	}
	t := &nftables.Table{Name: nftTableName, Family: fam}
	return &nftFamily{
		v6:    v6,
		table: t,
		hostIPPorts: &nftables.Set{Table: t, ID: 1, Name: "hostip_ports", IsMap: true, Concatenation: true,
			KeyType:  nftables.MustConcatSetType(nftables.TypeInetProto, addr, nftables.TypeInetService),
			DataType: nftables.TypeVerdict},
		ports: &nftables.Set{Table: t, ID: 2, Name: "ports", IsMap: true, Concatenation: true,
			KeyType:  nftables.MustConcatSetType(nftables.TypeInetProto, nftables.TypeInetService),
			DataType: nftables.TypeVerdict},
		masq: &nftables.Set{Table: t, ID: 3, Name: "masq", IsMap: true, KeyType: addr, DataType: nftables.TypeVerdict},
	}
}

func (f *nftFamily) chain(name string) *nftables.Chain {
	return &nftables.Chain{Name: name, Table: f.table}
}

func (f *nftFamily) addrLen() uint32 {
	if f.v6 {
		return 16
	}
	return 4
}

func (f *nftFamily) nfproto() uint32 {
	if f.v6 {
		return uint32(nftables.TableFamilyIPv6)
	}
	return uint32(nftables.TableFamilyIPv4)
}

// daddrOffset is the destination address offset in the network header.
func (f *nftFamily) daddrOffset() uint32 {
	if f.v6 {
		return 24
	}
	return 16
}

// ensureBase queues the table, the maps and the shared chains, with the shared chains'
// rules rewritten: every statement is idempotent, so concurrent ADDs (each one atomic
// transaction) converge on the same layout and a damaged base layout is repaired.
func (f *nftFamily) ensureBase(c *nftables.Conn) error {
	c.AddTable(f.table)
	for _, s := range []*nftables.Set{f.hostIPPorts, f.ports, f.masq} {
		if err := c.AddSet(s, nil); err != nil {
			return fmt.Errorf("nftables: map %s: %w", s.Name, err)
		}
	}
	hostports := c.AddChain(f.chain(nftHostports))
	c.FlushChain(hostports)
	base := []struct {
		name string
		hook *nftables.ChainHook
		prio *nftables.ChainPriority
	}{
		{"prerouting", nftables.ChainHookPrerouting, nftables.ChainPriorityNATDest},
		{"output", nftables.ChainHookOutput, nftables.ChainPriorityNATDest},
		{"postrouting", nftables.ChainHookPostrouting, nftables.ChainPriorityNATSource},
	}
	for _, b := range base {
		ch := c.AddChain(&nftables.Chain{Name: b.name, Table: f.table, Type: nftables.ChainTypeNAT, Hooknum: b.hook, Priority: b.prio})
		c.FlushChain(ch)
		if b.name == "postrouting" {
			c.AddRule(&nftables.Rule{Table: f.table, Chain: ch, Exprs: f.masqDispatch()})
			continue
		}
		c.AddRule(&nftables.Rule{Table: f.table, Chain: ch, Exprs: []expr.Any{
			&expr.Fib{Register: 1, FlagDADDR: true, ResultADDRTYPE: true},
			&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: binaryutil.NativeEndian.PutUint32(rtnLocal)},
			&expr.Verdict{Kind: expr.VerdictJump, Chain: nftHostports},
		}})
	}
	// The keys are concatenations in the 32-bit registers (reg32 0 is register 8);
	// each field starts on a 4-byte boundary and the kernel zero-pads short loads.
	c.AddRule(&nftables.Rule{Table: f.table, Chain: hostports, Exprs: []expr.Any{
		&expr.Meta{Key: expr.MetaKeyL4PROTO, Register: 8},
		&expr.Payload{DestRegister: 9, Base: expr.PayloadBaseNetworkHeader, Offset: f.daddrOffset(), Len: f.addrLen()},
		&expr.Payload{DestRegister: 9 + f.addrLen()/4, Base: expr.PayloadBaseTransportHeader, Offset: 2, Len: 2},
		&expr.Lookup{SourceRegister: 8, SetName: f.hostIPPorts.Name, SetID: f.hostIPPorts.ID, IsDestRegSet: true},
	}})
	c.AddRule(&nftables.Rule{Table: f.table, Chain: hostports, Exprs: []expr.Any{
		&expr.Meta{Key: expr.MetaKeyL4PROTO, Register: 8},
		&expr.Payload{DestRegister: 9, Base: expr.PayloadBaseTransportHeader, Offset: 2, Len: 2},
		&expr.Lookup{SourceRegister: 8, SetName: f.ports.Name, SetID: f.ports.ID, IsDestRegSet: true},
	}})
	return nil
}

// masqDispatch is `ct status dnat ip daddr vmap @masq`.
func (f *nftFamily) masqDispatch() []expr.Any {
	return []expr.Any{
		&expr.Ct{Key: expr.CtKeySTATUS, Register: 1},
		&expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: 4,
			Mask: binaryutil.NativeEndian.PutUint32(ipsDstNAT), Xor: make([]byte, 4)},
		&expr.Cmp{Op: expr.CmpOpNeq, Register: 1, Data: make([]byte, 4)},
		&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: f.daddrOffset(), Len: f.addrLen()},
		&expr.Lookup{SourceRegister: 1, SetName: f.masq.Name, SetID: f.masq.ID, IsDestRegSet: true},
	}
}

// nftMapping is one installed mapping as a dn- rule records it.
type nftMapping struct {
	mapping
	target netip.Addr
}

// record encodes the mapping for the rule's userdata: "tcp 8080 * 10.1.0.5 80".
func (m nftMapping) record() string {
	host := "*"
	if m.hostIP.IsValid() {
		host = m.hostIP.String()
	}
	return fmt.Sprintf("%s %d %s %s %d", m.proto, m.hostPort, host, m.target, m.containerPort)
}

func parseRecord(s string) (nftMapping, bool) {
	f := strings.Fields(s)
	if len(f) != 5 {
		return nftMapping{}, false
	}
	var m nftMapping
	m.proto = f[0]
	hp, err1 := strconv.ParseUint(f[1], 10, 16)
	cp, err2 := strconv.ParseUint(f[4], 10, 16)
	target, err3 := netip.ParseAddr(f[3])
	if _, ok := protoNumber[m.proto]; !ok || err1 != nil || err2 != nil || err3 != nil {
		return nftMapping{}, false
	}
	if f[2] != "*" {
		h, err := netip.ParseAddr(f[2])
		if err != nil {
			return nftMapping{}, false
		}
		m.hostIP = h
	}
	m.hostPort, m.containerPort, m.target = uint16(hp), uint16(cp), target
	return m, true
}

// key is the mapping's element key in hostip_ports or ports, each field padded to 4
// bytes as concatenations are.
func (m nftMapping) key() []byte {
	k := []byte{protoNumber[m.proto], 0, 0, 0}
	if m.hostIP.IsValid() {
		k = append(k, m.hostIP.AsSlice()...)
	}
	return append(k, byte(m.hostPort>>8), byte(m.hostPort), 0, 0)
}

func (f *nftFamily) mapOf(m nftMapping) *nftables.Set {
	if m.hostIP.IsValid() {
		return f.hostIPPorts
	}
	return f.ports
}

// dnatRule is `[conditions] meta l4proto P th dport H [ip daddr X] dnat to T:C`.
func (f *nftFamily) dnatRule(ch *nftables.Chain, o attachment, m nftMapping, conds []expr.Any) *nftables.Rule {
	exprs := append([]expr.Any{}, conds...)
	exprs = append(exprs,
		&expr.Meta{Key: expr.MetaKeyL4PROTO, Register: 1},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{protoNumber[m.proto]}},
		&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseTransportHeader, Offset: 2, Len: 2},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: binaryutil.BigEndian.PutUint16(m.hostPort)},
	)
	if m.hostIP.IsValid() {
		exprs = append(exprs,
			&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: f.daddrOffset(), Len: f.addrLen()},
			&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: m.hostIP.AsSlice()},
		)
	}
	exprs = append(exprs,
		&expr.Immediate{Register: 1, Data: m.target.AsSlice()},
		&expr.Immediate{Register: 2, Data: binaryutil.BigEndian.PutUint16(m.containerPort)},
		&expr.NAT{Type: expr.NATTypeDestNAT, Family: f.nfproto(), RegAddrMin: 1, RegProtoMin: 2, Specified: true},
	)
	ud := userdata.AppendString(nil, userdata.TypeComment, o.nftComment())
	ud = userdata.AppendString(ud, udMapping, m.record())
	return &nftables.Rule{Table: f.table, Chain: ch, Exprs: exprs, UserData: ud}
}

// masqRules are the mq- chain's rules: hairpin and, v4, localhost; with masqAll, every
// connection to a mapped port. Hairpin covers the container's whole subnet, as the
// iptables layout and the reference do: another container on the same bridge reaching
// this one through a host address gets replies straight over the bridge, which skip
// the host's un-DNAT unless bridged frames pass netfilter (br_netfilter, not loaded on
// plain podman hosts); masquerading makes the replies come back through the host.
func (f *nftFamily) masqRules(ch *nftables.Chain, o attachment, target netip.Prefix, maps []nftMapping, masqAll bool) []*nftables.Rule {
	ud := userdata.AppendString(nil, userdata.TypeComment, o.nftComment())
	var out []*nftables.Rule
	add := func(exprs ...expr.Any) {
		out = append(out, &nftables.Rule{Table: f.table, Chain: ch, UserData: ud, Exprs: append(exprs, &expr.Masq{})})
	}
	if masqAll {
		for _, m := range maps {
			add(&expr.Meta{Key: expr.MetaKeyL4PROTO, Register: 1},
				&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{protoNumber[m.proto]}},
				&expr.Ct{Key: expr.CtKeyPROTODST, Register: 1},
				&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: binaryutil.BigEndian.PutUint16(m.hostPort)})
		}
	} else {
		add(addrMatch(true, target.Masked(), expr.CmpOpEq)...)
	}
	if !f.v6 {
		add(addrMatch(true, netip.MustParsePrefix("127.0.0.0/8"), expr.CmpOpEq)...)
	}
	return out
}

// mappingsOf reads the dn- chain of the attachment named by hash back: its mappings
// (from the rules' records). A missing table or chain reads as nothing installed.
func (f *nftFamily) mappingsOf(c *nftables.Conn, hash string) ([]nftMapping, error) {
	rules, err := c.GetRules(f.table, f.chain(nftDNPrefix+hash))
	if err != nil {
		if netfilter.IsNotExist(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("nftables: list %s: %w", nftDNPrefix+hash, err)
	}
	var out []nftMapping
	for _, r := range rules {
		if rec, ok := userdata.GetString(r.UserData, udMapping); ok {
			if m, ok := parseRecord(rec); ok {
				out = append(out, m)
			}
		}
	}
	return out, nil
}

func (f *nftFamily) chainExists(c *nftables.Conn, name string) bool {
	_, err := c.ListChain(f.table, name)
	return err == nil
}

// queueRemove queues the removal of what old says the attachment has installed: its
// map elements and its two chains (emptied, and deleted unless keep).
func (f *nftFamily) queueRemove(c *nftables.Conn, hash string, old []nftMapping, keep bool) error {
	dn, mq := f.chain(nftDNPrefix+hash), f.chain(nftMasqPrefix+hash)
	targets := map[netip.Addr]bool{}
	for _, m := range old {
		if err := c.SetDeleteElements(f.mapOf(m), []nftables.SetElement{{Key: m.key()}}); err != nil {
			return err
		}
		targets[m.target] = true
	}
	hasMasq := f.chainExists(c, mq.Name)
	if hasMasq {
		for t := range targets {
			if err := c.SetDeleteElements(f.masq, []nftables.SetElement{{Key: t.AsSlice()}}); err != nil {
				return err
			}
		}
	}
	if keep {
		return nil
	}
	c.FlushChain(dn)
	c.DelChain(dn)
	if hasMasq {
		c.FlushChain(mq)
		c.DelChain(mq)
	}
	return nil
}

// sweep is the slow path for state that does not match its records (an element or a
// rule removed by hand): it scans the maps for elements jumping to the attachment's
// chains and removes those and the chains. It reads every element of the node, so it
// runs only when the fast path failed.
func (f *nftFamily) sweep(c *nftables.Conn, hash string) error {
	dn, mq := nftDNPrefix+hash, nftMasqPrefix+hash
	for _, s := range []*nftables.Set{f.hostIPPorts, f.ports, f.masq} {
		elems, err := c.GetSetElements(s)
		if err != nil {
			if netfilter.IsNotExist(err) {
				continue
			}
			return fmt.Errorf("nftables: list map %s: %w", s.Name, err)
		}
		var mine []nftables.SetElement
		for _, e := range elems {
			if ch := netfilter.VerdictChain(e.Val); ch == dn || ch == mq {
				mine = append(mine, nftables.SetElement{Key: e.Key})
			}
		}
		if len(mine) > 0 {
			if err := c.SetDeleteElements(s, mine); err != nil {
				return err
			}
		}
	}
	for _, name := range []string{dn, mq} {
		if f.chainExists(c, name) {
			c.FlushChain(f.chain(name))
			c.DelChain(f.chain(name))
		}
	}
	return c.Flush()
}

func newConn() (*nftables.Conn, error) {
	c, err := nftables.New(nftables.AsLasting())
	if err != nil {
		return nil, fmt.Errorf("nftables: open netlink: %w", err)
	}
	return c, nil
}

// add installs (or replaces) the attachment's mappings, one transaction per family.
func (nftBackend) add(_ context.Context, o attachment, s *settings, fams []family) error {
	c, err := newConn()
	if err != nil {
		return err
	}
	defer c.CloseLasting()
	for _, fa := range fams {
		f := newNFTFamily(fa.v6)
		conds, err := parseConditions(condField(fa.v6), fa.conds, fa.v6)
		if err != nil {
			return err
		}
		old, err := f.mappingsOf(c, o.hash())
		if err != nil {
			return err
		}
		err = f.queueAdd(c, o, s, fa, conds, old)
		if err == nil {
			err = c.Flush()
		}
		if err != nil && len(old) > 0 {
			// The old state did not match its records: clear it the slow way and retry.
			if serr := f.sweep(c, o.hash()); serr != nil {
				return fmt.Errorf("nftables: port mappings of %s: %w (cleanup: %v)", o.cid, err, serr)
			}
			if err = f.queueAdd(c, o, s, fa, conds, nil); err == nil {
				err = c.Flush()
			}
		}
		if err != nil {
			if errors.Is(err, syscall.EEXIST) {
				return fmt.Errorf("nftables: a host port of %s is already mapped to another container: %w", o.cid, err)
			}
			return fmt.Errorf("nftables: install port mappings of %s: %w", o.cid, err)
		}
	}
	return nil
}

func condField(v6 bool) string {
	if v6 {
		return "conditionsV6"
	}
	return "conditionsV4"
}

func (f *nftFamily) queueAdd(c *nftables.Conn, o attachment, s *settings, fa family, conds []expr.Any, old []nftMapping) error {
	if err := f.ensureBase(c); err != nil {
		return err
	}
	dn := c.AddChain(f.chain(nftDNPrefix + o.hash()))
	if err := f.queueRemove(c, o.hash(), old, true); err != nil {
		return err
	}
	c.FlushChain(dn)
	mq := f.chain(nftMasqPrefix + o.hash())
	if s.snat {
		c.AddChain(mq)
		c.FlushChain(mq)
	} else if f.chainExists(c, mq.Name) {
		c.FlushChain(mq)
		c.DelChain(mq)
	}
	target := fa.addr.Addr()
	var maps []nftMapping
	for _, m := range fa.mappings {
		nm := nftMapping{mapping: m, target: target}
		maps = append(maps, nm)
		c.AddRule(f.dnatRule(dn, o, nm, conds))
		el := nftables.SetElement{Key: nm.key(), VerdictData: &expr.Verdict{Kind: expr.VerdictJump, Chain: dn.Name}, Comment: o.nftComment()}
		if err := c.SetAddElements(f.mapOf(nm), []nftables.SetElement{el}); err != nil {
			return err
		}
	}
	if !s.snat {
		return nil
	}
	for _, r := range f.masqRules(mq, o, fa.addr, maps, s.masqAll) {
		c.AddRule(r)
	}
	el := nftables.SetElement{Key: target.AsSlice(), VerdictData: &expr.Verdict{Kind: expr.VerdictJump, Chain: mq.Name}, Comment: o.nftComment()}
	return c.SetAddElements(f.masq, []nftables.SetElement{el})
}

// del removes the attachment named by hash from both families and returns what it had
// installed.
func (nftBackend) del(_ context.Context, hash string) ([]flow, error) {
	c, err := newConn()
	if err != nil {
		return nil, err
	}
	defer c.CloseLasting()
	var flows []flow
	for _, v6 := range []bool{false, true} {
		f := newNFTFamily(v6)
		old, err := f.mappingsOf(c, hash)
		if err != nil {
			return nil, err
		}
		if len(old) == 0 && !f.chainExists(c, nftDNPrefix+hash) {
			continue
		}
		if err := f.queueRemove(c, hash, old, false); err == nil {
			err = c.Flush()
			if err == nil {
				flows = appendFlows(flows, old)
				continue
			}
		}
		if err := f.sweep(c, hash); err != nil {
			return nil, fmt.Errorf("nftables: remove port mappings of %s: %w", nftDNPrefix+hash, err)
		}
		flows = appendFlows(flows, old)
	}
	return flows, nil
}

func appendFlows(flows []flow, maps []nftMapping) []flow {
	for _, m := range maps {
		flows = append(flows, flow{proto: m.proto, hostPort: m.hostPort, target: m.target})
	}
	return flows
}

// check verifies that every mapping has its rule and its map element, and the
// masquerade element when snat is on.
func (nftBackend) check(_ context.Context, o attachment, s *settings, fams []family) error {
	c, err := newConn()
	if err != nil {
		return err
	}
	defer c.CloseLasting()
	for _, fa := range fams {
		f := newNFTFamily(fa.v6)
		have, err := f.mappingsOf(c, o.hash())
		if err != nil {
			return err
		}
		target := fa.addr.Addr()
		for _, m := range fa.mappings {
			want := nftMapping{mapping: m, target: target}
			if !containsMapping(have, want) {
				return fmt.Errorf("nftables: no rule for port mapping %s", want.record())
			}
			if err := f.requireElement(f.mapOf(want), want.key(), o); err != nil {
				return fmt.Errorf("nftables: port mapping %s: %w", want.record(), err)
			}
		}
		if s.snat {
			if err := f.requireElement(f.masq, target.AsSlice(), o); err != nil {
				return fmt.Errorf("nftables: masquerade for %s: %w", target, err)
			}
		}
	}
	return nil
}

func containsMapping(have []nftMapping, want nftMapping) bool {
	for _, h := range have {
		if h.record() == want.record() {
			return true
		}
	}
	return false
}

// requireElement looks the element up by key and checks its owner comment (the comment
// is what attributes it). One lookup, however many attachments the map holds.
func (f *nftFamily) requireElement(s *nftables.Set, key []byte, o attachment) error {
	e, err := netfilter.GetElement(f.table.Family, f.table.Name, s.Name, key)
	if netfilter.IsNotExist(err) {
		return fmt.Errorf("map %s has no element for it", s.Name)
	}
	if err != nil {
		return err
	}
	if e.Comment != o.nftComment() {
		return fmt.Errorf("map %s holds it for another owner (%q)", s.Name, e.Comment)
	}
	return nil
}

// installed lists the attachments that have elements in the family's maps, from the
// elements' owner comments and the chains they jump to.
func (nftBackend) installed(_ context.Context) ([]installed, error) {
	c, err := newConn()
	if err != nil {
		return nil, err
	}
	defer c.CloseLasting()
	seen := map[string]bool{}
	var out []installed
	for _, v6 := range []bool{false, true} {
		f := newNFTFamily(v6)
		for _, s := range []*nftables.Set{f.hostIPPorts, f.ports, f.masq} {
			elems, err := c.GetSetElements(s)
			if err != nil {
				if netfilter.IsNotExist(err) {
					continue
				}
				return nil, fmt.Errorf("nftables: list map %s: %w", s.Name, err)
			}
			for _, e := range elems {
				chain := netfilter.VerdictChain(e.Val)
				prefix := nftDNPrefix
				if s == f.masq {
					prefix = nftMasqPrefix
				}
				if a, ok := installedFrom(e.Comment, chain, prefix); ok && !seen[a.hash] {
					seen[a.hash] = true
					out = append(out, a)
				}
			}
		}
	}
	return out, nil
}
