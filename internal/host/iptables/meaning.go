package iptables

import (
	"cmp"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"strings"
)

// option is one option of a rule as iptables understands it, whatever its spelling.
type option struct {
	// owner is "" for iptables' own options (-s, -d, -p, -i, -o, -f, -j, -g), the match
	// module an option belongs to ("tcp" for --dport, whether `-m tcp` was written or
	// implied by -p tcp), or "=> TARGET" for the options of the target.
	owner string
	// name is the canonical spelling: "-s" for --source and --src, "--dport" for
	// --destination-port; "" for a stray value, kept so that it still tells rules apart.
	name  string
	neg   bool
	value string
}

// meaning is the canonical text of r: its options sorted, so that match order does not
// count (matches are a conjunction).
func (r Rule) meaning() string {
	opts := r.options()
	slices.SortFunc(opts, func(a, b option) int {
		return cmp.Or(strings.Compare(a.owner, b.owner), strings.Compare(a.name, b.name),
			strings.Compare(a.value, b.value), boolCompare(a.neg, b.neg))
	})
	var b strings.Builder
	for _, o := range opts {
		b.WriteString(o.owner)
		b.WriteByte(0)
		if o.neg {
			b.WriteString("! ")
		}
		b.WriteString(o.name)
		b.WriteByte(0)
		b.WriteString(o.value)
		b.WriteByte(0)
	}
	return b.String()
}

func boolCompare(a, b bool) int {
	switch {
	case a == b:
		return 0
	case a:
		return 1
	}
	return -1
}

// matches counts the match modules r uses (comment, conntrack, multiport, the one -p
// loads for --dport...). iptables -C compares a rule's matches in the order they were
// written, where Same does not: only for a rule of one match at most are the two the
// same question.
func (r Rule) matches() int {
	seen := map[string]bool{}
	for o := range r.walk {
		if o.owner != "" && !strings.HasPrefix(o.owner, "=> ") {
			seen[o.owner] = true
		}
	}
	return len(seen)
}

// options reads r the way iptables parses a rule. The equivalences it knows:
//   - long and short names (--source, --src, -s; --destination-port, --dport; ...);
//   - negation before the option (`! -d x`) or, the old form, after it (`-d ! x`);
//   - `-m tcp` written or implied by `-p tcp` (likewise udp, sctp, ...);
//   - addresses with or without their prefix length, a dotted mask, host bits set;
//     a match on 0.0.0.0/0 (::/0) or `-p all` is no match at all;
//   - protocol numbers and names; port lists and state lists in any order; marks in
//     decimal or hex, with or without the full mask; --set-mark as --set-xmark;
//   - the DNAT/SNAT address written in any form netip reads.
//
// Anything else is compared as written.
func (r Rule) options() []option {
	out := make([]option, 0, len(r)/2)
	for o := range r.walk {
		if o, keep := canonicalOption(o); keep {
			out = append(out, o)
		}
	}
	return out
}

// walk yields each option of r as written (name canonical, value not yet), in order.
func (r Rule) walk(fn func(option) bool) {
	var (
		module, proto string
		neg           bool
	)
	for i := 0; i < len(r); i++ {
		tok := r[i]
		if tok == "!" {
			neg = true
			continue
		}
		name, isOption := canonicalName(tok)
		if !isOption {
			if !fn(option{owner: module, neg: neg, value: tok}) {
				return
			}
			neg = false
			continue
		}
		n := arity(name)
		if n != 0 && i+1 < len(r) && r[i+1] == "!" {
			neg = true // the old form, `-d ! 10.0.0.1`
			i++
		}
		vals := takeValues(r[i+1:], n)
		i += len(vals)
		value := strings.Join(vals, " ")
		switch name {
		case "-m":
			module = strings.ToLower(value)
		case "-j", "-g":
			if !fn(option{name: name, value: value}) {
				return
			}
			module = "=> " + value
		default:
			if name == "-p" {
				proto = canonicalProto(value)
			}
			if !fn(option{owner: ownerOf(name, module, proto), name: name, neg: neg, value: value}) {
				return
			}
		}
		neg = false
	}
}

