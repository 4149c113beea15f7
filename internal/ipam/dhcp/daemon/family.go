package daemon

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"

	"github.com/insomniacslk/dhcp/dhcpv4"
	"github.com/insomniacslk/dhcp/dhcpv6"
	"github.com/vishvananda/netlink"

	"github.com/cnikit/cni/internal/ipam/dhcp/lease"
	"github.com/cnikit/cni/internal/ipam/dhcp/lease6"
	"github.com/cnikit/cni/internal/ipam/dhcp/leasefile"
	"github.com/cnikit/cni/internal/ipam/dhcp/linkid"
	"github.com/cnikit/cni/internal/result"
)

// family is one protocol's client of one attachment, as the upkeep drives it: DHCPv4
// (package lease) or DHCPv6 (package lease6).
type family interface {
	acquire(ctx context.Context) (binding, error)
	// confirm checks a kept lease after a restart and extends it: DHCPv4's INIT-REBOOT,
	// DHCPv6's REBIND.
	confirm(ctx context.Context, b binding) (binding, error)
	renew(ctx context.Context, b binding, rebind bool) (binding, error)
	release(b binding) error
	// releaseFromHost is the release when the interface is gone.
	releaseFromHost(b binding) error
	// lose withdraws an address that is no longer the attachment's: DHCPv4 takes the
	// link down, as the reference does; DHCPv6 takes its address off, leaving the link to
	// the other family.
	lose(b binding) error
	// refused says whether err is the server's refusal of the address (a NAK, a
	// NoBinding): the lease is over.
	refused(err error) bool
}

// binding is a lease as its last server answer gave it: a *lease.Bound or a
// *lease6.Bound.
type binding interface {
	Times() lease.Times
	Result(priority int) (*result.Result, error)
	AddrText() string
	// Stamp writes the answer into the lease's record (a record of an earlier version
	// gets its interface's identity here).
	Stamp(rec *leasefile.Record)
}

// bound makes an exchange's outcome a binding, without the non-nil interface holding a
// nil pointer that returning the call's results directly would give on an error.
func bound[B binding](b B, err error) (binding, error) {
	if err != nil {
		return nil, err
	}
	return b, nil
}

// newFamily makes the client of a lease's family for its attachment, found as this
// daemon sees it (its host prefix before the netns), sending the record's options.
func (d *Daemon) newFamily(r *leasefile.Record) family {
	t := linkid.Target{Netns: d.opts.HostPrefix + filepath.Clean(r.Netns), IfName: r.IfName, Host: d.host}
	if r.Family == leasefile.DHCPv6 {
		return &v6{c: &lease6.Client{ClientID: r.ClientID, Target: t, Timeout: d.opts.Timeout, ResendMax: d.opts.ResendMax, Logf: d.log.Printf}}
	}
	c := &lease.Client{ID: r.ClientID, Target: t, Broadcast: d.opts.Broadcast, Timeout: d.opts.Timeout, ResendMax: d.opts.ResendMax, Logf: d.log.Printf}
	for _, p := range r.Provide {
		c.Provide = append(c.Provide, dhcpv4.OptGeneric(dhcpv4.GenericOptionCode(uint8(p.Code)), p.Value))
	}
	for _, code := range r.Request {
		c.Request = append(c.Request, dhcpv4.GenericOptionCode(uint8(code)))
	}
	return &v4{c: c}
}

// kept rebuilds the binding of a record.
func kept(r *leasefile.Record) (binding, error) {
	if r.Family == leasefile.DHCPv6 {
		reply, err := dhcpv6.MessageFromBytes(r.ACK)
		if err != nil || reply.MessageType != dhcpv6.MessageTypeReply {
			return nil, fmt.Errorf("%w: %v", errNoACK, err)
		}
		b := &lease6.Bound{Reply: reply, At: r.Bound, Link: r.ID}
		if _, err := b.Addr(); err != nil {
			return nil, fmt.Errorf("%w: %v", errNoACK, err)
		}
		return b, nil
	}
	ack, err := dhcpv4.FromBytes(r.ACK)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", errNoACK, err)
	}
	if ack.MessageType() != dhcpv4.MessageTypeAck {
		return nil, errNoACK
	}
	return &lease.Bound{ACK: ack, At: r.Bound, Link: r.ID}, nil
}

var errNoACK = errors.New("kept lease has no valid DHCPACK or REPLY")

// v4 is the DHCPv4 family.
type v4 struct{ c *lease.Client }

func (f *v4) acquire(ctx context.Context) (binding, error) { return bound(f.c.Acquire(ctx)) }

func (f *v4) confirm(ctx context.Context, b binding) (binding, error) {
	return bound(f.c.Reboot(ctx, b.(*lease.Bound)))
}

// renew sends the same broadcast REQUEST in both phases, as the reference does.
func (f *v4) renew(ctx context.Context, b binding, _ bool) (binding, error) {
	return bound(f.c.Renew(ctx, b.(*lease.Bound)))
}

func (f *v4) release(b binding) error { return f.c.Release(b.(*lease.Bound)) }

func (f *v4) releaseFromHost(b binding) error {
	return lease.ReleaseFromHost(f.c.ID, b.(*lease.Bound).ACK)
}

func (f *v4) lose(b binding) error {
	_, err := f.c.Target.Enter(&b.(*lease.Bound).Link, func(l netlink.Link) error { return netlink.LinkSetDown(l) })
	return err
}

func (f *v4) refused(err error) bool { return errors.Is(err, lease.ErrNak) }

// adopt takes over an address another daemon got for the attachment (see
// Daemon.adopt).
func (f *v4) adopt(ctx context.Context, addr []byte) (binding, error) {
	return bound(f.c.Adopt(ctx, addr))
}

// v6 is the DHCPv6 family.
type v6 struct{ c *lease6.Client }

func (f *v6) acquire(ctx context.Context) (binding, error) { return bound(f.c.Acquire(ctx)) }

// confirm is a REBIND, which any server answers (see lease6.Client.Rebind).
func (f *v6) confirm(ctx context.Context, b binding) (binding, error) { return f.renew(ctx, b, true) }

func (f *v6) renew(ctx context.Context, b binding, rebind bool) (binding, error) {
	if rebind {
		return bound(f.c.Rebind(ctx, b.(*lease6.Bound)))
	}
	return bound(f.c.Renew(ctx, b.(*lease6.Bound)))
}

func (f *v6) release(b binding) error {
	ctx, cancel := context.WithTimeout(context.Background(), f.c.Timeout)
	defer cancel()
	return f.c.Release(ctx, b.(*lease6.Bound))
}

// errNoHostRelease says why a DHCPv6 lease whose interface is gone is not released: its
// messages go from the interface's link-local address to a link-scoped multicast group,
// neither of which the host has on that link.
var errNoHostRelease = errors.New("a DHCPv6 lease cannot be released without its interface; the server keeps it until its valid lifetime ends")

func (f *v6) releaseFromHost(binding) error { return errNoHostRelease }

func (f *v6) lose(b binding) error { return f.c.RemoveAddress(b.(*lease6.Bound)) }

func (f *v6) refused(err error) bool { return errors.Is(err, lease6.ErrRefused) }
