package daemon

import (
	"context"
	"errors"
	"path/filepath"
	"runtime/debug"
	"sync"
	"time"

	"github.com/insomniacslk/dhcp/dhcpv4"
	"github.com/vishvananda/netlink"

	"github.com/cnikit/cni/internal/ipam/dhcp/lease"
	"github.com/cnikit/cni/internal/ipam/dhcp/leasefile"
	"github.com/cnikit/cni/internal/ipam/dhcp/linkid"
)

// held is one lease the daemon holds and its upkeep goroutine.
type held struct {
	client *lease.Client

	// rec is the lease as first kept: who it is for and the options it sends. It is
	// never written after the upkeep starts (each renewal saves a copy with the new
	// ACK), so it is read without the lock.
	rec *leasefile.Record

	mu      sync.Mutex
	bound   *lease.Bound
	expired bool // the lease ran out; the link was taken down

	stop context.CancelFunc
	done chan struct{}
}

// newHeld makes the held lease for a fresh binding.
func (d *Daemon) newHeld(c *lease.Client, rec *leasefile.Record, b *lease.Bound) *held {
	rec.ID = b.Link
	rec.ACK = b.ACK.ToBytes()
	rec.Bound = b.At
	return &held{client: c, rec: rec, bound: b}
}

// heldFromRecord rebuilds a kept lease.
func (d *Daemon) heldFromRecord(r *leasefile.Record) (*held, error) {
	ack, err := parseACK(r.ACK)
	if err != nil {
		return nil, err
	}
	c := d.client(r.ClientID, r.Netns, r.IfName, optionsOf(r))
	return &held{client: c, rec: r, bound: &lease.Bound{ACK: ack, At: r.Bound, Link: r.ID}}, nil
}

// client makes the DHCP client of an attachment.
func (d *Daemon) client(id, netns, ifName string, o clientOptions) *lease.Client {
	return &lease.Client{
		ID:        id,
		Target:    linkid.Target{Netns: d.opts.HostPrefix + filepath.Clean(netns), IfName: ifName, Host: d.host},
		Provide:   o.provide,
		Request:   o.request,
		Broadcast: d.opts.Broadcast,
		Timeout:   d.opts.Timeout,
		ResendMax: d.opts.ResendMax,
		Logf:      d.log.Printf,
	}
}

func (h *held) snapshot() (*lease.Bound, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.bound, h.expired
}

func (h *held) addrText() string {
	b, _ := h.snapshot()
	if p, err := b.Addr(); err == nil {
		return p.String()
	}
	return "?"
}

// start runs the upkeep goroutine; reboot first confirms the lease with the server.
func (d *Daemon) start(h *held, reboot bool) {
	ctx, cancel := context.WithCancel(d.ctx)
	h.stop = cancel
	h.done = make(chan struct{})
	d.wg.Add(1)
	go func() {
		defer d.wg.Done()
		defer close(h.done)
		defer d.recoverUpkeep(h)
		if reboot && !d.reboot(ctx, h) {
			return
		}
		d.upkeep(ctx, h)
	}()
}

// halt stops the upkeep goroutine and waits for it.
func (h *held) halt() {
	if h.stop != nil {
		h.stop()
		<-h.done
	}
}

// recoverUpkeep keeps a panic in one lease's goroutine from killing the daemon: it is
// logged with its stack and that lease's upkeep ends (the lease stays held, so CHECK
// reports it once it runs out, and DEL still releases it).
func (d *Daemon) recoverUpkeep(h *held) {
	if r := recover(); r != nil {
		d.log.Printf("%s: lease upkeep panicked, it is no longer renewed: %v\n%s", h.rec.ClientID, r, debug.Stack())
	}
}

// reboot confirms a kept lease after a restart (INIT-REBOOT), on the interface it was
// bound on only. Only a NAK or an attachment that is gone ends the lease; no answer
// leaves it to the usual renewals, since its times are known.
func (d *Daemon) reboot(ctx context.Context, h *held) bool {
	b, _ := h.snapshot()
	if time.Now().After(b.Times().Expire) {
		return true // upkeep takes it down
	}
	nb, err := h.client.Reboot(ctx, b)
	switch {
	case err == nil:
		d.rebound(h, nb)
		return true
	case d.ended(h, err):
		return false
	case errors.Is(err, lease.ErrNak):
		d.log.Printf("%s: server refused the kept address %s: %v; taking the link down", h.rec.ClientID, b.ACK.YourIPAddr, err)
		d.linkDown(h)
		d.forget(h)
		return false
	case ctx.Err() != nil:
		return false
	}
	d.log.Printf("%s: no answer confirming the kept lease (%v); renewing at T1", h.rec.ClientID, err)
	return true
}

// ended handles the errors that end a lease's upkeep because its attachment is gone
// (released from the host) or was never one to act on (the daemon's own namespace:
// dropped without sending anything), and says whether err was one.
func (d *Daemon) ended(h *held, err error) bool {
	switch {
	case errors.Is(err, linkid.ErrOwnNetns):
		d.log.Printf("%s: refusing to act: %v; dropping the record", h.rec.ClientID, err)
		d.forget(h)
		return true
	case errors.Is(err, linkid.ErrGone):
		d.vanished(h, err)
		return true
	}
	return false
}