// alias returns the spelling iptables lists (-S, iptables-save) for one of the long
// spellings iptables and its common modules accept, or "". A switch, not a map: a
// package-level map is built in every exec's start-up.
func alias(tok string) string {
	switch tok {
	case "--source", "--src":
		return "-s"
	case "--destination", "--dst":
		return "-d"
	case "--protocol":
		return "-p"
	case "--in-interface":
		return "-i"
	case "--out-interface":
		return "-o"
	case "--fragment":
		return "-f"
	case "--jump":
		return "-j"
	case "--goto":
		return "-g"
	case "--match":
		return "-m"
	case "--destination-port":
		return "--dport"
	case "--source-port":
		return "--sport"
	case "--destination-ports":
		return "--dports"
	case "--source-ports":
		return "--sports"
	}
	return ""
}

// canonicalName returns the canonical spelling of tok and whether tok is an option
// name at all (a value such as "-1" or "-" is not).
func canonicalName(tok string) (string, bool) {
	if len(tok) < 2 || tok[0] != '-' || (tok[1] >= '0' && tok[1] <= '9') {
		return tok, false
	}
	if a := alias(tok); a != "" {
		return a, true
	}
	return tok, true
}

// arity is the number of values an option takes; -1 for an option this package does not
// know, whose values run to the next option.
func arity(name string) int {
	switch name {
	case "-f", "--syn", "--random", "--random-fully", "--persistent", "--rsource", "--rdest":
		return 0
	case "--tcp-flags":
		return 2
	case "-s", "-d", "-p", "-i", "-o", "-j", "-g", "-m", "--dport", "--sport", "--dports", "--sports",
		"--ports", "--comment", "--ctstate", "--state", "--dst-type", "--src-type", "--mark",
		"--set-mark", "--set-xmark", "--to-destination", "--to-source", "--to-ports", "--match-set":
		return 1
	}
	return -1
}

// takeValues returns the values at the start of toks: n of them, or for n < 0 every
// token up to the next option or negation.
func takeValues(toks []string, n int) []string {
	if n >= 0 {
		return toks[:min(n, len(toks))]
	}
	i := 0
	for i < len(toks) && toks[i] != "!" {
		if _, isOption := canonicalName(toks[i]); isOption {
			break
		}
		i++
	}
	return toks[:i]
}

// portModule reports the matches that take --dport and --sport; such an option outside
// them belongs to the match -p loaded implicitly.
func portModule(module string) bool {
	switch module {
	case "tcp", "udp", "sctp", "dccp", "udplite":
		return true
	}
	return false
}

func ownerOf(name, module, proto string) string {
	switch {
	case name == "-s" || name == "-d" || name == "-p" || name == "-i" || name == "-o" || name == "-f":
		return ""
	case strings.HasPrefix(module, "=> "):
		return module
	case (name == "--dport" || name == "--sport") && !portModule(module):
		return proto
	case module == "":
		return proto // an option of the protocol's match, loaded without -m
	}
	return module
}

// canonicalOption rewrites o to the canonical form (canonicalValue); keep is false for
// an option that matches everything: an address without prefix bits, or every protocol.
func canonicalOption(o option) (_ option, keep bool) {
	o = canonicalValue(o)
	switch {
	case o.neg:
		return o, true
	case o.name == "-s" || o.name == "-d":
		return o, o.value != "0.0.0.0/0" && o.value != "::/0"
	}
	return o, o.name != "-p" || o.value != "all"
}

