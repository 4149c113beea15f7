package link

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"

	"github.com/vishvananda/netlink"

	"github.com/cnikit/cni/internal/core/background"
	"github.com/cnikit/cni/internal/core/ifname"
	"github.com/cnikit/cni/internal/core/steps"
	"github.com/cnikit/cni/internal/result"
)

// HostEndTest is a plugin's own proof that host link l (a veth whose peer is in another
// namespace, with the MAC prev reports) is the host end of the attachment prev
// describes: a port of prev's bridge, the link holding the routes to prev's addresses.
type HostEndTest func(host *NS, l netlink.Link, prev *result.Result) bool

// DeleteVeth is DEL's removal of the veth pair whose container end is ifName in the
// namespace at netns, in the background of the process as DeleteInBackground.
//
// While the path opens, the pair goes from the container's side. A path that is gone
// (or none given) may leave the namespace alive, held by some process, and with it the
// pair, its host end, that end's qdiscs and routes. The host end is then deleted from
// the host's side: found among the host interfaces of prev (the result the runtime
// cached; without one nothing can be found), and only when it proves to be the pair's
// end: a veth whose peer is in another namespace, with the MAC prev reports, that ours
// accepts. A link of the same name that is anything else stays.
func DeleteVeth(ctx context.Context, netns, ifName string, prev *result.Result, ours HostEndTest) error {
	cont, err := OpenIfPresent(netns)
	if err != nil {
		return err
	}
	if cont != nil {
		step := steps.Begin(ctx, steps.LinkDelete)
		return background.Start(ctx, func() error {
			defer cont.Close()
			return step.Done(cont.Delete(ifName))
		})
	}
	ends := hostEnds(prev, ifName)
	if len(ends) == 0 {
		return nil
	}
	// Opened here, on the caller's thread: the background work may run on a thread
	// of another namespace (a test's, an in-process caller's).
	host, err := Current()
	if err != nil {
		return err
	}
	step := steps.Begin(ctx, steps.LinkDelete)
	return background.Start(ctx, func() error {
		defer host.Close()
		return step.Done(host.deleteHostEnds(ends, prev, ours))
	})
}

// hostEnds returns prev's host interfaces (those without a sandbox), when prev is the
// result of the attachment of ifName: it lists ifName in a sandbox.
func hostEnds(prev *result.Result, ifName string) []result.Interface {
	if prev == nil {
		return nil
	}
	var ends []result.Interface
	attached := false
	for _, i := range prev.Interfaces {
		switch {
		case i.Sandbox == "":
			ends = append(ends, i)
		case i.Name == ifName:
			attached = true
		}
	}
	if !attached {
		return nil
	}
	return ends
}

func (n *NS) deleteHostEnds(ends []result.Interface, prev *result.Result, ours HostEndTest) error {
	var errs []error
	for _, e := range ends {
		if ifname.Check(e.Name) != nil {
			continue
		}
		l, err := n.ByName(e.Name)
		if IsNotFound(err) {
			continue // gone with its namespace, or never there
		}
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if !isPairEnd(l, e.Mac) || !ours(n, l, prev) {
			continue
		}
		if err := n.h.LinkDel(l); err != nil && !IsNotFound(err) {
			errs = append(errs, fmt.Errorf("host veth %q: delete: %w", e.Name, err))
		}
	}
	return errors.Join(errs...)
}

// isPairEnd reports whether l is a veth whose peer lives in another namespace (the
// kernel names that namespace's id only then) and, when mac is given, has that MAC.
func isPairEnd(l netlink.Link, mac string) bool {
	if _, ok := l.(*netlink.Veth); !ok || l.Attrs().NetNsID < 0 {
		return false
	}
	if mac == "" {
		return true
	}
	hw, err := net.ParseMAC(mac)
	return err == nil && bytes.Equal(hw, l.Attrs().HardwareAddr)
}
