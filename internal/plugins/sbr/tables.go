package sbr

import (
	"fmt"
	"net"
	"net/netip"
	"syscall"

	"github.com/vishvananda/netlink"

	"github.com/cnikit/cni/internal/host/link"
	"github.com/cnikit/cni/internal/host/nlconn"
)

// firstTable is where the search for a free table starts, as in the reference.
const firstTable = 100

// errNoSuchRoute is the kernel's answer to deleting a route that is already gone.
const errNoSuchRoute = syscall.ESRCH

// tableRoutes lists l's routes of family in table.
func tableRoutes(h *nlconn.Handle, l netlink.Link, table, family int) ([]netlink.Route, error) {
	filter := &netlink.Route{Table: table, LinkIndex: l.Attrs().Index}
	routes, err := h.RouteListFiltered(family, filter, netlink.RT_FILTER_TABLE|netlink.RT_FILTER_OIF)
	if err != nil {
		return nil, fmt.Errorf("list routes of table %d: %w", table, err)
	}
	return routes, nil
}

func familyOf(a netip.Addr) int {
	if a.Is4() {
		return netlink.FAMILY_V4
	}
	return netlink.FAMILY_V6
}

// family is a route's address family, read from whichever address it carries.
func family(r netlink.Route) int {
	dst, _ := link.Prefix(r.Dst)
	for _, a := range []netip.Addr{dst.Addr(), addrOf(r.Gw), addrOf(r.Src)} {
		if a.IsValid() {
			return familyOf(a)
		}
	}
	return r.Family
}

// addrOf converts a netlink address; nil gives the zero Addr.
func addrOf(ip net.IP) netip.Addr {
	a, ok := netip.AddrFromSlice(ip)
	if !ok {
		return netip.Addr{}
	}
	return a.Unmap()
}

// zero is the unspecified address of a's family.
func zero(a netip.Addr) netip.Addr {
	if a.Is4() {
		return netip.IPv4Unspecified()
	}
	return netip.IPv6Unspecified()
}

func describe(r netlink.Route) string {
	dst := "default"
	if r.Dst != nil {
		dst = r.Dst.String()
	}
	if r.Gw != nil {
		return dst + " via " + r.Gw.String()
	}
	return dst
}
