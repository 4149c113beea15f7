// Package lease is the DHCPv4 client side of one attachment: it gets a lease
// (DISCOVER, OFFER, REQUEST, ACK), confirms a known one after a restart (INIT-REBOOT),
// renews and rebinds it, and releases it, either from inside the container's network
// namespace on its interface or, when that namespace is gone, from the host.
//
// The wire format and the exchanges are github.com/insomniacslk/dhcp's (dhcpv4 and its
// nclient4 client on a packet socket bound to the interface); this package decides what
// to send and what a lease means as a CNI result.
package lease

import (
	"context"
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/insomniacslk/dhcp/dhcpv4"
	"github.com/insomniacslk/dhcp/dhcpv4/nclient4"
	"github.com/vishvananda/netlink"

	"github.com/cnikit/cni/internal/ipam/dhcp/linkid"
)

// Client says how one attachment talks DHCP.
type Client struct {
	// ID is the client identifier, "<cid>/<net>/<ifname>" cut to 254 bytes.
	ID string
	// Target is the attachment's namespace (the daemon's host prefix applied) and
	// interface.
	Target linkid.Target
	// Provide are options sent with every request; Request is the parameter request
	// list.
	Provide []dhcpv4.Option
	Request []dhcpv4.OptionCode
	// Broadcast asks the server to broadcast its answers.
	Broadcast bool
	// Timeout bounds one send-and-wait; ResendMax caps the pause between attempts.
	Timeout   time.Duration
	ResendMax time.Duration
	// Logf, when set, hears of failed attempts that will be retried.
	Logf func(format string, a ...any)
}

// Bound is a lease as the last DHCPACK gave it, and the interface it was bound on:
// every later exchange happens only on that interface (see linkid).
type Bound struct {
	ACK  *dhcpv4.DHCPv4
	At   time.Time
	Link linkid.ID
}

// ErrNak is a server's refusal: the address is not (or no longer) ours.
var ErrNak = errors.New("server answered DHCPNAK")

// Acquire runs DISCOVER/OFFER/REQUEST/ACK until a lease is bound or ctx ends, resending
// with a growing pause as the reference does (Retry). The namespace and interface are
// looked up afresh each time, so a vanished one ends the retries at once.
func (c *Client) Acquire(ctx context.Context) (*Bound, error) {
	return Retry(ctx, c.ResendMax, c.Logf, c.ID, func() (*Bound, error) {
		return c.once(ctx, nil, func(nc *nclient4.Client, _ net.HardwareAddr) (*dhcpv4.DHCPv4, error) {
			l, err := nc.Request(ctx, c.modifiers()...)
			if err != nil {
				return nil, err
			}
			return l.ACK, nil
		})
	})
}

// Reboot is RFC 2131's INIT-REBOOT for a lease the daemon held before it restarted: a
// broadcast REQUEST for the known address, without a server identifier. A NAK means the
// address is gone and wraps ErrNak.
func (c *Client) Reboot(ctx context.Context, b *Bound) (*Bound, error) {
	return c.initReboot(ctx, &b.Link, b.ACK.YourIPAddr)
}

// Adopt is an INIT-REBOOT for an address the attachment holds without a lease of this
// daemon's (one the reference daemon got before an in-place upgrade): the server ACKs
// it only if this client id holds it, and the ACK is a lease like any other.
func (c *Client) Adopt(ctx context.Context, addr net.IP) (*Bound, error) {
	return c.initReboot(ctx, nil, addr)
}

func (c *Client) initReboot(ctx context.Context, want *linkid.ID, addr net.IP) (*Bound, error) {
	return c.once(ctx, want, func(nc *nclient4.Client, hw net.HardwareAddr) (*dhcpv4.DHCPv4, error) {
		req, err := dhcpv4.New(append([]dhcpv4.Modifier{
			dhcpv4.WithHwAddr(hw),
			dhcpv4.WithMessageType(dhcpv4.MessageTypeRequest),
			dhcpv4.WithOption(dhcpv4.OptRequestedIPAddress(addr)),
			dhcpv4.WithOption(dhcpv4.OptMaxMessageSize(nclient4.MaxMessageSize)),
		}, c.modifiers()...)...)
		if err != nil {
			return nil, err
		}
		p, err := nc.SendAndRead(ctx, nclient4.DefaultServers, req, nclient4.IsMessageType(dhcpv4.MessageTypeAck, dhcpv4.MessageTypeNak))
		if err != nil {
			return nil, err
		}
		if p.MessageType() == dhcpv4.MessageTypeNak {
			return nil, fmt.Errorf("%w: %s", ErrNak, p.Message())
		}
		return p, nil
	})
}

