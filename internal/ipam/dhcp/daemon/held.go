package daemon

import (
	"context"
	"errors"
	"runtime/debug"
	"sync"
	"time"

	"github.com/cnikit/cni/internal/ipam/dhcp/lease"
	"github.com/cnikit/cni/internal/ipam/dhcp/leasefile"
	"github.com/cnikit/cni/internal/ipam/dhcp/linkid"
)

// held is one lease the daemon holds (of one family, for one attachment) and its upkeep
// goroutine.
type held struct {
	fam family

	// rec is the lease as first kept: who it is for and the options it sends. It is
	// never written after the upkeep starts (each renewal saves a copy with the new
	// answer), so it is read without the lock.
	rec *leasefile.Record

	mu      sync.Mutex
	bound   binding
	expired bool // the lease ran out; its address was withdrawn

	stop context.CancelFunc
	done chan struct{}
}

// who names the lease in the log: its client id, and the family when it is DHCPv6.
func (h *held) who() string {
	if h.rec.Family == leasefile.DHCPv6 {
		return h.rec.ClientID + " (DHCPv6)"
	}
	return h.rec.ClientID
}

func (h *held) snapshot() (binding, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.bound, h.expired
}

func (h *held) addrText() string {
	b, _ := h.snapshot()
	return b.AddrText()
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
		d.log.Printf("%s: lease upkeep panicked, it is no longer renewed: %v\n%s", h.who(), r, debug.Stack())
	}
}

// reboot confirms a kept lease after a restart (DHCPv4's INIT-REBOOT, DHCPv6's
// REBIND), on the interface it was bound on only. Only a refusal or an attachment that
// is gone ends the lease; no answer leaves it to the usual renewals, since its times are
// known.
func (d *Daemon) reboot(ctx context.Context, h *held) bool {
	b, _ := h.snapshot()
	if time.Now().After(b.Times().Expire) {
		return true // upkeep takes it down
	}
	nb, err := h.fam.confirm(ctx, b)
	d.heard(h, err)
	if done, goOn := d.settled(ctx, h, nb, err, func() {
		d.log.Printf("%s: server refused the kept address %s: %v; withdrawing it", h.who(), b.AddrText(), err)
		d.lose(h)
		d.forget(h)
	}); done {
		return goOn
	}
	d.log.Printf("%s: no answer confirming the kept lease (%v); renewing at T1", h.who(), err)
	return true
}

// settled acts on an exchange's outcome where it decides the upkeep, and says whether it
// did (done) and then whether the upkeep goes on: an answer extends the lease; an
// attachment that is gone (ended), a refusal (after refuse) or the daemon's stop ends
// it. No answer is the caller's to handle.
func (d *Daemon) settled(ctx context.Context, h *held, nb binding, err error, refuse func()) (done, goOn bool) {
	switch {
	case err == nil:
		d.rebound(h, nb)
		return true, true
	case d.ended(h, err):
	case h.fam.refused(err):
		refuse()
	case ctx.Err() == nil:
		return false, false
	}
	return true, false
}

// ended handles the errors that end a lease's upkeep because its attachment is gone
// (released from the host) or was never one to act on (the daemon's own namespace:
// dropped without sending anything), and says whether err was one.
func (d *Daemon) ended(h *held, err error) bool {
	switch {
	case errors.Is(err, linkid.ErrOwnNetns):
		d.log.Printf("%s: refusing to act: %v; dropping the record", h.who(), err)
		d.forget(h)
		return true
	case errors.Is(err, linkid.ErrGone):
		d.vanished(h, err)
		return true
	}
	return false
}

// upkeep renews at T1, rebinds after T2, and withdraws the address at expiry.
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
		if !d.renewOnce(ctx, h, b, !now.Before(t.Rebind)) {
			return
		}
	}
}

// renewOnce makes one renewal attempt (a rebinding one after T2) and, after a failure,
// waits half the time left to the next boundary (RFC 2131 §4.4.5, RFC 8415 §18.2.4),
// at least a second and at most a minute. An attempt that reached the network is counted
// and logged; one the daemon's stop cut short, or that found the attachment gone, is not.
func (d *Daemon) renewOnce(ctx context.Context, h *held, b binding, rebind bool) bool {
	phase, next := "renew", b.Times().Rebind
	if rebind {
		phase, next = "rebind", b.Times().Expire
	}
	start := time.Now()
	nb, err := h.fam.renew(ctx, b, rebind)
	d.heard(h, err)
	if ctx.Err() == nil && !lease.Final(err) {
		d.renewed(h, phase, start, err)
	}
	if done, goOn := d.settled(ctx, h, nb, err, func() {
		d.log.Printf("%s: %s refused: %v", h.who(), phase, err)
		d.expire(h)
	}); done {
		return goOn
	}
	wait := min(max(time.Until(next)/2, time.Second), time.Minute)
	d.log.Printf("%s: %s failed: %v; next try in %s", h.who(), phase, err, wait.Round(time.Second))
	return sleep(ctx, wait)
}

// heard notes what an exchange of the lease said of its network's servers (STATUS).
func (d *Daemon) heard(h *held, err error) {
	d.reach.note(h.rec.Network, h.rec.Family, err, h.fam.refused(err))
}

// rebound records a new answer in memory and on disk.
func (d *Daemon) rebound(h *held, b binding) {
	h.mu.Lock()
	h.bound = b
	h.expired = false
	h.mu.Unlock()
	rec := *h.rec
	b.Stamp(&rec)
	if err := d.store.Save(&rec); err != nil {
		d.log.Printf("%s: %v", h.who(), err)
	}
	d.log.Printf("%s: lease of %s renewed, expires %s", h.who(), b.AddrText(), b.Times().ExpireText())
}

// expire withdraws the address (DHCPv4: the link goes down): it is no longer ours to
// use. The lease stays held (CHECK fails, DEL still releases and forgets it) unless its
// attachment is gone.
func (d *Daemon) expire(h *held) {
	h.mu.Lock()
	h.expired = true
	h.mu.Unlock()
	d.expired(h)
	d.log.Printf("%s: lease of %s expired; withdrawing it", h.who(), h.addrText())
	d.ended(h, d.lose(h))
}

// vanished releases, from the host, the lease of an attachment whose namespace or
// interface is gone, and forgets it: nothing is left to renew it for.
func (d *Daemon) vanished(h *held, why error) {
	d.log.Printf("%s: %v; releasing %s from the host", h.who(), why, h.addrText())
	b, _ := h.snapshot()
	if err := h.fam.releaseFromHost(b); err != nil {
		d.log.Printf("%s: %v", h.who(), err)
	}
	d.forget(h)
}

// lose withdraws the lease's address from its interface, provided that still is the
// one the lease was bound on.
func (d *Daemon) lose(h *held) error {
	b, _ := h.snapshot()
	err := h.fam.lose(b)
	if err != nil {
		d.log.Printf("%s: withdrawing %s from %s: %v", h.who(), b.AddrText(), h.rec.IfName, err)
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
