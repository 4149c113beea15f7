package portmap

import (
	"net/netip"
	"strconv"
	"strings"

	"github.com/google/nftables/expr"

	"github.com/cnikit/cni/internal/core/cnierror"
	"github.com/cnikit/cni/internal/host/nftexpr"
)

// parseConditions compiles conditionsV4/V6 written in nft syntax into expressions sent
// over netlink, for the grammar most conditions use: a sequence of
//
//	ip|ip6 saddr|daddr [==|!=] ADDR[/LEN]
//	[meta] iifname|oifname [==|!=] NAME   (NAME may end in * for a prefix match)
//	meta mark [==|!=] VALUE
//
// Anything else is an error (an invalid config naming the field), and the conditions
// go to nft as written instead (see nftgate.go).
func parseConditions(field string, conds []string, v6 bool) ([]expr.Any, error) {
	exprs, _, err := compileConditions(field, conds, v6)
	return exprs, err
}

// compileConditions is parseConditions that also tells, on failure, which element of
// conds the clause it could not compile starts in.
func compileConditions(field string, conds []string, v6 bool) ([]expr.Any, int, error) {
	var (
		toks []string
		elem []int // the element each token comes from
	)
	for i, c := range conds {
		for _, tok := range strings.Fields(c) {
			toks, elem = append(toks, tok), append(elem, i)
		}
	}
	all := len(toks)
	var out []expr.Any
	for len(toks) > 0 {
		at := elem[all-len(toks)]
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
			return nil, at, cnierror.Invalid("%s: unsupported nft condition at %q", field, strings.Join(toks, " "))
		}
		if err != nil {
			return nil, at, err
		}
		out = append(out, exprs...)
		toks = toks[n:]
	}
	return out, 0, nil
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
		return nil, 0, cnierror.Invalid("%s: %q matches the wrong address family", field, toks[0])
	}
	if len(toks) < 3 || (toks[1] != "saddr" && toks[1] != "daddr") {
		return nil, 0, cnierror.Invalid("%s: expected %s saddr|daddr ADDR", field, toks[0])
	}
	op, i := operator(toks, 2)
	if i >= len(toks) {
		return nil, 0, cnierror.Invalid("%s: missing address after %s %s", field, toks[0], toks[1])
	}
	pfx, err := parsePrefix(toks[i])
	if err != nil || pfx.Addr().Is6() != v6 {
		return nil, 0, cnierror.Invalid("%s: invalid address %q", field, toks[i])
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

// addrMatch is `ip saddr|daddr [!=] ADDR[/LEN]`.
func addrMatch(src bool, pfx netip.Prefix, op expr.CmpOp) []expr.Any {
	field := nftexpr.Daddr(pfx.Addr().Is6())
	if src {
		field = nftexpr.Saddr(pfx.Addr().Is6())
	}
	return nftexpr.InPrefix(field, pfx, op)
}

func parseIfnameMatch(field string, toks []string) ([]expr.Any, int, error) {
	if len(toks) == 0 || (toks[0] != "iifname" && toks[0] != "oifname") {
		return nil, 0, cnierror.Invalid("%s: expected iifname or oifname after meta", field)
	}
	iface := nftexpr.IIFName
	if toks[0] == "oifname" {
		iface = nftexpr.OIFName
	}
	op, i := operator(toks, 1)
	if i >= len(toks) {
		return nil, 0, cnierror.Invalid("%s: missing interface name after %s", field, toks[0])
	}
	name := strings.Trim(toks[i], `"`)
	if name == "" || name == "*" || len(name) > 15 {
		return nil, 0, cnierror.Invalid("%s: invalid interface name %q", field, name)
	}
	return nftexpr.Compare(iface, op, nftexpr.IfName(name)), i + 1, nil
}

func parseMarkMatch(field string, toks []string) ([]expr.Any, int, error) {
	op, i := operator(toks, 2)
	if i >= len(toks) {
		return nil, 0, cnierror.Invalid("%s: missing value after meta mark", field)
	}
	v, err := strconv.ParseUint(toks[i], 0, 32)
	if err != nil {
		return nil, 0, cnierror.Invalid("%s: invalid mark %q", field, toks[i])
	}
	return nftexpr.Compare(nftexpr.Mark, op, nftexpr.HostOrder(uint32(v))), i + 1, nil
}
