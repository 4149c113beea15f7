package portmap

import (
	"cmp"
	"fmt"
	"net/netip"
	"strconv"
	"strings"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
	"github.com/google/nftables/userdata"

	"github.com/cnikit/cni/internal/host/nftexpr"
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
//	chain dn-<hash> { [conditions] tcp dport 8080 [ip daddr H] dnat to 10.1.0.5:80 ... }
//	chain mq-<hash> { ip saddr 10.1.0.0/24 masquerade; ip saddr 127.0.0.0/8 masquerade }  # only with snat
//
// Conditions that parseConditions does not compile are handed to nft as written, in
// one rule of the attachment's own (see nftgate.go); the dnat rules move behind it:
//
//	chain dn-<hash> { <conditions> goto dm-<hash> }                 # written by `nft -f -`
//	chain dm-<hash> { tcp dport 8080 [ip daddr H] dnat to 10.1.0.5:80 ... }
//
// A key that two attachments claim goes through a shared chain (see nftclaim.go).
//
// A packet costs one hash lookup, then a walk of its own attachment's few rules. Every
// map element jumps to its attachment's chain and carries the owner comment, and every
// dnat rule records its mapping in its userdata, so DEL needs nothing but the network
// name and container id: it reads its own chains (small dumps), releases its keys and
// deletes its chains, all in one transaction. Nothing is kept outside the kernel.
const (
	nftTableName  = "cni_portmap"
	nftHostports  = "hostports"
	nftDNPrefix   = "dn-"
	nftDMPrefix   = "dm-"
	nftMasqPrefix = "mq-"
	// udMapping is the userdata type under which a dn- rule records its mapping;
	// nft ignores userdata types it does not know.
	udMapping userdata.Type = 0x70
)

// nftFamily holds the objects of one family's table. Set IDs are fixed per batch (the
// library's global allocator is not safe for concurrent connections), and differ
// between the families, whose changes share one transaction.
type nftFamily struct {
	v6          bool
	table       *nftables.Table
	hostIPPorts *nftables.Set
	ports       *nftables.Set
	masq        *nftables.Set
}

func newNFTFamily(v6 bool) *nftFamily {
	fam, addr, id := nftables.TableFamilyIPv4, nftables.TypeIPAddr, uint32(1)
	if v6 {
		fam, addr, id = nftables.TableFamilyIPv6, nftables.TypeIP6Addr, 11
	}
	t := &nftables.Table{Name: nftTableName, Family: fam}
	return &nftFamily{
		v6:    v6,
		table: t,
		hostIPPorts: &nftables.Set{Table: t, ID: id, Name: "hostip_ports", IsMap: true, Concatenation: true,
			KeyType:  nftables.MustConcatSetType(nftables.TypeInetProto, addr, nftables.TypeInetService),
			DataType: nftables.TypeVerdict},
		ports: &nftables.Set{Table: t, ID: id + 1, Name: "ports", IsMap: true, Concatenation: true,
			KeyType:  nftables.MustConcatSetType(nftables.TypeInetProto, nftables.TypeInetService),
			DataType: nftables.TypeVerdict},
		masq: &nftables.Set{Table: t, ID: id + 2, Name: "masq", IsMap: true, KeyType: addr, DataType: nftables.TypeVerdict},
	}
}

func (f *nftFamily) chain(name string) *nftables.Chain {
	return &nftables.Chain{Name: name, Table: f.table}
}

// sharedChain is one chain of the base layout and the rules it holds.
type sharedChain struct {
	chain *nftables.Chain
	rules [][]expr.Any
}

// sharedChains are the base layout's chains, hostports (which the hook chains jump to)
// first.
func (f *nftFamily) sharedChains() []sharedChain {
	hook := func(name string, h *nftables.ChainHook, p *nftables.ChainPriority) *nftables.Chain {
		return &nftables.Chain{Name: name, Table: f.table, Type: nftables.ChainTypeNAT, Hooknum: h, Priority: p}
	}
	return []sharedChain{
		{f.chain(nftHostports), [][]expr.Any{f.hostIPPortsDispatch(), f.portsDispatch()}},
		{hook("prerouting", nftables.ChainHookPrerouting, nftables.ChainPriorityNATDest), [][]expr.Any{localToHostports()}},
		{hook("output", nftables.ChainHookOutput, nftables.ChainPriorityNATDest), [][]expr.Any{localToHostports()}},
		{hook("postrouting", nftables.ChainHookPostrouting, nftables.ChainPriorityNATSource), [][]expr.Any{f.masqDispatch()}},
	}
}

// ensureBase queues the table, the maps and the shared chains, with the shared chains'
// rules rewritten: every statement is idempotent, so concurrent ADDs (each one atomic
// transaction) converge on the same layout, and an ADD repairs a damaged base layout
// with it.
func (f *nftFamily) ensureBase(c *nftables.Conn) error {
	c.AddTable(f.table)
	for _, s := range []*nftables.Set{f.hostIPPorts, f.ports, f.masq} {
		if err := c.AddSet(s, nil); err != nil {
			return fmt.Errorf("nftables: map %s: %w", s.Name, err)
		}
	}
	for _, sc := range f.sharedChains() {
		ch := c.AddChain(sc.chain)
		c.FlushChain(ch)
		for _, r := range sc.rules {
			c.AddRule(&nftables.Rule{Table: f.table, Chain: ch, Exprs: r})
		}
	}
	return nil
}

// baseIntact reads the shared chains' rules and tells whether each holds what
// ensureBase writes. A missing table or chain reads as damage, and so does a failed
// read (a rule of someone else's that google/nftables cannot parse would otherwise
// fail every ADD): the transaction that rewrites them reports what really fails.
func (f *nftFamily) baseIntact(c *nftables.Conn) bool {
	for _, sc := range f.sharedChains() {
		rules, err := c.GetRules(f.table, sc.chain)
		if err != nil || len(rules) != len(sc.rules) {
			return false
		}
		for i, r := range rules {
			if !nftexpr.Same(byte(f.table.Family), r.Exprs, sc.rules[i]) {
				return false
			}
		}
	}
	return true
}

// localToHostports is `fib daddr type local jump hostports`.
func localToHostports() []expr.Any {
	return nftexpr.Rule(nftexpr.FibDaddrTypeLocal(), nftexpr.Jump(nftHostports))
}

// hostIPPortsDispatch is `meta l4proto . ip daddr . th dport vmap @hostip_ports`.
func (f *nftFamily) hostIPPortsDispatch() []expr.Any {
	return nftexpr.VMap(f.hostIPPorts, nftexpr.L4Proto, nftexpr.Daddr(f.v6), nftexpr.THDport)
}

// portsDispatch is `meta l4proto . th dport vmap @ports`.
func (f *nftFamily) portsDispatch() []expr.Any {
	return nftexpr.VMap(f.ports, nftexpr.L4Proto, nftexpr.THDport)
}

// masqDispatch is `ct status dnat ip daddr vmap @masq`.
func (f *nftFamily) masqDispatch() []expr.Any {
	return nftexpr.Rule(nftexpr.CtStatusDNAT(), nftexpr.VMap(f.masq, nftexpr.Daddr(f.v6)))
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
	if len(f) != 5 || protoNumber(f[0]) == 0 {
		return nftMapping{}, false
	}
	hp, err1 := strconv.ParseUint(f[1], 10, 16)
	cp, err2 := strconv.ParseUint(f[4], 10, 16)
	target, err3 := netip.ParseAddr(f[3])
	var host netip.Addr
	var err4 error
	if f[2] != "*" {
		host, err4 = netip.ParseAddr(f[2])
	}
	if cmp.Or(err1, err2, err3, err4) != nil {
		return nftMapping{}, false
	}
	return nftMapping{mapping{proto: f[0], hostPort: uint16(hp), containerPort: uint16(cp), hostIP: host}, target}, true
}

// key is the mapping's element key in hostip_ports (`tcp . 10.0.0.1 . 8080`) or ports
// (`tcp . 8080`).
func (m nftMapping) key() []byte {
	proto, port := []byte{protoNumber(m.proto)}, nftexpr.Port(m.hostPort)
	if m.hostIP.IsValid() {
		return nftexpr.Key(proto, m.hostIP.AsSlice(), port)
	}
	return nftexpr.Key(proto, port)
}

func (f *nftFamily) mapOf(m nftMapping) *nftables.Set {
	if m.hostIP.IsValid() {
		return f.hostIPPorts
	}
	return f.ports
}

// keyID names the map and key of m: two mappings with one keyID claim one element.
func (f *nftFamily) keyID(m nftMapping) string {
	return f.mapOf(m).Name + "\x00" + string(m.key())
}

// dnatRule is `[conditions] tcp dport 8080 [ip daddr H] dnat to 10.1.0.5:80`.
func (f *nftFamily) dnatRule(ch *nftables.Chain, o attachment, m nftMapping, conds []expr.Any) *nftables.Rule {
	exprs := nftexpr.Rule(conds, nftexpr.ProtoDPortIs(protoNumber(m.proto), m.hostPort))
	if m.hostIP.IsValid() {
		exprs = nftexpr.Rule(exprs, nftexpr.DaddrIs(m.hostIP))
	}
	exprs = nftexpr.Rule(exprs, nftexpr.DNAT(netip.AddrPortFrom(m.target, m.containerPort)))
	ud := userdata.AppendString(nil, userdata.TypeComment, o.nftComment())
	ud = userdata.AppendString(ud, udMapping, m.record())
	return &nftables.Rule{Table: f.table, Chain: ch, Exprs: exprs, UserData: ud}
}

// masqRules are the mq- chain's rules: `ip saddr 10.1.0.0/24 masquerade` (hairpin) and,
// v4, `ip saddr 127.0.0.0/8 masquerade` (localhost); with masqAll, `meta l4proto tcp ct
// original proto-dst 8080 masquerade` per mapping: every connection to a mapped port.
// Hairpin covers the container's whole subnet, as the iptables layout and the
// reference do: another container on the same bridge reaching this one through a host
// address gets replies straight over the bridge, which skip the host's un-DNAT unless
// bridged frames pass netfilter (br_netfilter, not loaded on plain podman hosts);
// masquerading makes the replies come back through the host.
func (f *nftFamily) masqRules(ch *nftables.Chain, o attachment, target netip.Prefix, maps []nftMapping, masqAll bool) []*nftables.Rule {
	ud := userdata.AppendString(nil, userdata.TypeComment, o.nftComment())
	var out []*nftables.Rule
	add := func(match []expr.Any) {
		out = append(out, &nftables.Rule{Table: f.table, Chain: ch, UserData: ud, Exprs: nftexpr.Rule(match, nftexpr.Masquerade())})
	}
	if masqAll {
		for _, m := range maps {
			add(nftexpr.Rule(nftexpr.L4ProtoIs(protoNumber(m.proto)), nftexpr.CtOriginalProtoDstIs(m.hostPort)))
		}
	} else {
		add(nftexpr.SaddrIn(target.Masked()))
	}
	if !f.v6 {
		add(nftexpr.SaddrIn(netip.MustParsePrefix("127.0.0.0/8")))
	}
	return out
}
