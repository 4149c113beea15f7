package daemon

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/cnikit/cni/internal/core/cnierror"
	"github.com/cnikit/cni/internal/ipam/dhcp/dhcpconf"
	"github.com/cnikit/cni/internal/ipam/dhcp/leasefile"
	"github.com/cnikit/cni/internal/ipam/dhcp/linkid"
	"github.com/cnikit/cni/internal/ipam/dhcp/wire"
	"github.com/cnikit/cni/internal/result"
	"github.com/cnikit/cni/internal/spec/skel"
)

// families are the lease families a config asks for, DHCPv4 first.
func families(conf *dhcpconf.Config) []leasefile.Family {
	var out []leasefile.Family
	if conf.IPv4 {
		out = append(out, leasefile.DHCPv4)
	}
	if conf.IPv6 {
		out = append(out, leasefile.DHCPv6)
	}
	return out
}

// allFamilies are what DEL releases, whatever the config says now.
var allFamilies = [...]leasefile.Family{leasefile.DHCPv4, leasefile.DHCPv6}

// Allocate is the reference's DHCP.Allocate: the attachment's leases as one result, each
// family's acquired now unless the daemon already holds a live one (the reference
// plugin's CHECK calls Allocate too). With both families the two are asked for at once;
// if either fails, the one this call got is released and nothing is kept. A server that
// does not answer within ResendTimeout is code 11.
func (d *Daemon) Allocate(args *wire.CmdArgs) (*wire.Result, error) {
	conf, id, err := d.request(args)
	if err != nil {
		return nil, err
	}
	unlock := d.locks.lock(id)
	defer unlock()
	fams := families(conf)
	hs, fresh, errs := make([]*held, len(fams)), make([]bool, len(fams)), make([]error, len(fams))
	var wg sync.WaitGroup
	for i, f := range fams {
		wg.Go(func() { hs[i], fresh[i], errs[i] = d.allocate(args, conf, id, f) })
	}
	wg.Wait()
	if err := cmp.Or(errs...); err != nil { // the first family's failure
		for i, h := range hs {
			if fresh[i] && h != nil {
				d.log.Printf("%s: the other family failed (%v); releasing %s", h.who(), err, h.addrText())
				d.drop(h)
			}
		}
		return nil, err
	}
	for i, h := range hs {
		if fresh[i] {
			d.start(h, false)
		}
	}
	return results(hs, conf)
}

// allocate gives one family's live lease: the one held, or a new one (fresh), whose
// upkeep the caller starts. The caller holds the client id's lock.
func (d *Daemon) allocate(args *wire.CmdArgs, conf *dhcpconf.Config, id string, f leasefile.Family) (h *held, fresh bool, err error) {
	if h := d.lookup(leasefile.Key(f, id)); h != nil {
		if _, expired := h.snapshot(); !expired {
			return h, false, nil
		}
		d.log.Printf("%s: replacing an expired lease", h.who())
		d.drop(h)
	}
	h, err = d.acquire(args, conf, id, f)
	return h, err == nil, err
}

// acquire gets a new lease of one family and keeps it on disk.
func (d *Daemon) acquire(args *wire.CmdArgs, conf *dhcpconf.Config, id string, f leasefile.Family) (*held, error) {
	rec, err := newRecord(args, conf, f)
	if err != nil {
		return nil, err
	}
	fam := d.newFamily(rec)
	ctx, cancel := context.WithTimeout(d.ctx, d.opts.ResendTimeout)
	defer cancel()
	b, err := fam.acquire(ctx)
	d.reach.note(conf.Network, f, err, false)
	if err != nil {
		d.counts.allocationFailures.Add(1)
		return nil, acquireError(id, f, args.IfName, d.opts.ResendTimeout, err)
	}
	if _, err := b.Result(conf.Priority); err != nil {
		// The server's answer is no lease a pod can use (lease.ErrUnusable: ff02::1,
		// ::1, 127.0.0.1, ...): it is refused, said in the log, and given back.
		d.counts.allocationFailures.Add(1)
		d.log.Printf("%s: %s lease of %s refused: %v", id, f, b.AddrText(), err)
		_ = fam.release(b)
		return nil, cnierror.Newf(cnierror.CodeTryAgainLater, "dhcp %s: the %s server's lease on %s is refused: %v", id, f, args.IfName, err)
	}
	h, err := d.keep(rec, fam, b)
	if err != nil {
		_ = fam.release(b)
		return nil, err
	}
	d.counts.allocations.Add(1)
	tm := b.Times()
	d.log.Printf("%s: lease of %s acquired, renew at %s, expires %s", h.who(), b.AddrText(),
		tm.Renew.Format(time.RFC3339), tm.ExpireText())
	return h, nil
}

