// Package loopback is the loopback plugin: it brings up "lo" inside the container's
// network namespace. CNI_IFNAME is ignored; there is only one loopback device.
package loopback

import (
	"errors"
	"fmt"
	"net"
	"slices"

	"github.com/vishvananda/netlink"

	"github.com/cnikit/cni/internal/core/cnierror"
	"github.com/cnikit/cni/internal/core/steps"
	"github.com/cnikit/cni/internal/core/version"
	"github.com/cnikit/cni/internal/host/link"
	"github.com/cnikit/cni/internal/host/nlconn"
	"github.com/cnikit/cni/internal/host/ns"
	"github.com/cnikit/cni/internal/result"
	"github.com/cnikit/cni/internal/spec/skel"
)

// Plugin returns the loopback plugin's registry entry.
func Plugin() *skel.Plugin {
	return &skel.Plugin{
		Name:     "loopback",
		About:    "brings up the loopback interface in the container",
		Versions: version.All(),
		Add:      add,
		Del:      del,
		Check:    check,
	}
}

// inContainer runs fn with a netlink handle bound to the container's namespace: one
// socket serves every request of the command, and no thread enters the namespace.
func inContainer(path string, fn func(h *nlconn.Handle, lo netlink.Link) error) error {
	n, err := link.Open(path)
	if err != nil {
		return err
	}
	defer n.Close()
	lo, err := n.Handle().LinkByName("lo")
	if err != nil {
		return fmt.Errorf("find lo: %w", err)
	}
	return fn(n.Handle(), lo)
}

// add sets lo up and reports it with its addresses, or, when chained, passes the
// previous result through unchanged. A non-loopback address on lo is refused before lo
// is touched, so a refused ADD leaves lo as it was (the reference sets lo up first and
// leaves it up).
func add(req *skel.Request) (*result.Result, error) {
	skel.WarnUnknownKeys[struct{}](req) // no keys of its own: any beyond the spec's is unknown
	var addrs []netlink.Addr
	err := inContainer(req.Args.Netns, func(h *nlconn.Handle, lo netlink.Link) error {
		var err error
		if addrs, err = addrsOf(h, lo); err != nil {
			return err
		}
		if i := slices.IndexFunc(addrs, func(a netlink.Addr) bool { return !a.IP.IsLoopback() }); i >= 0 {
			return cnierror.Newf(cnierror.CodeInvalidConfig, "loopback interface has a non-loopback address %s", addrs[i].IPNet)
		}
		if lo.Attrs().Flags&net.FlagUp != 0 {
			return nil
		}
		if err := steps.Begin(req.Context(), steps.LinkUp).Done(h.LinkSetUp(lo)); err != nil {
			return fmt.Errorf("set lo up: %w", err)
		}
		// Setting lo up is what gives it 127.0.0.1 and ::1.
		addrs, err = addrsOf(h, lo)
		return err
	})
	if err != nil {
		return nil, netnsError(req.Args.Netns, err)
	}
	if req.PrevResult != nil {
		return req.PrevResult, nil
	}
	res := &result.Result{CNIVersion: req.Net.CNIVersion}
	idx := res.AddInterface(result.Interface{Name: "lo", Mac: "00:00:00:00:00:00", Sandbox: req.Args.Netns})
	for _, a := range addrs {
		if p, ok := link.Prefix(a.IPNet); ok {
			res.IPs = append(res.IPs, result.IPConfig{Interface: new(idx), Address: p})
		}
	}
	return res, nil
}

// addrsOf lists lo's addresses of both families.
func addrsOf(h *nlconn.Handle, lo netlink.Link) ([]netlink.Addr, error) {
	addrs, err := h.AddrList(lo, netlink.FAMILY_ALL)
	if err != nil {
		return nil, fmt.Errorf("list lo addresses: %w", err)
	}
	return addrs, nil
}

// del sets lo down; a namespace that is already gone has nothing left to undo.
func del(req *skel.Request) error {
	if req.Args.Netns == "" {
		return nil
	}
	err := inContainer(req.Args.Netns, func(h *nlconn.Handle, lo netlink.Link) error {
		return h.LinkSetDown(lo)
	})
	if errors.Is(err, ns.ErrNotExist) {
		return nil
	}
	return err
}

// check verifies that lo is up.
func check(req *skel.Request) error {
	return netnsError(req.Args.Netns, inContainer(req.Args.Netns, func(_ *nlconn.Handle, lo netlink.Link) error {
		if lo.Attrs().Flags&net.FlagUp == 0 {
			return fmt.Errorf("loopback interface is down")
		}
		return nil
	}))
}

func netnsError(path string, err error) error {
	if errors.Is(err, ns.ErrNotExist) {
		return link.MissingContainer(path)
	}
	return err
}
