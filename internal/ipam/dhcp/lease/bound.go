package lease

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/netip"
	"time"

	"github.com/insomniacslk/dhcp/dhcpv4"

	"github.com/cnikit/cni/internal/ipam/dhcp/leasefile"
	"github.com/cnikit/cni/internal/result"
)

// DefaultLeaseTime is assumed when a server names no lease time, as the reference does.
const DefaultLeaseTime = time.Hour

// scopeLink is RT_SCOPE_LINK, for a classless route without a router.
const scopeLink = 253

// InfiniteLeaseTime is RFC 2131's lease time 0xffffffff, and RFC 8415's infinite
// lifetime: the address is the client's for good (dnsmasq's "infinite").
const InfiniteLeaseTime = time.Duration(0xffffffff) * time.Second

// Times are the moments that drive a lease: renew at T1, rebind at T2, give up at
// expiry (RFC 2131 §4.4.5; T1 and T2 default to 1/2 and 7/8 of the lease). An
// infinite lease is never renewed, rebound or expired: all three lie at Never.
type Times struct {
	Renew, Rebind, Expire time.Time
	Infinite              bool
}

// Forever are an infinite lease's Times: each lies later than any lease could run, and
// still at a time that time.Until and Format handle.
func Forever() Times {
	never := time.Date(9999, time.December, 31, 23, 59, 59, 0, time.UTC)
	return Times{Renew: never, Rebind: never, Expire: never, Infinite: true}
}

// Times returns b's renewal, rebinding and expiry moments. The fractions are taken
// as lt/2 and lt/8*7, since lt*7 overflows a Duration for leases over ~41 years, and
// no moment lies before the ACK.
func (b *Bound) Times() Times {
	lt := b.ACK.IPAddressLeaseTime(DefaultLeaseTime)
	if lt >= InfiniteLeaseTime {
		return Forever()
	}
	t1 := b.ACK.IPAddressRenewalTime(lt / 2)
	t2 := b.ACK.IPAddressRebindingTime(lt / 8 * 7)
	if t2 > lt || t2 <= 0 {
		t2 = lt / 8 * 7
	}
	if t1 > t2 || t1 <= 0 {
		t1 = min(lt/2, t2)
	}
	return Times{Renew: b.At.Add(t1), Rebind: b.At.Add(t2), Expire: b.At.Add(lt)}
}

// ExpireText is the expiry for a log line.
func (t Times) ExpireText() string {
	if t.Infinite {
		return "never (infinite lease)"
	}
	return t.Expire.Format(time.RFC3339)
}

// Addr is the leased address with the server's mask.
func (b *Bound) Addr() (netip.Prefix, error) {
	ip, ok := netip.AddrFromSlice(b.ACK.YourIPAddr.To4())
	if !ok || ip.IsUnspecified() {
		return netip.Prefix{}, errors.New("DHCPACK carries no address")
	}
	mask := b.ACK.SubnetMask()
	if mask == nil {
		return netip.Prefix{}, errors.New("DHCP option Subnet Mask not found in DHCPACK")
	}
	ones, bits := mask.Size()
	if bits != 32 {
		return netip.Prefix{}, errors.New("DHCPACK carries a non-contiguous subnet mask")
	}
	return netip.PrefixFrom(ip, ones), nil
}

// AddrText is the leased address for a log line.
func (b *Bound) AddrText() string { return AddrText(b.Addr()) }

// AddrText is a lease's address for a log line: "?" when its answer names none.
func AddrText[A fmt.Stringer](a A, err error) string {
	if err != nil {
		return "?"
	}
	return a.String()
}

// Stamp writes the ACK into the lease's record: the interface it was bound on, the
// message as it came on the wire, and its time.
func (b *Bound) Stamp(r *leasefile.Record) { r.ID, r.ACK, r.Bound = b.Link, b.ACK.ToBytes(), b.At }

