package portmap

import (
	"net/netip"
	"strconv"
	"strings"

	"github.com/google/nftables/binaryutil"
	"github.com/google/nftables/expr"
)

// parseConditions compiles conditionsV4/V6 written in nft syntax into expressions. No
// `nft` is exec'd, so the supported grammar is the part that makes sense for a port
// mapping: a sequence of
//
//	ip|ip6 saddr|daddr [==|!=] ADDR[/LEN]
//	[meta] iifname|oifname [==|!=] NAME   (NAME may end in * for a prefix match)
//	meta mark [==|!=] VALUE
//
// Anything else is rejected as an invalid config naming the field.
func parseConditions(field string, conds []string, v6 bool) ([]expr.Any, error) {
	toks := strings.Fields(strings.Join(conds, " "))
	var out []expr.Any
	for len(toks) > 0 {
		var (
			exprs []expr.Any
			n     int
			err   error
		)
		switch toks[0] {
		case "ip", "ip6":
			exprs, n, err = parseAddrMatch(field, toks, v6)
		case "meta":
			if len(toks) > 1 && toks[1] == "mark" {
				exprs, n, err = parseMarkMatch(field, toks)
				break
			}
			exprs, n, err = parseIfnameMatch(field, toks[1:])
			n++
		case "iifname", "oifname":
			exprs, n, err = parseIfnameMatch(field, toks)
		default:
			return nil, invalid("%s: unsupported nft condition at %q", field, strings.Join(toks, " "))
		}
		if err != nil {
			return nil, err
		}
		out = append(out, exprs...)
		toks = toks[n:]
	}
	return out, nil
}

// operator consumes an optional "==" or "!=" at toks[i].
func operator(toks []string, i int) (expr.CmpOp, int) {
	if i < len(toks) {
		switch toks[i] {
		case "==":
			return expr.CmpOpEq, i + 1
		case "!=":
			return expr.CmpOpNeq, i + 1
		}
	}
	return expr.CmpOpEq, i
}

func parseAddrMatch(field string, toks []string, v6 bool) ([]expr.Any, int, error) {
	if (toks[0] == "ip6") != v6 {
		return nil, 0, invalid("%s: %q matches the wrong address family", field, toks[0])
	}
	if len(toks) < 3 || (toks[1] != "saddr" && toks[1] != "daddr") {
		return nil, 0, invalid("%s: expected %s saddr|daddr ADDR", field, toks[0])
	}
	op, i := operator(toks, 2)
	if i >= len(toks) {
		return nil, 0, invalid("%s: missing address after %s %s", field, toks[0], toks[1])
	}
	pfx, err := parsePrefix(toks[i])
	if err != nil || pfx.Addr().Is6() != v6 {
		return nil, 0, invalid("%s: invalid address %q", field, toks[i])
	}
	return addrMatch(toks[1] == "saddr", pfx, op), i + 1, nil
}

// parsePrefix accepts an address or a prefix; an address is a full-length prefix.
func parsePrefix(s string) (netip.Prefix, error) {
	if strings.Contains(s, "/") {
		p, err := netip.ParsePrefix(s)
		return p.Masked(), err
	}
	a, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Prefix{}, err
	}
	return netip.PrefixFrom(a, a.BitLen()), nil
}

// addrMatch loads the source or destination address and compares it (under the
// prefix's mask) with the prefix.
func addrMatch(src bool, pfx netip.Prefix, op expr.CmpOp) []expr.Any {
	a := pfx.Addr()
	n := uint32(a.BitLen() / 8)
	off := uint32(16) // IPv4 daddr
	switch {
	case a.Is4() && src:
		off = 12
	case a.Is6() && src:
		off = 8
	case a.Is6():
		off = 24
	}
	out := []expr.Any{&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: off, Len: n}}
	if pfx.Bits() < a.BitLen() {
		mask := netip.PrefixFrom(allOnes(a.Is6()), pfx.Bits()).Masked().Addr().AsSlice()
		out = append(out, &expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: n, Mask: mask, Xor: make([]byte, n)})
	}
	return append(out, &expr.Cmp{Op: op, Register: 1, Data: a.AsSlice()})
}

func allOnes(v6 bool) netip.Addr {
	if v6 {
		var b [16]byte
		for i := range b {
			b[i] = 0xff
		}
		return netip.AddrFrom16(b)
	}
	return netip.AddrFrom4([4]byte{0xff, 0xff, 0xff, 0xff})
}

func parseIfnameMatch(field string, toks []string) ([]expr.Any, int, error) {
	if len(toks) == 0 || (toks[0] != "iifname" && toks[0] != "oifname") {
		return nil, 0, invalid("%s: expected iifname or oifname after meta", field)
	}
	key := expr.MetaKeyIIFNAME
	if toks[0] == "oifname" {
		key = expr.MetaKeyOIFNAME
	}
	op, i := operator(toks, 1)
	if i >= len(toks) {
		return nil, 0, invalid("%s: missing interface name after %s", field, toks[0])
	}
	name := strings.Trim(toks[i], `"`)
	data := []byte(name)
	if strings.HasSuffix(name, "*") {
		data = []byte(strings.TrimSuffix(name, "*"))
	} else {
		// An exact name compares the whole IFNAMSIZ buffer, NUL padding included.
		data = append(data, make([]byte, 16-len(data)%16)...)
	}
	if name == "" || len(name) > 15 || len(data) == 0 {
		return nil, 0, invalid("%s: invalid interface name %q", field, name)
	}
	return []expr.Any{
		&expr.Meta{Key: key, Register: 1},
		&expr.Cmp{Op: op, Register: 1, Data: data},
	}, i + 1, nil
}

func parseMarkMatch(field string, toks []string) ([]expr.Any, int, error) {
	op, i := operator(toks, 2)
	if i >= len(toks) {
		return nil, 0, invalid("%s: missing value after meta mark", field)
	}
	v, err := strconv.ParseUint(toks[i], 0, 32)
	if err != nil {
		return nil, 0, invalid("%s: invalid mark %q", field, toks[i])
	}
	return []expr.Any{
		&expr.Meta{Key: expr.MetaKeyMARK, Register: 1},
		&expr.Cmp{Op: op, Register: 1, Data: binaryutil.NativeEndian.PutUint32(uint32(v))},
	}, i + 1, nil
}
