package daemon

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"time"

	"github.com/cnikit/cni/internal/cnierror"
	"github.com/cnikit/cni/internal/ipam/dhcp/dhcpconf"
	"github.com/cnikit/cni/internal/ipam/dhcp/lease"
	"github.com/cnikit/cni/internal/ipam/dhcp/leasefile"
	"github.com/cnikit/cni/internal/ipam/dhcp/linkid"
	"github.com/cnikit/cni/internal/ipam/dhcp/wire"
	"github.com/cnikit/cni/internal/skel"
)

// Allocate is the reference's DHCP.Allocate: the attachment's lease as a result,
// acquired now unless the daemon already holds a live one (the reference plugin's CHECK
// calls Allocate too). A server that does not answer within ResendTimeout is code 11,
// and nothing of the attempt is kept.
func (d *Daemon) Allocate(args *wire.CmdArgs) (*wire.Result, error) {
	conf, id, err := d.request(args)
	if err != nil {
		return nil, err
	}
	unlock := d.locks.lock(id)
	defer unlock()
	if h := d.lookup(id); h != nil {
		if b, expired := h.snapshot(); !expired {
			return leaseResult(b, conf.Priority)
		}
		d.log.Printf("%s: replacing an expired lease", id)
		d.drop(h)
	}
	return d.acquire(args, conf, id)
}

// acquire gets a new lease, keeps it on disk and starts its upkeep. The caller holds
// the client id's lock.
func (d *Daemon) acquire(args *wire.CmdArgs, conf *dhcpconf.Config, id string) (*wire.Result, error) {
	netns, err := filepath.Abs(args.Netns)
	if err != nil {
		return nil, cnierror.Newf(cnierror.CodeInvalidEnv, "netns %q: %v", args.Netns, err)
	}
	opts := clientOptions{provide: conf.Provide, request: conf.Request}
	c := d.client(id, netns, args.IfName, opts)
	ctx, cancel := context.WithTimeout(d.ctx, d.opts.ResendTimeout)
	defer cancel()
	b, err := c.Acquire(ctx)
	if err != nil {
		return nil, acquireError(id, args.IfName, d.opts.ResendTimeout, err)
	}
	res, err := leaseResult(b, conf.Priority)
	if err != nil {
		_ = c.Release(b)
		return nil, err
	}
	h, err := d.keep(args, conf, netns, c, opts, b)
	if err != nil {
		_ = c.Release(b)
		return nil, err
	}
	d.start(h, false)
	tm := b.Times()
	d.log.Printf("%s: lease of %s acquired, renew at %s, expires %s", id, h.addrText(),
		tm.Renew.Format(time.RFC3339), tm.ExpireText())
	return res, nil
}

// keep records a new binding on disk and in the table. The caller holds the client id's
// lock and starts the upkeep.
func (d *Daemon) keep(args *wire.CmdArgs, conf *dhcpconf.Config, netns string, c *lease.Client, opts clientOptions, b *lease.Bound) (*held, error) {
	rec := &leasefile.Record{ClientID: c.ID, ContainerID: args.ContainerID, Network: conf.Network,
		IfName: args.IfName, Netns: netns, Priority: conf.Priority}
	recordOptions(rec, opts)
	h := d.newHeld(c, rec, b)
	if err := d.store.Save(h.rec); err != nil {
		return nil, cnierror.Newf(cnierror.CodeIO, "dhcp: keeping the lease: %v", err)
	}
	d.mu.Lock()
	d.leases[c.ID] = h
	d.mu.Unlock()
	return h, nil
}

// adopt takes over the lease of an attachment this daemon holds nothing for but whose
// prevResult names an IPv4 address: one the reference daemon got before an in-place
// upgrade (it keeps its leases only in memory, and neither renews nor releases them
// once stopped). An INIT-REBOOT for that address from the attachment's interface, with
// the client id both daemons use, gets the server's ACK when the lease is this client's;
// from then on it is held like any other (and released by DEL). Without a prevResult,
// a namespace, or an answer, there is nothing to take over, which only the log says.
// The caller holds the client id's lock.
func (d *Daemon) adopt(args *wire.CmdArgs, id string) *held {
	addr, ok := dhcpconf.PrevIPv4(args.StdinData, args.IfName)
	if !ok || validAttachment(args) != nil {
		return nil
	}
	conf, err := dhcpconf.Parse(args.StdinData, args.Args)
	if err != nil { // DEL reads what it can: the lease is found by the network's name
		network, _ := dhcpconf.NetworkName(args.StdinData)
		conf = &dhcpconf.Config{Network: network}
	}
	netns, err := filepath.Abs(args.Netns)
	if err != nil {
		return nil
	}
	opts := clientOptions{provide: conf.Provide, request: conf.Request}
	c := d.client(id, netns, args.IfName, opts)
	ctx, cancel := context.WithTimeout(d.ctx, d.opts.Timeout)
	defer cancel()
	b, err := c.Adopt(ctx, addr.AsSlice())
	if err != nil {
		d.log.Printf("%s: no lease of ours; taking over %s (prevResult) failed: %v", id, addr, err)
		return nil
	}
	h, err := d.keep(args, conf, netns, c, opts, b)
	if err != nil {
		d.log.Printf("%s: %v", id, err)
		_ = c.Release(b)
		return nil
	}
	d.log.Printf("%s: took over the lease of %s that another daemon got (prevResult)", id, h.addrText())
	return h
}

