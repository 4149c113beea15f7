// Package nftexpr builds the expressions of nftables rules that plugins send over
// netlink (google/nftables): one function per piece of nft syntax, named after it and
// documented with the text `nft list ruleset` prints for it, so that plugin code reads
// like the rules it makes and never names a register, a header offset or a byte order.
// The tests compare each function's rule with nft's own listing of it.
//
// Registers: a match loads its field into register 1 and compares it there; the fields
// of a concatenated lookup key go to consecutive 32-bit registers from NFT_REG32_00, each
// starting on a register boundary (the kernel zero-pads short loads), as nft lays them
// out; dnat takes its address from register 1 and its port from register 2.
package nftexpr

import (
	"net"
	"net/netip"
	"slices"
	"strings"

	"github.com/google/nftables"
	"github.com/google/nftables/binaryutil"
	"github.com/google/nftables/expr"
	"golang.org/x/sys/unix"
)

const (
	regMatch = unix.NFT_REG_1
	regPort  = unix.NFT_REG_2
	regKey   = unix.NFT_REG32_00
	// ifNameSize is IFNAMSIZ: an interface name is compared over its NUL-padded buffer.
	ifNameSize = 16
	// ipsDstNAT is IPS_DST_NAT of the conntrack status bits (nf_conntrack_common.h).
	ipsDstNAT = 1 << 5
)

// Field is a packet or connection field that a match or a lookup key loads. It is plain
// data (what load builds is decided by kind), so the fields below are laid out by the
// linker rather than built by code that every exec of the binary would run before main.
type Field struct {
	kind   fieldKind
	key    uint32           // the expr.MetaKey or expr.CtKey
	base   expr.PayloadBase // a payload's header
	offset uint32           // a payload's offset in its header
	len    uint32           // bytes
}

// fieldKind is the expression that loads a field.
type fieldKind uint8

const (
	fieldMeta fieldKind = iota
	fieldPayload
	fieldCt
)

func meta(key expr.MetaKey, n uint32) Field {
	return Field{kind: fieldMeta, key: uint32(key), len: n}
}

func payload(base expr.PayloadBase, offset, n uint32) Field {
	return Field{kind: fieldPayload, base: base, offset: offset, len: n}
}

func ct(key expr.CtKey, n uint32) Field {
	return Field{kind: fieldCt, key: uint32(key), len: n}
}

// load is the expression that loads the field into register dst.
func (f Field) load(dst uint32) expr.Any {
	switch f.kind {
	case fieldMeta:
		return &expr.Meta{Key: expr.MetaKey(f.key), Register: dst}
	case fieldCt:
		return &expr.Ct{Key: expr.CtKey(f.key), Register: dst}
	}
	return &expr.Payload{DestRegister: dst, Base: f.base, Offset: f.offset, Len: f.len}
}

// The fields, by their nft names.
var (
	// L4Proto is `meta l4proto`, the transport protocol number.
	L4Proto = meta(expr.MetaKeyL4PROTO, 1)
	// NFProto is `meta nfproto`, the packet's family in an inet table.
	NFProto = meta(expr.MetaKeyNFPROTO, 1)
	// IIFName is `iifname`, the name of the interface the packet came in by.
	IIFName = meta(expr.MetaKeyIIFNAME, ifNameSize)
	// OIFName is `oifname`, the name of the interface the packet leaves by.
	OIFName = meta(expr.MetaKeyOIFNAME, ifNameSize)
	// Mark is `meta mark`.
	Mark = meta(expr.MetaKeyMARK, 4)
	// THDport is `th dport`: the destination port of any transport header that has one
	// where TCP, UDP and SCTP have it (2 bytes at offset 2).
	THDport = payload(expr.PayloadBaseTransportHeader, 2, 2)
	// EtherSaddr is `ether saddr`, the source MAC address.
	EtherSaddr = payload(expr.PayloadBaseLLHeader, 6, 6)
	// CtStatus is `ct status`, the connection's IPS_* bits.
	CtStatus = ct(expr.CtKeySTATUS, 4)
	// CtState is `ct state`, the connection's state bits (new, established, ...).
	CtState = ct(expr.CtKeySTATE, 4)
	// CtOriginalProtoDst is `ct original proto-dst`: the destination port the
	// connection's first packet had, before any DNAT.
	CtOriginalProtoDst = ct(expr.CtKeyPROTODST, 2)
)

// Saddr is `ip saddr`, or `ip6 saddr` for v6.
func Saddr(v6 bool) Field {
	if v6 {
		return payload(expr.PayloadBaseNetworkHeader, 8, 16)
	}
	return payload(expr.PayloadBaseNetworkHeader, 12, 4)
}

// Daddr is `ip daddr`, or `ip6 daddr` for v6.
func Daddr(v6 bool) Field {
	if v6 {
		return payload(expr.PayloadBaseNetworkHeader, 24, 16)
	}
	return payload(expr.PayloadBaseNetworkHeader, 16, 4)
}

// Rule joins a rule's parts (its matches, then its statement) into one expression list.
func Rule(parts ...[]expr.Any) []expr.Any { return slices.Concat(parts...) }

