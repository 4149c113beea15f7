package nftexpr

import (
	"bytes"
	"net"
	"net/netip"
	"slices"

	"github.com/google/nftables/expr"
)

// The readers below answer "does this rule, as the kernel lists it, say X" for rules
// that another program compiled (nft, knftables): they accept each of the ways nft
// compiles one piece of syntax, where comparing with the builders' expressions would
// depend on one nft version's choices (`ip daddr != 10.1.0.0/24` is a 3-byte load and
// a compare, not a 4-byte load, a mask and a compare).

// condition is one comparison of a rule: what was loaded (the load expression, its
// register cleared), the mask applied to it (nil for none) and the comparison.
type condition struct {
	load expr.Any
	mask []byte
	op   expr.CmpOp
	data []byte
}

// conditions reads the comparisons of exprs in order. A load, an optional bitwise
// mask and a compare on one register make one condition.
func conditions(exprs []expr.Any) []condition {
	var out []condition
	loaded := map[uint32]condition{}
	for _, e := range exprs {
		switch e := e.(type) {
		case *expr.Payload:
			loaded[e.DestRegister] = condition{load: &expr.Payload{Base: e.Base, Offset: e.Offset, Len: e.Len}}
		case *expr.Meta:
			loaded[e.Register] = condition{load: &expr.Meta{Key: e.Key}}
		case *expr.Ct:
			loaded[e.Register] = condition{load: &expr.Ct{Key: e.Key, Direction: e.Direction}}
		case *expr.Bitwise:
			c, ok := loaded[e.SourceRegister]
			if ok && len(e.Xor) > 0 && bytes.Count(e.Xor, []byte{0}) == len(e.Xor) {
				c.mask = e.Mask
				loaded[e.DestRegister] = c
			} else {
				delete(loaded, e.DestRegister)
			}
		case *expr.Cmp:
			if c, ok := loaded[e.Register]; ok {
				c.op, c.data = e.Op, e.Data
				out = append(out, c)
			}
		}
	}
	return out
}

// sameField tells whether a condition's load reads field f: the same payload base and
// offset (a load may be shorter than the field, as for a prefix of it), or the same
// meta or ct key.
func sameField(load expr.Any, f Field) bool {
	switch want := f.load(regMatch).(type) {
	case *expr.Payload:
		got, ok := load.(*expr.Payload)
		return ok && got.Base == want.Base && got.Offset == want.Offset && got.Len <= want.Len
	case *expr.Meta:
		got, ok := load.(*expr.Meta)
		return ok && got.Key == want.Key
	case *expr.Ct:
		got, ok := load.(*expr.Ct)
		return ok && got.Key == want.Key && got.Direction == want.Direction
	}
	return false
}

// Has reports whether the rule compares field f with value as Is (expr.CmpOpEq) or
// IsNot (expr.CmpOpNeq) make it: `tcp dport 8080` has L4Proto 6 and THDport 8080.
func Has(exprs []expr.Any, f Field, op expr.CmpOp, value []byte) bool {
	return slices.ContainsFunc(conditions(exprs), func(c condition) bool {
		return c.op == op && c.mask == nil && sameField(c.load, f) && bytes.Equal(c.data, value)
	})
}

// Value returns what the rule requires field f to equal, compared whole (`tcp dport
// 8080` gives THDport 8080, `ip daddr 10.1.0.5` gives Daddr 10.1.0.5): the first such
// comparison's value.
func Value(exprs []expr.Any, f Field) ([]byte, bool) {
	for _, c := range conditions(exprs) {
		if p, ok := c.load.(*expr.Payload); ok && p.Len != f.len {
			continue // a prefix of the field
		}
		if c.op == expr.CmpOpEq && c.mask == nil && sameField(c.load, f) {
			return c.data, true
		}
	}
	return nil, false
}

// HasPrefix reports whether the rule matches the address field f inside (expr.CmpOpEq)
// or outside (expr.CmpOpNeq) p, in any of nft's spellings: the whole address compared
// (a full-length p, `ip saddr 10.1.0.5`), a load cut to the prefix's whole bytes, or a
// load masked to the prefix.
func HasPrefix(exprs []expr.Any, f Field, op expr.CmpOp, p netip.Prefix) bool {
	p = p.Masked()
	addr := p.Addr().AsSlice()
	for _, c := range conditions(exprs) {
		if c.op != op || !sameField(c.load, f) || len(c.data) > len(addr) {
			continue
		}
		n := len(c.data)
		mask := c.mask
		if mask == nil {
			mask = bytes.Repeat([]byte{0xff}, n)
		}
		if bytes.Equal(mask, net.CIDRMask(p.Bits(), 8*len(addr))[:n]) && p.Bits() <= 8*n &&
			bytes.Equal(c.data, addr[:n]) {
			return true
		}
	}
	return false
}

// DNATTo returns the address and port of the rule's `dnat to <addr>:<port>`: the
// immediates loaded into the registers its nat statement takes them from.
func DNATTo(exprs []expr.Any) (netip.AddrPort, bool) {
	imm := map[uint32][]byte{}
	for _, e := range exprs {
		switch e := e.(type) {
		case *expr.Immediate:
			imm[e.Register] = e.Data
		case *expr.NAT:
			if e.Type != expr.NATTypeDestNAT {
				return netip.AddrPort{}, false
			}
			a, ok := netip.AddrFromSlice(imm[e.RegAddrMin])
			port := imm[e.RegProtoMin]
			if !ok || len(port) != 2 {
				return netip.AddrPort{}, false
			}
			return netip.AddrPortFrom(a, uint16(port[0])<<8|uint16(port[1])), true
		}
	}
	return netip.AddrPort{}, false
}

// Masquerades reports whether the rule's statement is `masquerade`.
func Masquerades(exprs []expr.Any) bool {
	return slices.ContainsFunc(exprs, func(e expr.Any) bool {
		_, ok := e.(*expr.Masq)
		return ok
	})
}