// Renew sends a REQUEST for the bound address (RENEWING before T2, REBINDING after:
// both broadcast, as the reference does, which reaches the server whether or not the
// host routes to it).
func (c *Client) Renew(ctx context.Context, b *Bound) (*Bound, error) {
	return c.once(ctx, &b.Link, func(nc *nclient4.Client, hw net.HardwareAddr) (*dhcpv4.DHCPv4, error) {
		l, err := nc.Renew(ctx, &nclient4.Lease{Offer: b.ACK, ACK: b.ACK}, c.modifiers()...)
		if nak, ok := errors.AsType[*nclient4.ErrNak](err); ok {
			return nil, fmt.Errorf("%w: %s", ErrNak, nak.Nak.Message())
		}
		if err != nil {
			return nil, err
		}
		return l.ACK, nil
	})
}

// Release sends DHCPRELEASE from inside the container's namespace as a UDP unicast
// to the server, from the leased address. (The library's Release writes on the
// packet socket with source 0.0.0.0, which a server's kernel drops as a martian for a
// unicast destination: dnsmasq never sees it.) An attachment that is gone, or no longer
// the one the lease was bound on, wraps linkid.ErrGone, for the caller to release from
// the host instead.
func (c *Client) Release(b *Bound) error {
	_, err := c.Target.Enter(&b.Link, func(netlink.Link) error { return sendRelease(c.ID, b.ACK) })
	return err
}

// ReleaseFromHost sends DHCPRELEASE as a UDP unicast to the server from the caller's
// namespace, for a lease whose container namespace is gone: the server matches a
// release by client identifier, hardware address and its own identifier, all of which
// the stored ACK holds, not by the packet's source.
func ReleaseFromHost(clientID string, ack *dhcpv4.DHCPv4) error {
	if err := sendRelease(clientID, ack); err != nil {
		return fmt.Errorf("from the host: %w", err)
	}
	return nil
}

func sendRelease(clientID string, ack *dhcpv4.DHCPv4) error {
	server := ack.ServerIdentifier()
	if server == nil {
		return errors.New("release: the lease names no server")
	}
	msg, err := dhcpv4.NewReleaseFromACK(ack, withClientID(clientID))
	if err != nil {
		return err
	}
	conn, err := net.DialUDP("udp4", nil, &net.UDPAddr{IP: server, Port: nclient4.ServerPort})
	if err == nil {
		defer conn.Close()
		_, err = conn.Write(msg.ToBytes())
	}
	if err != nil {
		return fmt.Errorf("release to %s: %w", server, err)
	}
	return nil
}

// once opens a client on the interface (want: the one a lease was bound on, nil for a
// new lease), runs one exchange and turns the ACK into a Bound.
func (c *Client) once(ctx context.Context, want *linkid.ID, fn func(*nclient4.Client, net.HardwareAddr) (*dhcpv4.DHCPv4, error)) (*Bound, error) {
	nc, hw, id, err := c.open(want)
	if err != nil {
		return nil, err
	}
	defer nc.Close()
	ack, err := fn(nc, hw)
	if err != nil {
		return nil, err
	}
	return &Bound{ACK: ack, At: time.Now(), Link: id}, nil
}

