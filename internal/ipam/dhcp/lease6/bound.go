package lease6

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"net/netip"
	"time"

	"github.com/insomniacslk/dhcp/dhcpv6"

	"github.com/cnikit/cni/internal/ipam/dhcp/lease"
	"github.com/cnikit/cni/internal/ipam/dhcp/leasefile"
	"github.com/cnikit/cni/internal/ipam/dhcp/linkid"
	"github.com/cnikit/cni/internal/result"
)

// IAID is the identity association of every attachment's IA_NA: the DUID is already
// the attachment's own, and it holds one address.
var IAID = [4]byte{0, 0, 0, 1}

// DUID is the attachment's DUID-UUID: the first 16 bytes of the SHA-256 of its client
// id, marked as a UUID of version 8 (RFC 9562's own-format UUID) of the RFC 4122
// variant. It is the same for the same container, network and interface name, and
// different for any other.
func DUID(clientID string) *dhcpv6.DUIDUUID {
	sum := sha256.Sum256([]byte(clientID))
	var d dhcpv6.DUIDUUID
	copy(d.UUID[:], sum[:16])
	d.UUID[6] = d.UUID[6]&0x0f | 0x80 // version 8
	d.UUID[8] = d.UUID[8]&0x3f | 0x80 // variant 10
	return &d
}

// Bound is a lease as the last REPLY gave it, and the interface it was bound on.
type Bound struct {
	Reply *dhcpv6.Message
	At    time.Time
	Link  linkid.ID
}

// check finds the leased address: the REPLY must carry no failing status, and an IA_NA
// of IAID with an address whose valid lifetime has not run out; of several, the first
// a pod may hold (lease.Usable). One it may not hold is still the lease (Result refuses
// it), so that it can be released.
func (b *Bound) check() (*dhcpv6.OptIAAddress, error) {
	if b.Reply.MessageType != dhcpv6.MessageTypeReply {
		return nil, fmt.Errorf("server answered %s, not REPLY", b.Reply.MessageType)
	}
	if err := statusErr(b.Reply.Options.Status()); err != nil {
		return nil, err
	}
	for _, ia := range b.Reply.Options.IANA() {
		if ia.IaId != IAID {
			continue
		}
		if err := statusErr(ia.Options.Status()); err != nil {
			return nil, err
		}
		var unusable *dhcpv6.OptIAAddress
		for _, a := range ia.Options.Addresses() {
			if a.ValidLifetime > 0 && a.IPv6Addr.To16() != nil && a.IPv6Addr.To4() == nil {
				if err := statusErr(a.Options.Status()); err != nil {
					return nil, err
				}
				if addr, _ := netip.AddrFromSlice(a.IPv6Addr.To16()); lease.Usable(addr) == nil {
					return a, nil
				}
				if unusable == nil {
					unusable = a
				}
			}
		}
		if unusable != nil {
			return unusable, nil
		}
		return nil, fmt.Errorf("%w: the REPLY's IA_NA has no address with a lifetime left", ErrRefused)
	}
	return nil, errors.New("the REPLY carries no IA_NA for this client")
}

// Addr is the leased address.
func (b *Bound) Addr() (netip.Addr, error) {
	a, err := b.check()
	if err != nil {
		return netip.Addr{}, err
	}
	addr, _ := netip.AddrFromSlice(a.IPv6Addr.To16())
	return addr, nil
}

// AddrText is the leased address for a log line.
func (b *Bound) AddrText() string { return lease.AddrText(b.Addr()) }

// Stamp writes the REPLY into the lease's record: the interface it was bound on, the
// message as it came on the wire, and its time.
func (b *Bound) Stamp(r *leasefile.Record) { r.ID, r.ACK, r.Bound = b.Link, b.Reply.ToBytes(), b.At }

// Times are the lease's moments: renew at T1, rebind at T2, expire at the address's
// valid lifetime. A T1 or T2 of 0 leaves them to the client (RFC 8415 §21.4): 0.5 and
// 0.8 of the preferred lifetime. An infinite valid lifetime is never renewed or expired.
func (b *Bound) Times() lease.Times {
	a, err := b.check()
	if err != nil {
		return lease.Times{Renew: b.At, Rebind: b.At, Expire: b.At}
	}
	valid, preferred := a.ValidLifetime, a.PreferredLifetime
	if valid >= lease.InfiniteLeaseTime {
		return lease.Forever()
	}
	if preferred <= 0 || preferred > valid {
		preferred = valid
	}
	var t1, t2 time.Duration
	for _, ia := range b.Reply.Options.IANA() {
		if ia.IaId == IAID {
			t1, t2 = ia.T1, ia.T2
		}
	}
	if t2 <= 0 || t2 > valid {
		t2 = preferred / 10 * 8
	}
	if t1 <= 0 || t1 > t2 {
		t1 = min(preferred/2, t2)
	}
	return lease.Times{Renew: b.At.Add(t1), Rebind: b.At.Add(t2), Expire: b.At.Add(valid)}
}

// Result is the lease as an IPAM result (an address no pod may hold, lease.Usable, is
// an error wrapping lease.ErrUnusable): the address alone (/128: DHCPv6 carries no
// prefix length, and no routes or router; the on-link prefix and the default route come
// from router advertisements or the config's routes) and the DNS servers and search
// list. priority is unused: there are no routes to give it to.
func (b *Bound) Result(priority int) (*result.Result, error) {
	a, err := b.Addr()
	if err != nil {
		return nil, err
	}
	if err := lease.Usable(a); err != nil {
		return nil, err
	}
	res := &result.Result{CNIVersion: "1.1.0", IPs: []result.IPConfig{{Address: netip.PrefixFrom(a, 128)}}}
	for _, ip := range b.Reply.Options.DNS() {
		if d, ok := netip.AddrFromSlice(ip.To16()); ok && ip.To4() == nil {
			res.DNS.Nameservers = append(res.DNS.Nameservers, d.String())
		}
	}
	if l := b.Reply.Options.DomainSearchList(); l != nil {
		res.DNS.Search = append(res.DNS.Search, l.Labels...)
	}
	return res, nil
}
