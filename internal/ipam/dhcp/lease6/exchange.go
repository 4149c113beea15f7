// Package lease6 is the DHCPv6 client side of one attachment (RFC 8415, IA_NA only): it
// gets an address by SOLICIT, ADVERTISE, REQUEST, REPLY (or SOLICIT, REPLY where the
// server does rapid commit), renews it at T1 with the server that gave it (RENEW) and
// after T2 with any (REBIND), confirms it after a daemon restart (REBIND, which also
// extends it), and gives it back (RELEASE). Every message goes from inside the
// container's namespace, from its interface's link-local address to
// All_DHCP_Relay_Agents_and_Servers, and only on the interface the lease was bound on
// (see linkid).
//
// The client's DUID is a DUID-UUID (RFC 6355) made from the attachment's client id
// "<cid>/<net>/<ifname>", and its IAID is 1: both stay the same for the attachment
// across daemon restarts and re-ADDs, so a server gives it the same address again.
//
// The wire format and the exchanges are github.com/insomniacslk/dhcp's (dhcpv6 and its
// nclient6 client); this package decides what to send and what a lease means.
package lease6

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"time"

	"github.com/insomniacslk/dhcp/dhcpv6"
	"github.com/insomniacslk/dhcp/dhcpv6/nclient6"
	"github.com/insomniacslk/dhcp/iana"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/cnikit/cni/internal/host/nlconn"
	"github.com/cnikit/cni/internal/host/sysctl"
	"github.com/cnikit/cni/internal/ipam/dhcp/lease"
	"github.com/cnikit/cni/internal/ipam/dhcp/linkid"
)

// Client says how one attachment talks DHCPv6.
type Client struct {
	// ClientID is the attachment's "<cid>/<net>/<ifname>", which the DUID is made from.
	ClientID string
	Target   linkid.Target
	// Timeout bounds one send-and-wait; ResendMax caps the pause between attempts to
	// get a lease.
	Timeout   time.Duration
	ResendMax time.Duration
	// Logf, when set, hears of failed attempts that will be retried.
	Logf func(format string, a ...any)

	// noRapidCommit leaves the Rapid Commit option out of the SOLICIT, so that tests
	// see the four-message exchange from servers (dnsmasq) that always do rapid commit.
	noRapidCommit bool
}

// ErrRefused is a server's answer that the address is not (or no longer) the client's:
// a status of NoBinding, NotOnLink or NoAddrsAvail, or no address with a lifetime left.
var ErrRefused = errors.New("server refused the address")

// Acquire gets an address, resending and retrying until ctx ends (lease.Retry), with
// rapid commit offered: a server that does it answers the SOLICIT with the REPLY.
func (c *Client) Acquire(ctx context.Context) (*Bound, error) {
	return lease.Retry(ctx, c.ResendMax, c.Logf, c.ClientID+" (DHCPv6)", func() (*Bound, error) {
		return bound(c.once(ctx, nil, c.Timeout, func(nc *nclient6.Client) (*dhcpv6.Message, error) {
			if c.noRapidCommit {
				adv, err := nc.Solicit(ctx, c.modifiers()...)
				if err != nil {
					return nil, err
				}
				return nc.Request(ctx, adv, c.modifiers()...)
			}
			return nc.RapidSolicit(ctx, c.modifiers()...)
		}))
	})
}

// Renew asks the server that gave the lease to extend it (RENEW, before T2).
func (c *Client) Renew(ctx context.Context, b *Bound) (*Bound, error) {
	return bound(c.send(ctx, b, dhcpv6.MessageTypeRenew, c.Timeout))
}

// Rebind asks any server to extend the lease (REBIND): after T2, and to confirm a kept
// lease after a daemon restart.
func (c *Client) Rebind(ctx context.Context, b *Bound) (*Bound, error) {
	return bound(c.send(ctx, b, dhcpv6.MessageTypeRebind, c.Timeout))
}

// send sends a message of type typ about b's address (see about) on the interface it
// was bound on, and waits for the REPLY.
func (c *Client) send(ctx context.Context, b *Bound, typ dhcpv6.MessageType, timeout time.Duration) (*dhcpv6.Message, linkid.ID, error) {
	msg, err := c.about(b, typ)
	if err != nil {
		return nil, linkid.ID{}, err
	}
	return c.once(ctx, &b.Link, timeout, func(nc *nclient6.Client) (*dhcpv6.Message, error) {
		return nc.SendAndRead(ctx, nclient6.AllDHCPRelayAgentsAndServers, msg, nclient6.IsMessageType(dhcpv6.MessageTypeReply))
	})
}