// upkeep renews at T1, rebinds after T2, and takes the link down at expiry.
func (d *Daemon) upkeep(ctx context.Context, h *held) {
	for {
		b, _ := h.snapshot()
		t := b.Times()
		now := time.Now()
		if !now.Before(t.Expire) {
			d.expire(h)
			return
		}
		if now.Before(t.Renew) {
			if !sleep(ctx, t.Renew.Sub(now)) {
				return
			}
			continue
		}
		phase := "renew"
		if !now.Before(t.Rebind) {
			phase = "rebind"
		}
		if !d.renewOnce(ctx, h, b, phase, t) {
			return
		}
	}
}

// renewOnce makes one renewal attempt and, after a failure, waits half the time left
// to the next boundary (RFC 2131 §4.4.5), at least a second and at most a minute.
func (d *Daemon) renewOnce(ctx context.Context, h *held, b *lease.Bound, phase string, t lease.Times) bool {
	nb, err := h.client.Renew(ctx, b)
	switch {
	case err == nil:
		d.rebound(h, nb)
		return true
	case d.ended(h, err):
		return false
	case errors.Is(err, lease.ErrNak):
		d.log.Printf("%s: %s refused: %v", h.rec.ClientID, phase, err)
		d.expire(h)
		return false
	case ctx.Err() != nil:
		return false
	}
	next := t.Rebind
	if phase == "rebind" {
		next = t.Expire
	}
	wait := min(max(time.Until(next)/2, time.Second), time.Minute)
	d.log.Printf("%s: %s failed: %v; next try in %s", h.rec.ClientID, phase, err, wait.Round(time.Second))
	return sleep(ctx, wait)
}

// rebound records a new ACK in memory and on disk.
func (d *Daemon) rebound(h *held, b *lease.Bound) {
	h.mu.Lock()
	h.bound = b
	h.expired = false
	h.mu.Unlock()
	rec := *h.rec
	rec.ID = b.Link // a record of an earlier version gets its identity here
	rec.ACK = b.ACK.ToBytes()
	rec.Bound = b.At
	if err := d.store.Save(&rec); err != nil {
		d.log.Printf("%s: %v", rec.ClientID, err)
	}
	d.log.Printf("%s: lease of %s renewed, expires %s", rec.ClientID, h.addrText(), b.Times().ExpireText())
}

// expire takes the link down: the address is no longer ours to use. The lease stays
// held (CHECK fails, DEL still releases and forgets it) unless its attachment is gone.
func (d *Daemon) expire(h *held) {
	h.mu.Lock()
	h.expired = true
	h.mu.Unlock()
	d.log.Printf("%s: lease of %s expired; taking the interface down", h.rec.ClientID, h.addrText())
	d.ended(h, d.linkDown(h))
}

// vanished releases, from the host, the lease of an attachment whose namespace or
// interface is gone, and forgets it: nothing is left to renew it for.
func (d *Daemon) vanished(h *held, why error) {
	d.log.Printf("%s: %v; releasing %s from the host", h.rec.ClientID, why, h.addrText())
	b, _ := h.snapshot()
	if err := lease.ReleaseFromHost(h.rec.ClientID, b.ACK); err != nil {
		d.log.Printf("%s: %v", h.rec.ClientID, err)
	}
	d.forget(h)
}

// linkDown takes the lease's interface down, provided it still is the one the lease was
// bound on.
func (d *Daemon) linkDown(h *held) error {
	b, _ := h.snapshot()
	_, err := h.client.Target.Enter(&b.Link, func(l netlink.Link) error { return netlink.LinkSetDown(l) })
	if err != nil {
		d.log.Printf("%s: taking %s down: %v", h.rec.ClientID, h.client.Target.IfName, err)
	}
	return err
}

// sleep waits for d or until ctx ends, and says whether to go on.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// clientOptions are the options a lease's requests carry.
type clientOptions struct {
	provide []dhcpv4.Option
	request []dhcpv4.OptionCode
}

// optionsOf reads a kept lease's options back.
func optionsOf(r *leasefile.Record) clientOptions {
	var o clientOptions
	for _, p := range r.Provide {
		o.provide = append(o.provide, dhcpv4.OptGeneric(dhcpv4.GenericOptionCode(uint8(p.Code)), p.Value))
	}
	for _, c := range r.Request {
		o.request = append(o.request, dhcpv4.GenericOptionCode(uint8(c)))
	}
	return o
}

// recordOptions is optionsOf's inverse.
func recordOptions(r *leasefile.Record, o clientOptions) {
	for _, p := range o.provide {
		r.Provide = append(r.Provide, leasefile.Option{Code: int(p.Code.Code()), Value: p.Value.ToBytes()})
	}
	for _, c := range o.request {
		r.Request = append(r.Request, int(c.Code()))
	}
}