// Result turns the lease into an IPAM result: the address, the first router as
// gateway, routes (option 121 when present, which by RFC 3442 overrides both option 33
// and the routers; otherwise option 33 and a default route via the router) each with
// priority as its metric, and the DNS servers, domain and search list. An address no
// pod may hold (Usable, or its subnet's network or broadcast address) is an error
// wrapping ErrUnusable.
func (b *Bound) Result(priority int) (*result.Result, error) {
	addr, err := b.Addr()
	if err != nil {
		return nil, err
	}
	if err := usableInSubnet(addr); err != nil {
		return nil, err
	}
	gw := firstV4(b.ACK.Router())
	rts := routes(b.ACK, gw)
	for i := range rts {
		rts[i].Priority = priority
	}
	return &result.Result{CNIVersion: "1.1.0", IPs: []result.IPConfig{{Address: addr, Gateway: gw}}, Routes: rts, DNS: dns(b.ACK)}, nil
}

func routes(ack *dhcpv4.DHCPv4, gw netip.Addr) []result.Route {
	var out []result.Route
	if classless := ack.ClasslessStaticRoute(); len(classless) > 0 {
		for _, r := range classless {
			dst, ok := prefixOf(r)
			if !ok {
				continue
			}
			rt := result.Route{Dst: dst}
			if via, ok := v4(r.Router); ok && !via.IsUnspecified() {
				rt.GW = via
			} else {
				scope := scopeLink
				rt.Scope = &scope
			}
			out = append(out, rt)
		}
		return out
	}
	out = append(out, staticRoutes(ack.Options.Get(dhcpv4.OptionStaticRoutingTable))...)
	if gw.IsValid() {
		out = append(out, result.Route{Dst: netip.PrefixFrom(netip.IPv4Unspecified(), 0), GW: gw})
	}
	return out
}

// staticRoutes reads option 33: pairs of (classful destination, router).
func staticRoutes(opt []byte) []result.Route {
	var out []result.Route
	for ; len(opt) >= 8; opt = opt[8:] {
		dst := netip.AddrFrom4([4]byte(opt[0:4]))
		gw := netip.AddrFrom4([4]byte(opt[4:8]))
		out = append(out, result.Route{Dst: netip.PrefixFrom(dst, classfulBits(dst)).Masked(), GW: gw})
	}
	return out
}

// classfulBits is the class A/B/C mask length that option 33 implies.
func classfulBits(a netip.Addr) int {
	switch b := a.As4()[0]; {
	case b < 128:
		return 8
	case b < 192:
		return 16
	default:
		return 24
	}
}

func dns(ack *dhcpv4.DHCPv4) result.DNS {
	var d result.DNS
	for _, ip := range ack.DNS() {
		if a, ok := v4(ip); ok {
			d.Nameservers = append(d.Nameservers, a.String())
		}
	}
	d.Domain = ack.DomainName()
	if labels := ack.DomainSearch(); labels != nil {
		d.Search = append(d.Search, labels.Labels...)
	}
	return d
}

// prefixOf is an option 121 route's destination; false for none, or one not IPv4.
func prefixOf(r *dhcpv4.Route) (netip.Prefix, bool) {
	if r == nil || r.Dest == nil {
		return netip.Prefix{}, false
	}
	a, ok := v4(r.Dest.IP)
	ones, bits := r.Dest.Mask.Size()
	if !ok || bits != 32 {
		return netip.Prefix{}, false
	}
	return netip.PrefixFrom(a, ones).Masked(), true
}

func v4(ip net.IP) (netip.Addr, bool) { return netip.AddrFromSlice(ip.To4()) }

// firstV4 is the first IPv4 address of ips that is not 0.0.0.0, or none.
func firstV4(ips []net.IP) netip.Addr {
	for _, ip := range ips {
		if a, ok := v4(ip); ok && !a.IsUnspecified() {
			return a
		}
	}
	return netip.Addr{}
}

// jitter is up to a second, so that leases acquired together do not resend together.
func jitter() time.Duration { return time.Duration(rand.Int64N(int64(time.Second))) }
