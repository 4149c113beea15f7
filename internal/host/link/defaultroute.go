package link

import (
	"errors"
	"fmt"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// ErrNoDefaultRoute reports a namespace whose main table has no default route.
var ErrNoDefaultRoute = errors.New("no default route")

// DefaultRouteLink returns the link the namespace's default route leaves through: the
// IPv4 default route's, else the IPv6 one's; for a multipath route, its first next hop's.
// macvlan and ipvlan take it as their master when the config names none.
func (n *NS) DefaultRouteLink() (netlink.Link, error) {
	h := n.Handle()
	for _, family := range []int{netlink.FAMILY_V4, netlink.FAMILY_V6} {
		routes, err := h.RouteListFiltered(family, &netlink.Route{Table: unix.RT_TABLE_MAIN}, netlink.RT_FILTER_TABLE)
		if err != nil {
			return nil, fmt.Errorf("netns %s: list routes: %w", n.name(), err)
		}
		for _, r := range routes {
			if idx := defaultRouteIndex(r); idx != 0 {
				l, err := h.LinkByIndex(idx)
				if err != nil {
					return nil, fmt.Errorf("netns %s: default route's link %d: %w", n.name(), idx, err)
				}
				return l, nil
			}
		}
	}
	return nil, fmt.Errorf("netns %s: %w", n.name(), ErrNoDefaultRoute)
}

// defaultRouteIndex returns the outgoing link index of r when r is a default route, else
// 0. The kernel reports a default route without a destination, or as 0.0.0.0/0 (::/0).
func defaultRouteIndex(r netlink.Route) int {
	if r.Dst != nil {
		if ones, _ := r.Dst.Mask.Size(); ones != 0 {
			return 0
		}
	}
	if r.LinkIndex != 0 {
		return r.LinkIndex
	}
	for _, nh := range r.MultiPath {
		if nh.LinkIndex != 0 {
			return nh.LinkIndex
		}
	}
	return 0
}
