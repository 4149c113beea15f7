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
		c := *e
		c.Register = 0
		return &c
	case *expr.Payload:
		c := *e
		c.DestRegister, c.SourceRegister = 0, 0
		return &c
	case *expr.Cmp:
		c := *e
		c.Register = 0
		return &c
	case *expr.Bitwise:
		c := *e
		c.SourceRegister, c.DestRegister = 0, 0
		return &c
	case *expr.Lookup:
		c := *e
		c.SourceRegister, c.DestRegister, c.SetID = 0, 0, 0
		return &c
	case *expr.Immediate:
		c := *e
		c.Register = 0
		return &c
	case *expr.Ct:
		c := *e
		c.Register = 0
		return &c
	case *expr.Fib:
		c := *e
		c.Register = 0
		return &c
	case *expr.NAT:
		c := *e
		c.RegAddrMin, c.RegAddrMax, c.RegProtoMin, c.RegProtoMax = 0, 0, 0, 0
		return &c
	}
	return e
}