// Retry repeats try with a pause of 4 s doubling up to resendMax (plus up to a second
// of jitter), as the reference does, until it succeeds, fails for good (Final) or ctx
// ends; logf, when set, hears of each failed attempt, under who (the lease's name).
func Retry[T any](ctx context.Context, resendMax time.Duration, logf func(format string, a ...any), who string, try func() (T, error)) (T, error) {
	pause := 4 * time.Second
	for {
		v, err := try()
		if err == nil || Final(err) || ctx.Err() != nil {
			return v, err
		}
		wait := pause + jitter()
		if logf != nil {
			logf("%s: attempt failed: %v; retrying in %s", who, err, wait.Round(time.Millisecond))
		}
		if rest, ok := ctx.Deadline(); ok && time.Until(rest) < wait {
			wait = time.Until(rest)
		}
		select {
		case <-ctx.Done():
			var zero T
			return zero, fmt.Errorf("%w (last attempt: %v)", ctx.Err(), err)
		case <-time.After(wait):
		}
		if pause *= 2; pause > resendMax && resendMax > 0 {
			pause = resendMax
		}
	}
}

// Final says whether err ends the attempts at once: the attachment is gone (or never was
// one the daemon may act on), so nothing is worth retrying.
func Final(err error) bool {
	return errors.Is(err, linkid.ErrGone) || errors.Is(err, linkid.ErrOwnNetns)
}

// open creates the client's packet socket inside the namespace, bound to the
// interface; once made, the socket stays in that namespace whatever thread uses it.
// A link that is still down is set up: DHCP needs it before the main plugin configures
// the address (our bridge and macvlan set the link up only then).
func (c *Client) open(want *linkid.ID) (*nclient4.Client, net.HardwareAddr, linkid.ID, error) {
	var nc *nclient4.Client
	var hw net.HardwareAddr
	id, err := c.Target.Enter(want, func(l netlink.Link) error {
		var err error
		if hw, err = SetUp(l); err != nil {
			return err
		}
		first, tries := Resends(c.Timeout)
		nc, err = nclient4.New(l.Attrs().Name, nclient4.WithTimeout(first), nclient4.WithRetry(tries), nclient4.WithHWAddr(hw))
		return err
	})
	return nc, hw, id, err // with err, the callers use only id
}

// SetUp sets a link that is still down up and waits (a little) for its carrier, inside
// its namespace, and returns its MAC.
func SetUp(l netlink.Link) (net.HardwareAddr, error) {
	name := l.Attrs().Name
	if l.Attrs().Flags&net.FlagUp == 0 {
		if err := netlink.LinkSetUp(l); err != nil {
			return nil, fmt.Errorf("set %s up: %w", name, err)
		}
		waitRunning(name)
	}
	return l.Attrs().HardwareAddr, nil
}

// Resends splits one exchange's timeout into resends of the same message, waiting 1 s,
// then 2 s, 4 s, ... until the waits add up to the timeout: a first message lost while
// a new link settles (a bridge port that has not seen its carrier yet drops it) then
// costs a second, not the whole timeout.
func Resends(timeout time.Duration) (first time.Duration, tries int) {
	first = min(time.Second, timeout)
	for wait, total := first, time.Duration(0); total < timeout; wait *= 2 {
		total += wait
		tries++
	}
	return first, tries
}

// waitRunning waits (a little) for a link just set up to have carrier: the kernel
// turns carrier on asynchronously, and until then, and until a bridge on the other
// side of a veth has seen it, the first DISCOVER is dropped and costs a whole timeout.
func waitRunning(name string) {
	for deadline := time.Now().Add(2 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		l, err := netlink.LinkByName(name)
		// Operstate, unlike IFF_RUNNING, changes only when the kernel's link watcher
		// has handled the carrier change, the same pass that tells the bridge.
		if err != nil || l.Attrs().OperState == netlink.OperUp {
			return
		}
	}
}

// modifiers are what every request of this client carries.
func (c *Client) modifiers() []dhcpv4.Modifier {
	mods := []dhcpv4.Modifier{withClientID(c.ID)}
	if len(c.Request) > 0 {
		mods = append(mods, dhcpv4.WithOption(dhcpv4.OptParameterRequestList(c.Request...)))
	}
	for _, o := range c.Provide {
		mods = append(mods, dhcpv4.WithOption(o))
	}
	if c.Broadcast {
		mods = append(mods, dhcpv4.WithBroadcast(true))
	}
	return mods
}

// withClientID sets option 61 as the reference does: type 0 (not a hardware address)
// followed by the text.
func withClientID(id string) dhcpv4.Modifier {
	return dhcpv4.WithOption(dhcpv4.OptClientIdentifier(append([]byte{0}, id...)))
}
