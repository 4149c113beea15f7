package link

import (
	"fmt"
	"net/netip"
	"slices"

	"github.com/vishvananda/netlink"

	"github.com/cnikit/cni/internal/host/nlconn"
	"github.com/cnikit/cni/internal/result"
)

// VerifyIface is ConfigureIface's CHECK: every address res gives ifName is on the
// interface inside cont, and every route of res exists in the namespace with the
// expected next hop (same-family default gateway filled in as ConfigureIface does).
func VerifyIface(cont *NS, ifName string, res *result.Result) error {
	ips, l, err := cont.iface(ifName, res)
	if err != nil {
		return err
	}
	h := cont.Handle()
	if err := verifyAddrs(h, l, ips); err != nil {
		return err
	}
	gw4, gw6 := gateways(ips)
	for _, r := range res.Routes {
		if err := verifyRoute(h, Route(l.Attrs().Index, r, gw4, gw6)); err != nil {
			return err
		}
	}
	return nil
}

func verifyAddrs(h *nlconn.Handle, l netlink.Link, ips []result.IPConfig) error {
	addrs, err := h.AddrList(l, netlink.FAMILY_ALL)
	if err != nil {
		return fmt.Errorf("%s: list addresses: %w", l.Attrs().Name, err)
	}
	have := make([]netip.Prefix, 0, len(addrs))
	for _, a := range addrs {
		if p, ok := Prefix(a.IPNet); ok {
			have = append(have, p)
		}
	}
	for _, ip := range ips {
		if !slices.Contains(have, ip.Address) {
			return fmt.Errorf("%s: address %s not found", l.Attrs().Name, ip.Address)
		}
	}
	return nil
}

func verifyRoute(h *nlconn.Handle, want *netlink.Route) error {
	family := netlink.FAMILY_V4
	if want.Dst.IP.To4() == nil {
		family = netlink.FAMILY_V6
	}
	filter, mask := &netlink.Route{Table: want.Table}, netlink.RT_FILTER_TABLE
	if want.Table == 0 {
		filter.Table = 254 // main
	}
	routes, err := h.RouteListFiltered(family, filter, mask)
	if err != nil {
		return fmt.Errorf("list routes: %w", err)
	}
	if slices.ContainsFunc(routes, func(r netlink.Route) bool { return routeMatches(r, want) }) {
		return nil
	}
	return fmt.Errorf("route %s via %v dev index %d not found", want.Dst, want.Gw, want.LinkIndex)
}

func routeMatches(have netlink.Route, want *netlink.Route) bool {
	if have.Dst == nil || have.Dst.String() != want.Dst.String() {
		return false
	}
	if len(have.MultiPath) == 0 {
		return have.LinkIndex == want.LinkIndex && have.Gw.Equal(want.Gw)
	}
	return slices.ContainsFunc(have.MultiPath, func(nh *netlink.NexthopInfo) bool {
		return nh.LinkIndex == want.LinkIndex && nh.Gw.Equal(want.Gw)
	})
}