// Release is the reference's DHCP.Release: the lease goes back to the server and is
// forgotten; a lease the reference daemon got before an upgrade is taken over and
// released alike (adopt). Nothing to release is no error, and a failed release is only
// logged: the runtime's DEL must succeed.
func (d *Daemon) Release(args *wire.CmdArgs) (*wire.Empty, error) {
	id, err := d.clientID(args)
	if err != nil {
		return nil, err
	}
	unlock := d.locks.lock(id)
	defer unlock()
	h := d.lookup(id)
	if h == nil {
		h = d.adopt(args, id) // the reference daemon's, before an upgrade: released too
	}
	if h != nil {
		d.drop(h)
	}
	return &wire.Empty{}, nil
}

// Check (ours) succeeds when the daemon holds a live lease for the attachment. An
// attachment it holds nothing for, whose prevResult names an address the server still
// gives this client (a lease of the reference daemon before an upgrade), is taken over
// and renewed from then on: it would otherwise run out while the pod uses it.
func (d *Daemon) Check(args *wire.CmdArgs) (*wire.Empty, error) {
	id, err := d.clientID(args)
	if err != nil {
		return nil, err
	}
	h := d.lookupOrAdopt(args, id)
	if h == nil {
		return nil, fmt.Errorf("dhcp: the daemon holds no lease for %s", id)
	}
	b, expired := h.snapshot()
	if expired || !time.Now().Before(b.Times().Expire) {
		return nil, fmt.Errorf("dhcp: the lease of %s for %s has expired", b.ACK.YourIPAddr, id)
	}
	return &wire.Empty{}, nil
}

func (d *Daemon) lookupOrAdopt(args *wire.CmdArgs, id string) *held {
	unlock := d.locks.lock(id)
	defer unlock()
	if h := d.lookup(id); h != nil {
		return h
	}
	h := d.adopt(args, id)
	if h != nil {
		d.start(h, false)
	}
	return h
}

// GC (ours) releases the leases of the config's network whose attachment is not in
// its valid list.
func (d *Daemon) GC(args *wire.CmdArgs) (*wire.Empty, error) {
	conf, err := dhcpconf.Parse(args.StdinData, "")
	if err != nil {
		return nil, err
	}
	valid := map[skel.Attachment]bool{}
	for _, a := range conf.Valid {
		valid[a] = true
	}
	var stale []*held
	d.mu.Lock()
	for _, h := range d.leases {
		r := h.rec
		if r.Network == conf.Network && !valid[skel.Attachment{ContainerID: r.ContainerID, IfName: r.IfName}] {
			stale = append(stale, h)
		}
	}
	d.mu.Unlock()
	for _, h := range stale {
		unlock := d.locks.lock(h.rec.ClientID)
		if d.lookup(h.rec.ClientID) == h {
			d.log.Printf("%s: GC: attachment is not valid", h.rec.ClientID)
			d.drop(h)
		}
		unlock()
	}
	return &wire.Empty{}, nil
}

// Status (ours) answers: the daemon is up.
func (d *Daemon) Status(*wire.CmdArgs) (*wire.Empty, error) { return &wire.Empty{}, nil }

// drop stops a lease's upkeep, releases it (from the interface, or from the host when
// the attachment is gone) and forgets it. The caller holds the client id's lock.
func (d *Daemon) drop(h *held) {
	h.halt()
	b, _ := h.snapshot()
	err := h.client.Release(b)
	if err != nil {
		// Gone, or unable to send from there (no address yet, no route): the host
		// may still reach the server.
		if herr := lease.ReleaseFromHost(h.rec.ClientID, b.ACK); herr == nil {
			err = nil
		} else {
			err = errors.Join(err, herr)
		}
	}
	if err != nil {
		d.log.Printf("%s: release: %v", h.rec.ClientID, err)
	} else {
		d.log.Printf("%s: lease of %s released", h.rec.ClientID, h.addrText())
	}
	d.forget(h)
}

// request reads a call's config and client id.
func (d *Daemon) request(args *wire.CmdArgs) (*dhcpconf.Config, string, error) {
	conf, err := dhcpconf.Parse(args.StdinData, args.Args)
	if err != nil {
		return nil, "", err
	}
	if err := validAttachment(args); err != nil {
		return nil, "", err
	}
	return conf, dhcpconf.ClientID(args.ContainerID, conf.Network, args.IfName), nil
}

// clientID reads only what names the lease, so DEL works with any config of the network.
func (d *Daemon) clientID(args *wire.CmdArgs) (string, error) {
	network, err := dhcpconf.NetworkName(args.StdinData)
	if err != nil {
		return "", err
	}
	return dhcpconf.ClientID(args.ContainerID, network, args.IfName), nil
}

// validAttachment refuses what a plugin never sends: a daemon call is outside input.
func validAttachment(args *wire.CmdArgs) error {
	if err := skel.ValidateContainerID(args.ContainerID); err != nil {
		return err
	}
	if err := skel.ValidateIfName(args.IfName); err != nil {
		return err
	}
	if args.Netns == "" {
		return cnierror.New(cnierror.CodeInvalidEnv, "dhcp: no netns given")
	}
	return nil
}

func leaseResult(b *lease.Bound, priority int) (*wire.Result, error) {
	res, err := b.Result(priority)
	if err != nil {
		return nil, err
	}
	return wire.FromResult(res), nil
}

func acquireError(id, ifName string, limit time.Duration, err error) error {
	if errors.Is(err, linkid.ErrOwnNetns) {
		return cnierror.Newf(cnierror.CodeInvalidNetNS, "dhcp %s: %v; refusing to act on it", id, err)
	}
	if errors.Is(err, linkid.ErrGone) {
		return cnierror.Newf(cnierror.CodeInvalidNetNS, "dhcp %s: %v", id, err)
	}
	return cnierror.Newf(cnierror.CodeTryAgainLater, "dhcp %s: no lease from a DHCP server on %s within %s: %v", id, ifName, limit, err)
}