// canonicalValue rewrites o's value (and for --set-mark its name) to the form iptables
// lists it in.
func canonicalValue(o option) option {
	switch o.name {
	case "-s", "-d":
		if p, ok := parseNet(o.value); ok {
			o.value = p.String()
		}
	case "-p":
		o.value = canonicalProto(o.value)
	case "--dport", "--sport":
		o.value = canonicalPort(o.owner, o.value)
	case "--dports", "--sports", "--ports":
		o.value = sortedList(o.value, func(p string) string { return canonicalPort("", p) })
	case "--ctstate", "--state", "--dst-type", "--src-type":
		o.value = sortedList(o.value, strings.ToUpper)
	case "--mark", "--set-xmark":
		if v, m, ok := parseMark(o.value); ok {
			o.value = formatMark(v, m)
		}
	case "--set-mark":
		// --set-mark V/M zeroes M and sets V: the same as --set-xmark V/(M|V).
		if v, m, ok := parseMark(o.value); ok {
			o.name, o.value = "--set-xmark", formatMark(v, m|v)
		}
	case "--to-destination", "--to-source":
		if ap, err := netip.ParseAddrPort(o.value); err == nil {
			o.value = netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port()).String()
		} else if a, err := netip.ParseAddr(o.value); err == nil {
			o.value = a.Unmap().String()
		}
	}
	return o
}

// parseNet reads an address as iptables takes it: "10.1.0.5", "10.1.0.0/24",
// "10.1.0.0/255.255.255.0" or IPv6 forms, host bits masked off.
func parseNet(s string) (netip.Prefix, bool) {
	addr, bits, hasBits := strings.Cut(s, "/")
	a, err := netip.ParseAddr(addr)
	if err != nil || a.Zone() != "" {
		return netip.Prefix{}, false
	}
	a = a.Unmap()
	n := a.BitLen()
	if hasBits {
		if m, err := netip.ParseAddr(bits); err == nil && m.Is4() == a.Is4() {
			ones, size := net.IPMask(m.AsSlice()).Size()
			if size == 0 {
				return netip.Prefix{}, false // not a contiguous mask
			}
			n = ones
		} else if n, err = strconv.Atoi(bits); err != nil {
			return netip.Prefix{}, false
		}
	}
	p, err := a.Prefix(n)
	return p, err == nil
}

// canonicalProto is the name iptables lists (-S, iptables-save) for the protocols our
// layouts and common conditions use.
func canonicalProto(p string) string {
	p = strings.ToLower(p)
	switch p {
	case "0":
		return "all"
	case "1":
		return "icmp"
	case "6":
		return "tcp"
	case "17":
		return "udp"
	case "58", "icmpv6":
		return "ipv6-icmp"
	case "132":
		return "sctp"
	}
	return p
}

// canonicalPort writes a port or a range "lo:hi" in decimal; a service name is looked up
// for the protocol (proto "" means tcp).
func canonicalPort(proto, p string) string {
	lo, hi, isRange := strings.Cut(p, ":")
	lo, hi = portNumber(proto, lo), portNumber(proto, hi)
	if !isRange || lo == hi {
		return lo
	}
	return lo + ":" + hi
}

func portNumber(proto, p string) string {
	if n, err := strconv.ParseUint(p, 10, 16); err == nil {
		return strconv.FormatUint(n, 10)
	}
	if proto != "udp" && proto != "sctp" {
		proto = "tcp"
	}
	if n, err := net.LookupPort(proto, p); err == nil {
		return strconv.Itoa(n)
	}
	return p
}

func sortedList(list string, canon func(string) string) string {
	items := strings.Split(list, ",")
	for i, it := range items {
		items[i] = canon(strings.TrimSpace(it))
	}
	slices.Sort(items)
	return strings.Join(items, ",")
}

// parseMark reads "V" or "V/M" in any base strconv knows; V alone has the full mask.
func parseMark(s string) (v, m uint32, ok bool) {
	vs, ms, hasMask := strings.Cut(s, "/")
	v64, err := strconv.ParseUint(vs, 0, 32)
	if err != nil {
		return 0, 0, false
	}
	m64 := uint64(0xffffffff)
	if hasMask {
		if m64, err = strconv.ParseUint(ms, 0, 32); err != nil {
			return 0, 0, false
		}
	}
	return uint32(v64), uint32(m64), true
}

func formatMark(v, m uint32) string { return fmt.Sprintf("%#x/%#x", v, m) }