// releaseTimeout bounds the wait for a RELEASE's REPLY: DEL waits for it, and a server
// that misses it takes the address back at the end of its lifetime anyway.
const releaseTimeout = 3 * time.Second

// Release gives the address back to the server that gave it (RELEASE) and waits for its
// REPLY. An attachment that is gone, or no longer the one the lease was bound on, wraps
// linkid.ErrGone: a DHCPv6 message needs the interface's link-local address and link,
// so nothing can be sent from the host instead.
func (c *Client) Release(ctx context.Context, b *Bound) error {
	reply, _, err := c.send(ctx, b, dhcpv6.MessageTypeRelease, min(c.Timeout, releaseTimeout))
	if err != nil {
		return err
	}
	if err := statusErr(reply.Options.Status()); err != nil && !errors.Is(err, ErrRefused) {
		return err // a server that no longer holds it (NoBinding) released it all the same
	}
	return nil
}

// RemoveAddress takes the lease's address off its interface: the lease ran out or was
// refused, so the address is no longer the attachment's to use. The link stays up for
// the other family.
func (c *Client) RemoveAddress(b *Bound) error {
	a, err := b.Addr()
	if err != nil {
		return err
	}
	_, err = c.Target.Enter(&b.Link, func(l netlink.Link) error {
		err := netlink.AddrDel(l, &netlink.Addr{IPNet: &net.IPNet{IP: a.AsSlice(), Mask: net.CIDRMask(128, 128)}})
		if errors.Is(err, unix.EADDRNOTAVAIL) {
			return nil
		}
		return err
	})
	return err
}

// about builds a message about a bound address: RENEW and RELEASE name the server that
// gave it, REBIND none.
func (c *Client) about(b *Bound, typ dhcpv6.MessageType) (*dhcpv6.Message, error) {
	a, err := b.Addr()
	if err != nil {
		return nil, err
	}
	msg, err := dhcpv6.NewMessage()
	if err != nil {
		return nil, err
	}
	msg.MessageType = typ
	msg.AddOption(dhcpv6.OptClientID(DUID(c.ClientID)))
	if typ != dhcpv6.MessageTypeRebind {
		sid := b.Reply.Options.ServerID()
		if sid == nil {
			return nil, errors.New("the lease names no server")
		}
		msg.AddOption(dhcpv6.OptServerID(sid))
	}
	msg.AddOption(dhcpv6.OptElapsedTime(0))
	msg.AddOption(&dhcpv6.OptIANA{IaId: IAID, Options: dhcpv6.IdentityOptions{Options: dhcpv6.Options{
		&dhcpv6.OptIAAddress{IPv6Addr: a.AsSlice()},
	}}})
	if typ != dhcpv6.MessageTypeRelease {
		msg.AddOption(dhcpv6.OptRequestedOption(dhcpv6.OptionDNSRecursiveNameServer, dhcpv6.OptionDomainSearchList))
	}
	return msg, nil
}

// modifiers are what a SOLICIT and the REQUEST after it carry beyond the library's
// (which asks for DNS servers and the search list already).
func (c *Client) modifiers() []dhcpv6.Modifier {
	return []dhcpv6.Modifier{dhcpv6.WithClientID(DUID(c.ClientID)), dhcpv6.WithIAID(IAID)}
}

// once opens a client on the interface (want: the one the lease was bound on, nil for
// a new lease) and runs one exchange; it returns the answer and the interface it saw.
func (c *Client) once(ctx context.Context, want *linkid.ID, timeout time.Duration, fn func(*nclient6.Client) (*dhcpv6.Message, error)) (*dhcpv6.Message, linkid.ID, error) {
	nc, id, err := c.open(want, timeout)
	if err != nil {
		return nil, id, err
	}
	defer nc.Close()
	reply, err := fn(nc)
	return reply, id, err
}

// bound turns an exchange's REPLY into a Bound, if it gives an address.
func bound(reply *dhcpv6.Message, id linkid.ID, err error) (*Bound, error) {
	if err != nil {
		return nil, err
	}
	b := &Bound{Reply: reply, At: time.Now(), Link: id}
	if _, err := b.check(); err != nil {
		return nil, err
	}
	return b, nil
}

