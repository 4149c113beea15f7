// Package ptp is the ptp plugin: it connects a container to the host through a veth
// pair and routes, with no bridge. The container gets its addresses with every route
// going through the gateway address, which sits as a /32 (/128) on the host end of the
// veth (the same gateway on every host veth); the host reaches the container through a
// host route. ADD asks IPAM for the addresses first, DEL releases them, deletes the veth
// and the masquerade rules even when the netns is already gone, CHECK verifies all of
// it, GC removes the masquerade of attachments no longer in use and asks IPAM to do the
// same, STATUS asks IPAM.
package ptp

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/cnikit/cni/internal/core/cnierror"
	"github.com/cnikit/cni/internal/core/rollback"
	"github.com/cnikit/cni/internal/core/version"
	"github.com/cnikit/cni/internal/host/link"
	"github.com/cnikit/cni/internal/host/masq"
	"github.com/cnikit/cni/internal/host/sysctl"
	"github.com/cnikit/cni/internal/ipam"
	"github.com/cnikit/cni/internal/plugins/attachment"
	"github.com/cnikit/cni/internal/result"
	"github.com/cnikit/cni/internal/spec/skel"
)

// Plugin returns the ptp plugin's registry entry.
func Plugin() *skel.Plugin {
	return &skel.Plugin{
		Name:     "ptp",
		About:    "connects containers to the host through a routed veth pair",
		Versions: version.All(),
		Add:      add,
		Del:      del,
		Check:    check,
		GC:       gc,
		Status:   status,
		Repair:   repair,
	}
}

// The result's interfaces, in the reference's order; IPs point at the container's.
const (
	ifHost = iota
	ifContainer
)

func add(req *skel.Request) (_ *result.Result, err error) {
	conf, err := load(req)
	if err != nil {
		return nil, err
	}
	masqOpts, err := conf.MasqOptions()
	if err != nil {
		return nil, err
	}
	// IPAM comes first of all ADD makes: nothing to refuse its section before.
	ns, err := attachment.Open(req, false)
	if err != nil {
		return nil, err
	}
	defer ns.Close()

	var undo rollback.Stack
	defer undo.OnError(&err)

	addrs, err := reserve(req, &undo)
	if err != nil {
		return nil, err
	}
	veth, err := ns.AddVeth(link.VethOptions{IfName: req.Args.IfName, MTU: conf.MTU}, "veth", &undo)
	if err != nil {
		return nil, err
	}
	hostEnd, contEnd := attachment.VethEnds(req, veth)
	res := attachment.Report(req, addrs, hostEnd, contEnd)
	// Masquerade needs only the addresses; set up before the interfaces so that a
	// later failure also proves its undo.
	if conf.Masquerading() {
		if err := attachment.Masquerade(req, conf.Name, res.IPs, masqOpts, &undo); err != nil {
			return nil, err
		}
	}
	if err := configureContainer(ns.Cont, req.Args.IfName, res); err != nil {
		return nil, err
	}
	if err := configureHost(ns.Host, veth.Host, res); err != nil {
		return nil, err
	}
	return res, nil
}

// reserve asks IPAM for the addresses, insists on what ptp builds its routes from (a
// gateway of its family for each) and turns on forwarding for their families.
func reserve(req *skel.Request, undo *rollback.Stack) (*result.Result, error) {
	res, err := attachment.AddIPAM(req, undo)
	if err != nil {
		return nil, err
	}
	for _, ip := range res.IPs {
		if !ip.Gateway.IsValid() || ip.Gateway.Is4() != ip.Address.Addr().Is4() {
			return nil, cnierror.Newf(cnierror.CodeInvalidConfig, "ipam: address %s has no gateway of its family; ptp routes through it", ip.Address)
		}
	}
	if err := sysctl.EnableForwarding(hasFamily(res, false), hasFamily(res, true)); err != nil {
		return nil, fmt.Errorf("enable forwarding: %w", err)
	}
	return res, nil
}