// Is is `<field> <value>`, the field equal to value (in the field's own byte order).
func Is(f Field, value []byte) []expr.Any { return Compare(f, expr.CmpOpEq, value) }

// Compare is Is for expr.CmpOpEq and `<field> != <value>` for expr.CmpOpNeq, for a
// caller that reads the operator from nft syntax.
func Compare(f Field, op expr.CmpOp, value []byte) []expr.Any {
	return []expr.Any{f.load(regMatch), &expr.Cmp{Op: op, Register: regMatch, Data: value}}
}

// In is `ip saddr 10.1.0.0/24` for Saddr(false) and that prefix: an address field inside
// p. A full-length prefix is `ip saddr 10.1.0.5`.
func In(f Field, p netip.Prefix) []expr.Any { return InPrefix(f, p, expr.CmpOpEq) }

// NotIn is `ip daddr != 224.0.0.0/4`: an address field outside p.
func NotIn(f Field, p netip.Prefix) []expr.Any { return InPrefix(f, p, expr.CmpOpNeq) }

// InPrefix is In for expr.CmpOpEq and NotIn for expr.CmpOpNeq, for a caller that reads
// the operator from nft syntax.
func InPrefix(f Field, p netip.Prefix, op expr.CmpOp) []expr.Any {
	p = p.Masked()
	out := []expr.Any{f.load(regMatch)}
	if n := p.Addr().BitLen(); p.Bits() < n {
		mask := net.CIDRMask(p.Bits(), n)
		out = append(out, &expr.Bitwise{SourceRegister: regMatch, DestRegister: regMatch, Len: uint32(len(mask)),
			Mask: mask, Xor: make([]byte, len(mask))})
	}
	return append(out, &expr.Cmp{Op: op, Register: regMatch, Data: p.Addr().AsSlice()})
}

// AnyBit is `ct status dnat` for CtStatus and IPS_DST_NAT: some bit of mask set in a
// 32-bit field kept in host byte order.
func AnyBit(f Field, mask uint32) []expr.Any {
	return []expr.Any{
		f.load(regMatch),
		&expr.Bitwise{SourceRegister: regMatch, DestRegister: regMatch, Len: 4,
			Mask: HostOrder(mask), Xor: make([]byte, 4)},
		&expr.Cmp{Op: expr.CmpOpNeq, Register: regMatch, Data: make([]byte, 4)},
	}
}

// L4ProtoIs is `meta l4proto tcp` for proto 6.
func L4ProtoIs(proto uint8) []expr.Any { return Is(L4Proto, []byte{proto}) }

// DPortIs is `th dport 8080`.
func DPortIs(port uint16) []expr.Any { return Is(THDport, Port(port)) }

// ProtoDPortIs is `tcp dport 8080` for 6 and 8080: nft's short form of `meta l4proto
// tcp th dport 8080`, which is what it sends.
func ProtoDPortIs(proto uint8, port uint16) []expr.Any { return Rule(L4ProtoIs(proto), DPortIs(port)) }

// NFProtoIs is `meta nfproto ipv4`, or `meta nfproto ipv6` for v6.
func NFProtoIs(v6 bool) []expr.Any {
	if v6 {
		return Is(NFProto, []byte{unix.NFPROTO_IPV6})
	}
	return Is(NFProto, []byte{unix.NFPROTO_IPV4})
}

// SaddrIn is `ip saddr 10.1.0.0/24` (`ip6 saddr` for an IPv6 prefix).
func SaddrIn(p netip.Prefix) []expr.Any { return In(Saddr(p.Addr().Is6()), p) }

// DaddrIs is `ip daddr 10.1.0.5` (`ip6 daddr` for an IPv6 address).
func DaddrIs(a netip.Addr) []expr.Any { return Is(Daddr(a.Is6()), a.AsSlice()) }

// IIFNameIs is `iifname "veth0"`.
func IIFNameIs(name string) []expr.Any { return Is(IIFName, IfName(name)) }

// EtherSaddrIs is `ether saddr 02:00:00:00:00:01`.
func EtherSaddrIs(mac net.HardwareAddr) []expr.Any { return Is(EtherSaddr, mac) }

// CtStatusDNAT is `ct status dnat`: the connection's destination was translated.
func CtStatusDNAT() []expr.Any { return AnyBit(CtStatus, ipsDstNAT) }

// CtStateEstablishedRelated is `ct state established,related`: a reply, or a flow that
// an accepted one opened (an ICMP error, an FTP data connection).
func CtStateEstablishedRelated() []expr.Any {
	return AnyBit(CtState, expr.CtStateBitESTABLISHED|expr.CtStateBitRELATED)
}

// CtOriginalProtoDstIs is `ct original proto-dst 8080`; nft shows the port as a number
// only after a protocol match (`meta l4proto tcp ct original proto-dst 8080`).
func CtOriginalProtoDstIs(port uint16) []expr.Any { return Is(CtOriginalProtoDst, Port(port)) }

