package nftexpr

import (
	"bytes"

	"github.com/google/nftables/expr"
)

// Same reports whether a rule as the kernel lists it (got) says what a builder's
// expressions (want) say, for rules this program wrote itself: each expression's
// netlink encoding compared with the registers left out, since the kernel lists a
// 32-bit register by its 128-bit name where one starts there (NFT_REG32_00 as
// NFT_REG_1) and fills in a nat statement's unset max registers, and with the lookups'
// set IDs left out (a batch names a set it declares by ID, the kernel by name). Rules
// another program compiled go through the readers (Has, HasPrefix, …) instead.
func Same(family byte, got, want []expr.Any) bool {
	if len(got) != len(want) {
		return false
	}
	for i := range got {
		g, err1 := expr.Marshal(family, withoutRegisters(got[i]))
		w, err2 := expr.Marshal(family, withoutRegisters(want[i]))
		if err1 != nil || err2 != nil || !bytes.Equal(g, w) {
			return false
		}
	}
	return true
}

// withoutRegisters is a copy of e with its registers (and a lookup's set ID) zeroed.
func withoutRegisters(e expr.Any) expr.Any {
	switch e := e.(type) {
	case *expr.Meta:
		return copyWith(e, func(c *expr.Meta) { c.Register = 0 })
	case *expr.Payload:
		return copyWith(e, func(c *expr.Payload) { c.DestRegister, c.SourceRegister = 0, 0 })
	case *expr.Cmp:
		return copyWith(e, func(c *expr.Cmp) { c.Register = 0 })
	case *expr.Bitwise:
		return copyWith(e, func(c *expr.Bitwise) { c.SourceRegister, c.DestRegister = 0, 0 })
	case *expr.Lookup:
		return copyWith(e, func(c *expr.Lookup) { c.SourceRegister, c.DestRegister, c.SetID = 0, 0, 0 })
	case *expr.Immediate:
		return copyWith(e, func(c *expr.Immediate) { c.Register = 0 })
	case *expr.Ct:
		return copyWith(e, func(c *expr.Ct) { c.Register = 0 })
	case *expr.Fib:
		return copyWith(e, func(c *expr.Fib) { c.Register = 0 })
	case *expr.NAT:
		return copyWith(e, func(c *expr.NAT) { c.RegAddrMin, c.RegAddrMax, c.RegProtoMin, c.RegProtoMax = 0, 0, 0, 0 })
	}
	return e
}

// copyWith is a copy of *e changed by change; e itself stays as it is, since it is the
// caller's rule.
func copyWith[T any](e *T, change func(*T)) *T {
	c := *e
	change(&c)
	return &c
}
