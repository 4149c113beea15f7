package cli

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/cnikit/cni/internal/host/netfilter"
	"github.com/cnikit/cni/internal/host/nfwatch"
	"github.com/cnikit/cni/internal/plugins/firewall"
)

// busWait bounds the wait of the first pass for the firewalld subscription.
const busWait = 2 * time.Second

// busRetry is how long the watcher waits before dialling a system bus again that was
// not there (a node without firewalld's bus, or a bus restarted).
const busRetry = 30 * time.Second

// watchRepair is `cni repair --watch`: a pass at once, then one after every host
// firewall reload, until SIGTERM or SIGINT. A reload is what deletes nftables state
// (nfwatch: `nft flush ruleset`, `systemctl restart nftables`, iptables-nft's flushes)
// or firewalld's Reloaded signal on the system bus; a burst of them is one pass, run
// once --quiet has gone by without another. Legacy iptables raises no event: where its
// tables exist, a pass runs every --poll. A pass finds what is missing through each
// attachment's own objects (no table listing), so an event that removed nothing of ours
// costs a few lookups per attachment and changes nothing. It exits 0 when stopped;
// failed passes are reported on stdout and tried again at the next event.
func watchRepair(p Process, c *common, rf *repairFlags, networks []string) int {
	ctx, stop := p.untilStopped()
	defer stop()
	events := make(chan struct{}, 1)
	// Subscribed before the first pass, so that a reload during it is not missed.
	w, err := nfwatch.Open()
	if err != nil {
		fmt.Fprintf(p.Stderr, "cni repair: not watching nftables, repairing every --poll instead: %v\n", err)
	} else {
		defer w.Close()
		go func() {
			if err := w.Removals(ctx, events); err != nil {
				fmt.Fprintf(p.Stderr, "cni repair: %v\n", err)
			}
		}()
	}
	// The first pass waits for the bus subscription too, for as long as a healthy bus
	// takes: a bus that is not there fails at once, a wedged one is not waited out.
	subscribed := make(chan struct{})
	go watchFirewalld(ctx, p, rf.systemBus, events, sync.OnceFunc(func() { close(subscribed) }))
	select {
	case <-subscribed:
	case <-time.After(busWait):
	}
	var tick <-chan time.Time
	if rf.poll > 0 {
		t := time.NewTicker(rf.poll)
		defer t.Stop()
		tick = t.C
	}
	pass := func(why string) {
		fmt.Fprintf(p.Stdout, "cni repair: pass (%s)\n", why)
		if _, err := repairPass(c.traced(ctx, p, "repair"), p, c, networks); err != nil {
			fmt.Fprintf(p.Stdout, "failed: %v\n", err)
		}
	}
	pass("start")
	for {
		select {
		case <-ctx.Done():
			return ExitOK
		case <-events:
			if !settle(ctx, events, rf.quiet) {
				return ExitOK
			}
			pass("host firewall changed")
		case <-tick:
			// Only legacy tables change unseen; without them, and with nftables
			// watched, a poll would find nothing the events did not report.
			if w == nil || netfilter.LegacyTablesInUse() {
				pass("poll")
			}
		}
	}
}

// settle waits until quiet has passed without a new event; false when ctx ended.
func settle(ctx context.Context, events <-chan struct{}, quiet time.Duration) bool {
	t := time.NewTimer(quiet)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return false
		case <-events:
			t.Reset(quiet)
		case <-t.C:
			return true
		}
	}
}

// watchFirewalld forwards firewalld's Reloaded signals to events for as long as ctx
// lasts, dialling the bus again every busRetry while it is not there; it says once that
// it is not there. done is called once the first attempt subscribed or failed.
func watchFirewalld(ctx context.Context, p Process, bus string, events chan<- struct{}, done func()) {
	said := false
	for ctx.Err() == nil {
		err := firewall.WatchReloads(ctx, bus, events, done)
		done()
		if err != nil && !said {
			fmt.Fprintf(p.Stderr, "cni repair: not watching firewalld reloads for now (dialling again every %v): %v\n", busRetry, err)
			said = true
		}
		select {
		case <-ctx.Done():
		case <-time.After(busRetry):
		}
	}
}
