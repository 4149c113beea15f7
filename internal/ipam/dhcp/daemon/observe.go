package daemon

import (
	"encoding/json"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	"github.com/cnikit/cni/internal/core/steps"
	"github.com/cnikit/cni/internal/core/tracectx"
	"github.com/cnikit/cni/internal/ipam/dhcp/leasefile"
	"github.com/cnikit/cni/internal/ipam/dhcp/wire"
	"github.com/cnikit/cni/internal/obs/invlog"
	"github.com/cnikit/cni/internal/result"
)

// logPlugin is the daemon's name in the invocation log, beside the dhcp plugin's.
const logPlugin = "dhcp-daemon"

// counters are what `dhcp status` reports (see wire.Counters).
type counters struct {
	since                                     time.Time
	allocations, allocationFailures, releases atomic.Int64
	renewals, renewalFailures, expirations    atomic.Int64
}

// Counters (ours) answers `dhcp status`: the leases held and what the daemon did since
// it started.
func (d *Daemon) Counters(*wire.Empty) (*wire.Counters, error) {
	c := &d.counts
	return &wire.Counters{
		Since: c.since, Held: int64(d.Held()),
		Allocations: c.allocations.Load(), AllocationFailures: c.allocationFailures.Load(), Releases: c.releases.Load(),
		Renewals: c.renewals.Load(), RenewalFailures: c.renewalFailures.Load(), Expirations: c.expirations.Load(),
	}, nil
}

// logged wraps a method so that each call writes an invocation log line, in the format
// the plugins write (plugin "dhcp-daemon", the CNI command the method serves), when the
// daemon has a log.
func logged[R any](d *Daemon, command string, fn func(*wire.CmdArgs) (*R, error)) func(*wire.CmdArgs) (*R, error) {
	if !d.opts.Log.On() {
		return fn
	}
	return func(args *wire.CmdArgs) (*R, error) {
		start := time.Now()
		reply, err := fn(args)
		var head struct {
			Name       string `json:"name"`
			CNIVersion string `json:"cniVersion"`
		}
		_ = json.Unmarshal(args.StdinData, &head) // a config that is no JSON was refused by fn
		inv := invlog.Invocation{
			Plugin: logPlugin, Command: command, Network: head.Name, CNIVersion: head.CNIVersion,
			ContainerID: args.ContainerID, Netns: args.Netns, IfName: args.IfName, CNIArgs: args.Args,
			Steps: steps.New(start, tracectx.Span{}), Err: err,
		}
		if r, ok := any(reply).(*wire.Result); ok && r != nil && err == nil {
			inv.Result = r.ToResult()
		}
		d.writeLog(inv)
		return reply, err
	}
}

// renewed counts a renewal or rebind attempt and logs it (command RENEW or REBIND).
func (d *Daemon) renewed(h *held, phase string, start time.Time, err error) {
	if err == nil {
		d.counts.renewals.Add(1)
	} else {
		d.counts.renewalFailures.Add(1)
	}
	d.event(h, strings.ToUpper(phase), start, err)
}

// expired counts a lease that ran out and logs it (command EXPIRE).
func (d *Daemon) expired(h *held) {
	d.counts.expirations.Add(1)
	d.event(h, "EXPIRE", time.Now(), nil)
}

// event logs a lease event of h that began at start. The two leases of a dual-stack
// attachment share its line's keys, so the line names the lease's address as its result
// and, failed, says DHCPv6 in the error of that family's lease (as the daemon's own log
// names it).
func (d *Daemon) event(h *held, command string, start time.Time, err error) {
	if !d.opts.Log.On() {
		return
	}
	r := h.rec
	if err != nil && r.Family == leasefile.DHCPv6 {
		err = fmt.Errorf("DHCPv6: %w", err)
	}
	d.writeLog(invlog.Invocation{
		Plugin: logPlugin, Command: command, Network: r.Network, ContainerID: r.ContainerID, Netns: r.Netns,
		IfName: r.IfName, Steps: steps.New(start, tracectx.Span{}), Result: leaseIPs(h), Err: err,
	})
}

// leaseIPs is the address of h's lease as a result; nil for a lease with no binding.
func leaseIPs(h *held) *result.Result {
	b, _ := h.snapshot()
	if b == nil {
		return nil
	}
	r, err := b.Result(h.rec.Priority)
	if err != nil {
		return nil
	}
	return &result.Result{IPs: r.IPs}
}

// writeLog writes a line; a failure to log is only reported.
func (d *Daemon) writeLog(inv invlog.Invocation) {
	if err := d.opts.Log.Write(inv); err != nil {
		d.log.Printf("%v", err)
	}
}