// FibDaddrTypeLocal is `fib daddr type local`: the destination is an address of this
// host (in this network namespace).
func FibDaddrTypeLocal() []expr.Any {
	return []expr.Any{
		&expr.Fib{Register: regMatch, FlagDADDR: true, ResultADDRTYPE: true},
		&expr.Cmp{Op: expr.CmpOpEq, Register: regMatch, Data: HostOrder(unix.RTN_LOCAL)},
	}
}

// HostOrder is a 32-bit value as a field kept in host byte order holds it (meta mark,
// ct status).
func HostOrder(v uint32) []byte { return binaryutil.NativeEndian.PutUint32(v) }

// Port is a port as a field holds it (network byte order), for Is and set keys.
func Port(p uint16) []byte { return binaryutil.BigEndian.PutUint16(p) }

// IfName is an interface name as IIFName and OIFName compare it: a name ending in "*"
// (`iifname "veth*"`) matches every name it starts, any other is compared whole, over
// its NUL-padded buffer.
func IfName(name string) []byte {
	if prefix, wild := strings.CutSuffix(name, "*"); wild {
		return []byte(prefix)
	}
	b := make([]byte, ifNameSize)
	copy(b, name)
	return b
}

// VMap is `meta l4proto . th dport vmap @ports` for VMap(ports, L4Proto, THDport): the
// fields, concatenated in order, looked up in a verdict map whose verdict is taken.
func VMap(set *nftables.Set, fields ...Field) []expr.Any {
	out, src := loadKey(fields)
	return append(out, &expr.Lookup{SourceRegister: src, SetName: set.Name, SetID: set.ID, IsDestRegSet: true})
}

// loadKey loads a lookup key and returns the register it starts in: one field goes to
// register 1, several to consecutive 32-bit registers.
func loadKey(fields []Field) ([]expr.Any, uint32) {
	if len(fields) == 1 {
		return []expr.Any{fields[0].load(regMatch)}, regMatch
	}
	var out []expr.Any
	r := uint32(regKey)
	for _, f := range fields {
		out = append(out, f.load(r))
		r += (f.len + 3) / 4
	}
	return out, regKey
}

// InSet is `iifname @policed` for InSet(policed, IIFName), or `iifname . oifname @pairs`
// for two fields: the fields, concatenated in order, are a member of the set.
func InSet(set *nftables.Set, fields ...Field) []expr.Any {
	out, src := loadKey(fields)
	return append(out, &expr.Lookup{SourceRegister: src, SetName: set.Name, SetID: set.ID})
}

// Key is the key of a map element for a VMap of several fields (`tcp . 8080` for the
// values of L4Proto and THDport): the values concatenated, each padded to whole 32-bit
// registers as the lookup loads them.
func Key(values ...[]byte) []byte {
	var k []byte
	for _, v := range values {
		k = append(k, v...)
		k = append(k, make([]byte, (4-len(v)%4)%4)...)
	}
	return k
}

// DNAT is `dnat to 10.1.0.5:80` (an ip or ip6 table; `dnat ip to` in an inet table).
func DNAT(to netip.AddrPort) []expr.Any {
	fam := uint32(unix.NFPROTO_IPV4)
	if to.Addr().Is6() {
		fam = unix.NFPROTO_IPV6
	}
	return []expr.Any{
		&expr.Immediate{Register: regMatch, Data: to.Addr().AsSlice()},
		&expr.Immediate{Register: regPort, Data: Port(to.Port())},
		&expr.NAT{Type: expr.NATTypeDestNAT, Family: fam, RegAddrMin: regMatch, RegProtoMin: regPort, Specified: true},
	}
}

// Masquerade is `masquerade`.
func Masquerade() []expr.Any { return []expr.Any{&expr.Masq{}} }

// Jump is `jump <chain>`.
func Jump(chain string) []expr.Any { return verdict(expr.VerdictJump, chain) }

// Return is `return`.
func Return() []expr.Any { return verdict(expr.VerdictReturn, "") }

// Accept is `accept`.
func Accept() []expr.Any { return verdict(expr.VerdictAccept, "") }

// Drop is `drop`.
func Drop() []expr.Any { return verdict(expr.VerdictDrop, "") }

func verdict(kind expr.VerdictKind, chain string) []expr.Any {
	return []expr.Any{&expr.Verdict{Kind: kind, Chain: chain}}
}

// JumpTo is the verdict data of a verdict map element that jumps to chain, as
// `10.1.0.5 : jump <chain>` shows it.
func JumpTo(chain string) *expr.Verdict { return &expr.Verdict{Kind: expr.VerdictJump, Chain: chain} }

// GotoTo is the verdict data of a map element that goes to chain (`: goto <chain>`).
func GotoTo(chain string) *expr.Verdict { return &expr.Verdict{Kind: expr.VerdictGoto, Chain: chain} }

// VerdictChain returns the chain a rule's `jump <chain>` or `goto <chain>` names, "" for
// a rule without one.
func VerdictChain(exprs []expr.Any) string {
	for _, e := range exprs {
		if v, ok := e.(*expr.Verdict); ok && (v.Kind == expr.VerdictJump || v.Kind == expr.VerdictGoto) {
			return v.Chain
		}
	}
	return ""
}