// newRecord is the record of a new lease of family f for the call's attachment: its
// netns made absolute, and the options its requests carry.
func newRecord(args *wire.CmdArgs, conf *dhcpconf.Config, f leasefile.Family) (*leasefile.Record, error) {
	netns, err := filepath.Abs(args.Netns)
	if err != nil {
		return nil, cnierror.Newf(cnierror.CodeInvalidEnv, "netns %q: %v", args.Netns, err)
	}
	rec := &leasefile.Record{Family: f, ClientID: dhcpconf.ClientID(args.ContainerID, conf.Network, args.IfName),
		ContainerID: args.ContainerID, Network: conf.Network, IfName: args.IfName, Netns: netns, Priority: conf.Priority}
	for _, p := range conf.Provide {
		rec.Provide = append(rec.Provide, leasefile.Option{Code: int(p.Code.Code()), Value: p.Value.ToBytes()})
	}
	for _, c := range conf.Request {
		rec.Request = append(rec.Request, int(c.Code()))
	}
	return rec, nil
}

// keep records a new binding on disk and in the table. The caller holds the client id's
// lock and starts the upkeep.
func (d *Daemon) keep(rec *leasefile.Record, fam family, b binding) (*held, error) {
	b.Stamp(rec)
	h := &held{fam: fam, rec: rec, bound: b}
	if err := d.store.Save(rec); err != nil {
		return nil, cnierror.Newf(cnierror.CodeIO, "dhcp: keeping the lease: %v", err)
	}
	d.mu.Lock()
	d.leases[rec.Key()] = h
	d.mu.Unlock()
	return h, nil
}

// results is the attachment's result: each family's address and DNS (DHCPv4's routes
// with priority as their metric), and the config's routes.
func results(hs []*held, conf *dhcpconf.Config) (*wire.Result, error) {
	out := &result.Result{CNIVersion: "1.1.0"}
	for _, h := range hs {
		b, _ := h.snapshot()
		r, err := b.Result(conf.Priority)
		if err != nil {
			return nil, err
		}
		out.IPs = append(out.IPs, r.IPs...)
		out.Routes = append(out.Routes, r.Routes...)
		out.DNS.Nameservers = append(out.DNS.Nameservers, r.DNS.Nameservers...)
		out.DNS.Domain = cmp.Or(out.DNS.Domain, r.DNS.Domain)
		for _, s := range r.DNS.Search {
			if !slices.Contains(out.DNS.Search, s) {
				out.DNS.Search = append(out.DNS.Search, s)
			}
		}
	}
	for _, rt := range conf.Routes {
		rt.Priority = cmp.Or(rt.Priority, conf.Priority)
		out.Routes = append(out.Routes, rt)
	}
	return wire.FromResult(out), nil
}

// adopt takes over the DHCPv4 lease of an attachment this daemon holds nothing for but
// whose prevResult names an IPv4 address: one the reference daemon got before an
// in-place upgrade (it keeps its leases only in memory, and neither renews nor releases
// them once stopped). An INIT-REBOOT for that address from the attachment's interface,
// with the client id both daemons use, gets the server's ACK when the lease is this
// client's; from then on it is held like any other (and released by DEL). Without a
// prevResult, a namespace, or an answer, there is nothing to take over, which only the
// log says. The caller holds the client id's lock.
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
	rec, err := newRecord(args, conf, leasefile.DHCPv4)
	if err != nil {
		return nil
	}
	fam := d.newFamily(rec)
	ctx, cancel := context.WithTimeout(d.ctx, d.opts.Timeout)
	defer cancel()
	b, err := fam.(*v4).adopt(ctx, addr.AsSlice())
	if err != nil {
		d.log.Printf("%s: no lease of ours; taking over %s (prevResult) failed: %v", id, addr, err)
		return nil
	}
	h, err := d.keep(rec, fam, b)
	if err != nil {
		d.log.Printf("%s: %v", id, err)
		_ = fam.release(b)
		return nil
	}
	d.log.Printf("%s: took over the lease of %s that another daemon got (prevResult)", id, b.AddrText())
	return h
}

// Release is the reference's DHCP.Release: every lease of the attachment goes back to
// its server and is forgotten; a DHCPv4 lease the reference daemon got before an
// upgrade is taken over and released alike (adopt). Nothing to release is no error, and
// a failed release is only logged: the runtime's DEL must succeed.
func (d *Daemon) Release(args *wire.CmdArgs) (*wire.Empty, error) {
	id, err := d.clientID(args)
	if err != nil {
		return nil, err
	}
	unlock := d.locks.lock(id)
	defer unlock()
	for _, f := range allFamilies {
		h := d.lookup(leasefile.Key(f, id))
		if h == nil && f == leasefile.DHCPv4 {
			h = d.adopt(args, id)
		}
		if h != nil {
			d.drop(h)
		}
	}
	return &wire.Empty{}, nil
}

