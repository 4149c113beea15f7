package lease

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
)

// ErrUnusable is a server's address that no pod's interface may hold as its own: the
// lease is refused (and given back), and the ADD fails saying why.
var ErrUnusable = errors.New("not an address for a pod")

var (
	thisNetwork4 = netip.MustParsePrefix("0.0.0.0/8")   // RFC 1122 §3.2.1.3: "this host on this network", never a destination
	reserved4    = netip.MustParsePrefix("240.0.0.0/4") // RFC 1112 §4: class E, reserved
	mapped6      = netip.MustParsePrefix("::ffff:0:0/96")
	broadcast4   = netip.AddrFrom4([4]byte{255, 255, 255, 255})
)

// Usable says why a, as a DHCP or DHCPv6 server gave it, cannot be a pod's unicast
// address, or nil when it can. Refused: the unspecified address (RFC 4291 §2.5.2: never
// assigned to a node), loopback (§2.5.3: never on an interface; 127/8), multicast
// (ff00::/8, 224/4), link-local (fe80::/10: the interface has its own, and DHCPv6's
// IA_NA is for addresses beyond it; 169.254/16, which RFC 3927 §1.6 says a DHCP server
// should not hand out), IPv4 0/8, 240/4 and the limited broadcast 255.255.255.255, and
// an IPv4-mapped IPv6 address. A server that offers such an address is broken or
// hostile; using it would put a pod on ::1 or a multicast group.
func Usable(a netip.Addr) error {
	why := ""
	switch {
	case !a.IsValid():
		why = "no address"
	case a.IsUnspecified():
		why = "the unspecified address"
	case a.IsLoopback():
		why = "a loopback address"
	case a == broadcast4:
		why = "the limited broadcast address"
	case a.IsMulticast():
		why = "a multicast address"
	case a.IsLinkLocalUnicast():
		why = "a link-local address"
	case thisNetwork4.Contains(a):
		why = `in 0.0.0.0/8 ("this network")`
	case reserved4.Contains(a):
		why = "in the reserved 240.0.0.0/4"
	case mapped6.Contains(a):
		why = "an IPv4-mapped IPv6 address"
	default:
		return nil
	}
	return fmt.Errorf("%w: %s is %s", ErrUnusable, a, why)
}

// usableInSubnet adds to Usable what the subnet mask tells of an IPv4 address: in a
// subnet of more than two addresses, its first (the network) and its last (the
// subnet's broadcast) are no host's.
func usableInSubnet(p netip.Prefix) error {
	if err := Usable(p.Addr()); err != nil {
		return err
	}
	if !p.Addr().Is4() || p.Bits() > 30 {
		return nil
	}
	a := p.Addr().As4()
	hostMask := uint32(1)<<(32-p.Bits()) - 1
	switch binary.BigEndian.Uint32(a[:]) & hostMask {
	case 0:
		return fmt.Errorf("%w: %s is the network address of %s", ErrUnusable, p.Addr(), p.Masked())
	case hostMask:
		return fmt.Errorf("%w: %s is the broadcast address of %s", ErrUnusable, p.Addr(), p.Masked())
	}
	return nil
}
