package ptp

import (
	"fmt"
	"net"
	"net/netip"
	"slices"

	"github.com/vishvananda/netlink"

	"github.com/cnikit/cni/internal/host/link"
	"github.com/cnikit/cni/internal/host/nlconn"
	"github.com/cnikit/cni/internal/ipam"
	"github.com/cnikit/cni/internal/plugins/attachment"
	"github.com/cnikit/cni/internal/result"
	"github.com/cnikit/cni/internal/spec/skel"
)

// check verifies what ADD built against the prevResult: the IPAM reservation, the veth
// and its host peer, the container's addresses and routes (the ptp pair per address
// included), the host side, and the masquerade.
func check(req *skel.Request) error {
	conf, err := attachment.LoadPrev(req, "CHECK", load)
	if err != nil {
		return err
	}
	prev := req.PrevResult
	masqOpts, err := conf.MasqOptions()
	if err != nil {
		return err
	}
	if err := ipam.Check(req); err != nil {
		return err
	}
	ns, err := attachment.Open(req, false)
	if err != nil {
		return err
	}
	defer ns.Close()

	ifName := req.Args.IfName
	hl, err := link.HostPeer(ns.Host, ns.Cont, ifName)
	if err != nil {
		return err
	}
	if len(prev.Interfaces) > ifHost && prev.Interfaces[ifHost].Name != hl.Attrs().Name {
		return fmt.Errorf("host veth: prevResult names %q, the peer of %s is %q",
			prev.Interfaces[ifHost].Name, ifName, hl.Attrs().Name)
	}
	if err := link.VerifyIface(ns.Cont, ifName, prev); err != nil {
		return err
	}
	ips, err := link.IfaceIPs(prev, ifName)
	if err != nil {
		return err
	}
	if err := verifyPtpRoutes(ns.Cont, ifName, ips); err != nil {
		return err
	}
	if err := verifyHost(ns.Host, hl, ips); err != nil {
		return err
	}
	if conf.Masquerading() {
		return attachment.CheckMasquerade(req, conf.Name, ips, masqOpts)
	}
	return nil
}

func verifyPtpRoutes(cont *link.NS, ifName string, ips []result.IPConfig) error {
	l, err := cont.ByName(ifName)
	if err != nil {
		return err
	}
	h := cont.Handle()
	for _, ip := range ips {
		if !ip.Gateway.IsValid() {
			continue
		}
		for _, want := range ptpRoutes(l.Attrs().Index, ip) {
			if !hasRoute(h, want) {
				return fmt.Errorf("container %s: route to %s (via %s) missing", ifName, want.Dst, want.Gw)
			}
		}
	}
	return nil
}

func hasRoute(h *nlconn.Handle, want *netlink.Route) bool {
	family := netlink.FAMILY_V4
	if want.Dst.IP.To4() == nil {
		family = netlink.FAMILY_V6
	}
	routes, err := h.RouteListFiltered(family, &netlink.Route{Dst: want.Dst, LinkIndex: want.LinkIndex},
		netlink.RT_FILTER_DST|netlink.RT_FILTER_OIF)
	if err != nil {
		return false
	}
	return slices.ContainsFunc(routes, func(r netlink.Route) bool { return r.Gw.Equal(want.Gw) || r.Gw == nil && want.Gw == nil })
}

// verifyHost checks the gateway addresses and the host routes on the host veth.
func verifyHost(host *link.NS, hl netlink.Link, ips []result.IPConfig) error {
	h := host.Handle()
	addrs, err := h.AddrList(hl, netlink.FAMILY_ALL)
	if err != nil {
		return fmt.Errorf("host veth %s: list addresses: %w", hl.Attrs().Name, err)
	}
	for _, ip := range ips {
		found := slices.ContainsFunc(addrs, func(a netlink.Addr) bool { return a.IP.Equal(net.IP(ip.Gateway.AsSlice())) })
		if ip.Gateway.IsValid() && !found {
			return fmt.Errorf("host veth %s: gateway address %s missing", hl.Attrs().Name, ip.Gateway)
		}
		dst := link.IPNet(netip.PrefixFrom(ip.Address.Addr(), ip.Address.Addr().BitLen()))
		if !hasRoute(h, &netlink.Route{LinkIndex: hl.Attrs().Index, Dst: dst}) {
			return fmt.Errorf("host veth %s: route to %s missing", hl.Attrs().Name, dst)
		}
	}
	return nil
}
