// Package daemon is the dhcp IPAM daemon: it holds a DHCPv4 lease per attachment, and
// a DHCPv6 one where the config asks (ipam.ipv6), gets each inside the container's
// network namespace on the container's interface, renews it at T1, rebinds at T2,
// withdraws the address at expiry (DHCPv4 takes the link down), and answers the
// plugin's calls (the reference's DHCP.Allocate and DHCP.Release, and our Check, GC,
// Status and Counters) on a unix socket. Each call and each lease event (renewal,
// rebind, expiry) of either family is counted and, with a log, written to the
// invocation log (observe.go).
//
// Every lease is kept on disk (leasefile) as soon as it is bound and after every
// renewal, so a restarted daemon confirms each one (INIT-REBOOT), goes on renewing it,
// and still releases it on DEL; a lease whose namespace is gone is released from the
// host and dropped.
package daemon

import (
	"context"
	"log"
	"net"
	"os"
	"sync"
	"time"

	"github.com/cnikit/cni/internal/ipam/dhcp/leasefile"
	"github.com/cnikit/cni/internal/ipam/dhcp/linkid"
	"github.com/cnikit/cni/internal/ipam/dhcp/wire"
	"github.com/cnikit/cni/internal/obs/invlog"
)

// Options are the daemon's settings, the reference's flags plus the state directory.
type Options struct {
	// HostPrefix is put before every netns path (a daemon in a container sees the
	// host's /proc or /run under it).
	HostPrefix string
	// StateDir holds the lease files.
	StateDir string
	// Broadcast asks servers to broadcast their answers.
	Broadcast bool
	// Timeout bounds one send-and-wait.
	Timeout time.Duration
	// ResendMax caps the pause between attempts to get a lease.
	ResendMax time.Duration
	// ResendTimeout bounds the whole attempt to get a lease for an ADD.
	ResendTimeout time.Duration
	// Log is the invocation log the daemon writes a line to for each call and lease
	// event; nil for none.
	Log *invlog.Config
}

// Defaults are the reference's flag defaults.
func Defaults() Options {
	return Options{
		StateDir:      leasefile.DefaultDir,
		Timeout:       10 * time.Second,
		ResendMax:     62 * time.Second,
		ResendTimeout: 208 * time.Second,
	}
}

// Daemon holds the leases.
type Daemon struct {
	opts  Options
	host  linkid.Host // where the daemon itself runs: never acted on
	store *leasefile.Store
	log   *log.Logger

	ctx      context.Context // ends when the daemon stops
	cancel   context.CancelFunc
	wg       sync.WaitGroup
	stopOnce sync.Once

	mu     sync.Mutex
	leases map[string]*held // by leasefile.Key: one per attachment and family
	locks  keyedMutex       // by client id: both families of an attachment
	reach  reachability

	counts counters
}

// New opens the state directory and loads the leases kept there; Start resumes them.
func New(opts Options, logger *log.Logger) (*Daemon, error) {
	host, err := linkid.Self()
	if err != nil {
		return nil, err
	}
	store, err := leasefile.Open(opts.StateDir)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Daemon{opts: opts, host: host, store: store, log: logger, ctx: ctx, cancel: cancel, leases: map[string]*held{},
		locks: keyedMutex{locks: map[string]*refMutex{}}, counts: counters{since: time.Now()}}, nil
}

// Resume loads every kept lease and starts its upkeep, beginning with an INIT-REBOOT.
// The leases are in the table before Resume returns, so CHECK and DEL find them at once.
func (d *Daemon) Resume() {
	recs, errs := d.store.Load()
	for _, err := range errs {
		d.log.Printf("skipping a lease file: %v", err)
	}
	for _, r := range recs {
		b, err := kept(r)
		if err != nil {
			d.log.Printf("%s: dropping a kept lease that cannot be read: %v", r.ClientID, err)
			_ = d.store.Remove(r.Key())
			continue
		}
		h := &held{fam: d.newFamily(r), rec: r, bound: b}
		d.mu.Lock()
		d.leases[r.Key()] = h
		d.mu.Unlock()
		d.start(h, true)
		d.log.Printf("%s: resumed lease of %s", h.who(), h.addrText())
	}
}

// Serve answers calls on l until Stop, from root and the daemon's own user only
// (SO_PEERCRED): the socket's mode is the first guard, the peer's uid the second, which
// also holds for a socket systemd made or an operator opened up.
func (d *Daemon) Serve(l net.Listener) error {
	srv := wire.NewServer(d.log.Printf)
	srv.Admit = wire.OwnerOrRoot(uint32(os.Geteuid()))
	wire.Handle(srv, "DHCP.Allocate", logged(d, "ADD", d.Allocate))
	wire.Handle(srv, "DHCP.Release", logged(d, "DEL", d.Release))
	wire.Handle(srv, "DHCP.Check", logged(d, "CHECK", d.Check))
	wire.Handle(srv, "DHCP.GC", logged(d, "GC", d.GC))
	wire.Handle(srv, "DHCP.Status", logged(d, "STATUS", d.Status))
	wire.Handle(srv, "DHCP.Counters", d.Counters)
	stop := context.AfterFunc(d.ctx, func() { l.Close() })
	defer stop()
	return srv.Serve(l)
}

// Stop ends the upkeep of every lease without releasing any (they stay on disk for the
// next start) and closes the state directory. Calling it again does nothing.
func (d *Daemon) Stop() {
	d.stopOnce.Do(func() {
		d.cancel()
		d.wg.Wait()
		if err := d.store.Close(); err != nil {
			d.log.Printf("closing the lease dir: %v", err)
		}
	})
}

// Held reports how many leases the daemon holds.
func (d *Daemon) Held() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.leases)
}

func (d *Daemon) lookup(key string) *held {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.leases[key]
}

func (d *Daemon) forget(h *held) {
	key := h.rec.Key()
	d.mu.Lock()
	if d.leases[key] == h {
		delete(d.leases, key)
	}
	d.mu.Unlock()
	if err := d.store.Remove(key); err != nil {
		d.log.Printf("%s: %v", h.who(), err)
	}
}

// keyedMutex serialises the calls for one client id (an ADD racing its own DEL) without
// holding up the others.
type keyedMutex struct {
	mu    sync.Mutex
	locks map[string]*refMutex
}

type refMutex struct {
	sync.Mutex
	refs int
}

func (k *keyedMutex) lock(key string) func() {
	k.mu.Lock()
	m := k.locks[key]
	if m == nil {
		m = &refMutex{}
		k.locks[key] = m
	}
	m.refs++
	k.mu.Unlock()
	m.Lock()
	return func() {
		m.Unlock()
		k.mu.Lock()
		if m.refs--; m.refs == 0 {
			delete(k.locks, key)
		}
		k.mu.Unlock()
	}
}