// configureContainer puts the addresses and routes on the container interface, then
// replaces each connected subnet route with a link route to the gateway plus the subnet
// route via the gateway: all traffic, even to the subnet, goes through the host.
func configureContainer(cont *link.NS, ifName string, res *result.Result) error {
	// The veth has exactly two ends and the gateway lives on the host's: a duplicate
	// address cannot exist, so DAD would only delay the interface by a second or more.
	if hasFamily(res, true) {
		if err := cont.Do(func() error {
			return sysctl.Ensure(sysctl.Iface("ipv6", ifName, "accept_dad"), "0")
		}); err != nil {
			return fmt.Errorf("container %s: %w", ifName, err)
		}
	}
	if err := link.ConfigureIface(cont, ifName, res); err != nil {
		return err
	}
	l, err := cont.ByName(ifName)
	if err != nil {
		return err
	}
	h := cont.Handle()
	for _, ip := range res.IPs {
		connected := &netlink.Route{LinkIndex: l.Attrs().Index, Dst: link.IPNet(ip.Address.Masked()), Scope: netlink.SCOPE_NOWHERE}
		if err := h.RouteDel(connected); err != nil && !errors.Is(err, unix.ESRCH) {
			return fmt.Errorf("container %s: delete subnet route %s: %w", ifName, ip.Address.Masked(), err)
		}
		for _, r := range ptpRoutes(l.Attrs().Index, ip) {
			if err := h.RouteAdd(r); err != nil && !errors.Is(err, unix.EEXIST) {
				return fmt.Errorf("container %s: add route %s: %w", ifName, r.Dst, err)
			}
		}
	}
	return nil
}

// ptpRoutes are the container's routes for one address: the gateway on the link, and
// the address's subnet through the gateway, both with the address as source.
func ptpRoutes(ifIndex int, ip result.IPConfig) []*netlink.Route {
	src := net.IP(ip.Address.Addr().AsSlice())
	return []*netlink.Route{
		{LinkIndex: ifIndex, Dst: link.IPNet(netip.PrefixFrom(ip.Gateway, ip.Gateway.BitLen())), Scope: netlink.SCOPE_LINK, Src: src},
		{LinkIndex: ifIndex, Dst: link.IPNet(ip.Address.Masked()), Scope: netlink.SCOPE_UNIVERSE,
			Gw: net.IP(ip.Gateway.AsSlice()), Src: src},
	}
}

// configureHost gives the host veth each gateway as a single address and routes each
// container address to it.
func configureHost(host *link.NS, hl netlink.Link, res *result.Result) error {
	h := host.Handle()
	name := hl.Attrs().Name
	for _, ip := range res.IPs {
		gw := netip.PrefixFrom(ip.Gateway, ip.Gateway.BitLen())
		// The same gateway sits on every host veth: DAD would only flag those copies.
		addr := &netlink.Addr{IPNet: link.IPNet(gw), Flags: unix.IFA_F_NODAD}
		if err := h.AddrAdd(hl, addr); err != nil && !errors.Is(err, unix.EEXIST) {
			return fmt.Errorf("host veth %s: add address %s: %w", name, gw, err)
		}
		dst := netip.PrefixFrom(ip.Address.Addr(), ip.Address.Addr().BitLen())
		r := &netlink.Route{LinkIndex: hl.Attrs().Index, Dst: link.IPNet(dst), Scope: netlink.SCOPE_LINK}
		if err := h.RouteAdd(r); err != nil {
			return fmt.Errorf("host veth %s: add route to %s: %w", name, dst, err)
		}
	}
	return nil
}

// del undoes what ADD did. It reads no more of the config than the masquerade keys
// (see loadForDel), so a config ADD refused, or one changed since, does not keep the
// runtime's DEL of the chain from finishing. Without an IPAM type ADD refused the
// config: nothing to release.
func del(req *skel.Request) error {
	conf := loadForDel(req)
	errs := attachment.DelVeth(req, routesToPrevAddresses)
	// Found by network and container, not by the addresses in the netns: the rules go
	// even when the netns is already gone.
	errs = append(errs, conf.Unmasquerade(req.Context(), req.Net.Name, req.Args.ContainerID, req.Args.IfName))
	return errors.Join(errs...)
}

// routesToPrevAddresses reports whether host veth l holds the host route ADD gave it to
// one of prev's container addresses: the proof that a veth named in the cached result is
// the attachment's host end, for a DEL whose netns path is gone while the namespace
// lingers (link.DeleteVeth).
func routesToPrevAddresses(host *link.NS, l netlink.Link, prev *result.Result) bool {
	h := host.Handle()
	routes, err := h.RouteList(l, netlink.FAMILY_ALL)
	return err == nil && slices.ContainsFunc(routes, func(r netlink.Route) bool {
		dst, ok := link.Prefix(r.Dst)
		return ok && dst.IsSingleIP() &&
			slices.ContainsFunc(prev.IPs, func(ip result.IPConfig) bool { return ip.Address.Addr() == dst.Addr() })
	})
}

// gc needs nothing from the config beyond the network's name and IPAM type.
func gc(req *skel.Request) error {
	return errors.Join(masq.GC(req.Context(), req.Net.Name, req.Valid()), attachment.GC(req))
}

func status(req *skel.Request) error {
	if _, err := load(req); err != nil {
		return err
	}
	return ipam.Status(req)
}

func hasFamily(res *result.Result, v6 bool) bool {
	return slices.ContainsFunc(res.IPs, func(ip result.IPConfig) bool { return ip.Address.Addr().Is6() == v6 })
}