// Check (ours) succeeds when the daemon holds a live lease of every family the config
// asks for. An attachment it holds no DHCPv4 lease for, whose prevResult names an
// address the server still gives this client (a lease of the reference daemon before
// an upgrade), is taken over and renewed from then on: it would otherwise run out while
// the pod uses it.
func (d *Daemon) Check(args *wire.CmdArgs) (*wire.Empty, error) {
	conf, err := dhcpconf.Parse(args.StdinData, args.Args)
	if err != nil {
		return nil, err
	}
	id := dhcpconf.ClientID(args.ContainerID, conf.Network, args.IfName)
	for _, f := range families(conf) {
		h := d.lookupOrAdopt(args, id, f)
		if h == nil {
			return nil, fmt.Errorf("dhcp: the daemon holds no %s lease for %s", f, id)
		}
		b, expired := h.snapshot()
		if expired || !time.Now().Before(b.Times().Expire) {
			return nil, fmt.Errorf("dhcp: the %s lease of %s for %s has expired", f, b.AddrText(), id)
		}
	}
	return &wire.Empty{}, nil
}

func (d *Daemon) lookupOrAdopt(args *wire.CmdArgs, id string, f leasefile.Family) *held {
	unlock := d.locks.lock(id)
	defer unlock()
	if h := d.lookup(leasefile.Key(f, id)); h != nil || f != leasefile.DHCPv4 {
		return h
	}
	h := d.adopt(args, id)
	if h != nil {
		d.start(h, false)
	}
	return h
}

// GC (ours) releases the leases, of both families, of the config's network whose
// attachment is not in its valid list.
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
		if d.lookup(h.rec.Key()) == h {
			d.log.Printf("%s: GC: attachment is not valid", h.who())
			d.drop(h)
		}
		unlock()
	}
	return &wire.Empty{}, nil
}

// Status (ours) answers that the daemon is up and, for each family the config asks
// for, that the network's servers answered its last exchange: code 50 names the family
// whose last exchange went unanswered (until one is answered again). A network the
// daemon has not talked DHCP on yet is available.
func (d *Daemon) Status(args *wire.CmdArgs) (*wire.Empty, error) {
	conf, err := dhcpconf.Parse(args.StdinData, "")
	if err != nil {
		return &wire.Empty{}, nil // the plugin checked the config; the daemon is up
	}
	var errs []error
	for _, f := range families(conf) {
		if c, ok := d.reach.unanswered(conf.Network, f); ok {
			errs = append(errs, fmt.Errorf("no %s server answered on network %q at %s: %s", f, conf.Network, c.at.Format(time.RFC3339), c.err))
		}
	}
	if len(errs) > 0 {
		return nil, cnierror.Newf(cnierror.CodeNotAvailable, "dhcp: %v", errors.Join(errs...))
	}
	return &wire.Empty{}, nil
}

// drop stops a lease's upkeep, releases it (from the interface, or from the host when
// the attachment is gone) and forgets it. The caller holds the client id's lock.
func (d *Daemon) drop(h *held) {
	h.halt()
	b, _ := h.snapshot()
	err := h.fam.release(b)
	if err != nil {
		// Gone, or unable to send from there (no address yet, no route): the host
		// may still reach the server.
		if herr := h.fam.releaseFromHost(b); herr == nil {
			err = nil
		} else {
			err = errors.Join(err, herr)
		}
	}
	if err != nil {
		d.log.Printf("%s: release: %v", h.who(), err)
	} else {
		d.log.Printf("%s: lease of %s released", h.who(), b.AddrText())
	}
	d.counts.releases.Add(1)
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

func acquireError(id string, fam leasefile.Family, ifName string, limit time.Duration, err error) error {
	if errors.Is(err, linkid.ErrOwnNetns) {
		return cnierror.Newf(cnierror.CodeInvalidNetNS, "dhcp %s: %v; refusing to act on it", id, err)
	}
	if errors.Is(err, linkid.ErrGone) {
		// The netns or its interface is not there: the container is, in the spec's
		// words, unknown or gone (code 3), as every plugin says of a missing netns.
		return cnierror.Newf(cnierror.CodeUnknownContainer, "dhcp %s: %v", id, err)
	}
	return cnierror.Newf(cnierror.CodeTryAgainLater, "dhcp %s: no lease from a %s server on %s within %s: %v", id, fam, ifName, limit, err)
}