// open makes the client's UDP socket inside the namespace, on the interface's
// link-local address, port 546; once made, the socket stays in that namespace whatever
// thread uses it. The link is set up and IPv6 enabled on it if need be, and the
// link-local address waited for (duplicate address detection): the main plugin
// configures the interface only after IPAM.
func (c *Client) open(want *linkid.ID, timeout time.Duration) (*nclient6.Client, linkid.ID, error) {
	var nc *nclient6.Client
	id, err := c.Target.Enter(want, func(l netlink.Link) error {
		hw, err := ready(l)
		if err != nil {
			return err
		}
		conn, err := listen(l)
		if err != nil {
			return err
		}
		first, tries := lease.Resends(timeout)
		nc, err = nclient6.NewWithConn(conn, hw, nclient6.WithTimeout(first), nclient6.WithRetry(tries))
		if err != nil {
			conn.Close()
		}
		return err
	})
	return nc, id, err // with err, the callers use only id
}

// ready enables IPv6 on the link and sets it up, and returns its MAC.
func ready(l netlink.Link) (net.HardwareAddr, error) {
	name := l.Attrs().Name
	if err := sysctl.Ensure(sysctl.Iface("ipv6", name, "disable_ipv6"), "0"); err != nil {
		return nil, fmt.Errorf("enable IPv6 on %s: %w", name, err)
	}
	return lease.SetUp(l)
}

// linkLocalWait bounds the wait for the link-local address: duplicate address detection
// takes a second after a random delay of up to another.
const linkLocalWait = 5 * time.Second

// listen waits for the link's link-local address and binds a UDP socket to it (with
// the link as its scope, which also binds the socket to the link) on the client port.
// The socket is made by hand rather than through net.ListenUDP: the net package turns a
// zone into an index through a process-wide cache of the interfaces of whatever
// namespace it last looked at, which is not this one.
func listen(l netlink.Link) (net.PacketConn, error) {
	ll, err := waitLinkLocal(l)
	if err != nil {
		return nil, err
	}
	fd, err := unix.Socket(unix.AF_INET6, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC|unix.SOCK_NONBLOCK, unix.IPPROTO_UDP)
	if err != nil {
		return nil, fmt.Errorf("dhcpv6 socket: %w", err)
	}
	sa := &unix.SockaddrInet6{Port: dhcpv6.DefaultClientPort, ZoneId: uint32(l.Attrs().Index)}
	copy(sa.Addr[:], ll.To16())
	if err := unix.Bind(fd, sa); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("dhcpv6 socket: bind [%s%%%s]:%d: %w", ll, l.Attrs().Name, dhcpv6.DefaultClientPort, err)
	}
	f := os.NewFile(uintptr(fd), "dhcpv6")
	defer f.Close()
	conn, err := net.FilePacketConn(f)
	if err != nil {
		return nil, fmt.Errorf("dhcpv6 socket: %w", err)
	}
	return conn, nil
}

// waitLinkLocal returns the link's link-local address once duplicate address detection
// is done with it.
func waitLinkLocal(l netlink.Link) (net.IP, error) {
	name := l.Attrs().Name
	h, err := nlconn.Open(netns.None(), unix.NETLINK_ROUTE) // in the namespace of the calling thread
	if err != nil {
		return nil, fmt.Errorf("%s: netlink handle: %w", name, err)
	}
	defer h.Close()
	deadline := time.Now().Add(linkLocalWait)
	for {
		addrs, err := h.AddrList(l, netlink.FAMILY_V6)
		if err != nil {
			return nil, fmt.Errorf("%s: list addresses: %w", name, err)
		}
		for _, a := range addrs {
			if !a.IP.IsLinkLocalUnicast() {
				continue
			}
			if a.Flags&unix.IFA_F_DADFAILED != 0 {
				return nil, fmt.Errorf("%s: duplicate address detection failed for %s", name, a.IP)
			}
			if a.Flags&unix.IFA_F_TENTATIVE == 0 {
				return a.IP, nil
			}
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("%s: no usable IPv6 link-local address after %s (is IPv6 disabled in the container?)", name, linkLocalWait)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// statusErr reads a status code option: nil for none or Success.
func statusErr(sc *dhcpv6.OptStatusCode) error {
	if sc == nil || sc.StatusCode == iana.StatusSuccess {
		return nil
	}
	switch sc.StatusCode {
	case iana.StatusNoBinding, iana.StatusNotOnLink, iana.StatusNoAddrsAvail:
		return fmt.Errorf("%w: %s %q", ErrRefused, sc.StatusCode, sc.StatusMessage)
	}
	return fmt.Errorf("server answered %s %q", sc.StatusCode, sc.StatusMessage)
}
