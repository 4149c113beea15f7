package link

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"syscall"
	"time"

	"github.com/vishvananda/netlink"

	"github.com/cnikit/cni/internal/core/steps"
	"github.com/cnikit/cni/internal/host/nlconn"
	"github.com/cnikit/cni/internal/host/sysctl"
	"github.com/cnikit/cni/internal/result"
)

// DAD settling is polled, not slept: addresses are usually ready at the first look
// (accept_dad=0), and an enabled DAD takes about a second; the cap is the reference's.
const (
	dadPoll = 20 * time.Millisecond
	dadCap  = 5 * time.Second
)

// IfaceIPs returns the entries of res.IPs that belong to the interface called ifName:
// those whose Interface index names it. An index outside Interfaces is an error.
func IfaceIPs(res *result.Result, ifName string) ([]result.IPConfig, error) {
	var out []result.IPConfig
	for _, ip := range res.IPs {
		if ip.Interface == nil {
			continue
		}
		i := *ip.Interface
		if i < 0 || i >= len(res.Interfaces) {
			return nil, fmt.Errorf("ip %s: interface index %d out of range", ip.Address, i)
		}
		if res.Interfaces[i].Name == ifName {
			out = append(out, ip)
		}
	}
	return out, nil
}

// iface is what ConfigureIface and VerifyIface work on: res's IPs for ifName and the
// link.
func (n *NS) iface(ifName string, res *result.Result) ([]result.IPConfig, netlink.Link, error) {
	ips, err := IfaceIPs(res, ifName)
	if err != nil {
		return nil, nil, err
	}
	l, err := n.ByName(ifName)
	return ips, l, err
}

// ConfigureIface puts res's addresses for ifName on that interface inside cont, sets it
// up, waits for IPv6 duplicate address detection when an IPv6 gateway will be used,
// and adds res's routes through it. A route without a gateway goes via the gateway of
// the same family among the interface's IPs, if there is one.
//
// Its steps for the invocation log are the addresses (with setting the link up), the
// wait for DAD, and the routes.
func ConfigureIface(cont *NS, ifName string, res *result.Result) error {
	ips, l, err := cont.iface(ifName, res)
	if err != nil {
		return err
	}
	return configure(cont, l, ips, res)
}

// ConfigureLink is ConfigureIface for a link the caller holds, as made or looked up in
// cont (a veth's container end from CreateVeth): one lookup fewer. Only its index and
// name are read.
func ConfigureLink(cont *NS, l netlink.Link, res *result.Result) error {
	ips, err := IfaceIPs(res, l.Attrs().Name)
	if err != nil {
		return err
	}
	return configure(cont, l, ips, res)
}

// configure is ConfigureIface's work on the link l with its ips.
func configure(cont *NS, l netlink.Link, ips []result.IPConfig, res *result.Result) error {
	h := cont.Handle()
	step := cont.steps.Begin(steps.Addresses)
	if err := step.Done(addAddrs(cont, l, ips)); err != nil {
		return err
	}
	gw4, gw6 := gateways(ips)
	if gw6.IsValid() || routesNeedV6(res.Routes) && hasV6(ips) {
		step := cont.steps.Begin(steps.WaitDAD)
		if err := step.Done(WaitDAD(h, l)); err != nil {
			return err
		}
	}
	if len(res.Routes) == 0 {
		return nil
	}
	step = cont.steps.Begin(steps.Routes)
	for _, r := range res.Routes {
		if err := addRoute(h, l, r, gw4, gw6); err != nil {
			return step.Done(fmt.Errorf("%s: %w", l.Attrs().Name, err))
		}
	}
	return step.Done(nil)
}

// addAddrs puts ips on l (enabling IPv6 first when one is IPv6) and sets l up.
func addAddrs(cont *NS, l netlink.Link, ips []result.IPConfig) error {
	ifName := l.Attrs().Name
	if hasV6(ips) {
		if err := cont.Do(func() error { return enableIPv6(ifName) }); err != nil {
			return err
		}
	}
	for _, ip := range ips {
		if err := cont.h.AddrAdd(l, &netlink.Addr{IPNet: IPNet(ip.Address)}); err != nil {
			return fmt.Errorf("%s: add address %s: %w", ifName, ip.Address, err)
		}
	}
	if err := cont.h.LinkSetUp(l); err != nil {
		return fmt.Errorf("%s: set up: %w", ifName, err)
	}
	return nil
}

// enableIPv6 runs inside the container: an interface may start with IPv6 disabled, and
// without keep_addr_on_down the kernel drops IPv6 addresses whenever the link goes down.
func enableIPv6(ifName string) error {
	if err := sysctl.Ensure(sysctl.Iface("ipv6", ifName, "disable_ipv6"), "0"); err != nil {
		return err
	}
	return sysctl.Ensure(sysctl.Iface("ipv6", ifName, "keep_addr_on_down"), "1")
}

// WaitDAD polls l's IPv6 addresses until none is tentative, failing on a duplicate (in
// the reference's words) or when they are still tentative after a cap on a link that is
// operationally up. A link without carrier (a macvlan or host device on an unplugged
// NIC) runs no DAD until it gets one, so its addresses stay tentative: that is no
// failure, as in the reference since v1.9.0 (its #1207).
func WaitDAD(h *nlconn.Handle, l netlink.Link) error {
	name := l.Attrs().Name
	deadline := time.Now().Add(dadCap)
	for {
		addrs, err := h.AddrList(l, netlink.FAMILY_V6)
		if err != nil {
			return fmt.Errorf("%s: list addresses: %w", name, err)
		}
		tentative := false
		for _, a := range addrs {
			if a.Flags&syscall.IFA_F_DADFAILED != 0 {
				return fmt.Errorf("link %s has address %s in DADFAILED state", name, a.IP)
			}
			if a.Flags&syscall.IFA_F_TENTATIVE != 0 {
				tentative = true
			}
		}
		if !tentative {
			return nil
		}
		if time.Now().After(deadline) {
			now, err := h.LinkByIndex(l.Attrs().Index)
			if err != nil {
				return fmt.Errorf("%s: %w", name, err)
			}
			if now.Attrs().OperState != netlink.OperUp {
				return nil
			}
			return fmt.Errorf("%s: IPv6 addresses still tentative after %s", name, dadCap)
		}
		time.Sleep(dadPoll)
	}
}

// addRoute adds r through l. A route to a destination that already exists gets the new
// next hop appended (for IPv6 the kernel merges it into a multipath route).
func addRoute(h *nlconn.Handle, l netlink.Link, r result.Route, gw4, gw6 netip.Addr) error {
	nr := Route(l.Attrs().Index, r, gw4, gw6)
	err := h.RouteAdd(nr)
	if errors.Is(err, syscall.EEXIST) && nr.Gw != nil {
		err = h.RouteAppend(nr)
	}
	if err != nil {
		return fmt.Errorf("add route %s via %s: %w", r.Dst, nr.Gw, err)
	}
	return nil
}

// Route translates a result route into a netlink route through the link with index
// ifIndex, filling in the same-family default gateway when the route names none.
func Route(ifIndex int, r result.Route, gw4, gw6 netip.Addr) *netlink.Route {
	gw := r.GW
	if !gw.IsValid() {
		if r.Dst.Addr().Is4() {
			gw = gw4
		} else {
			gw = gw6
		}
	}
	nr := &netlink.Route{LinkIndex: ifIndex, Dst: IPNet(r.Dst.Masked()), Priority: r.Priority,
		MTU: r.MTU, AdvMSS: r.AdvMSS}
	if gw.IsValid() {
		nr.Gw = net.IP(gw.AsSlice())
	}
	if r.Table != nil {
		nr.Table = *r.Table
	}
	if r.Scope != nil {
		nr.Scope = netlink.Scope(*r.Scope)
	} else if !gw.IsValid() {
		nr.Scope = netlink.SCOPE_LINK
	}
	return nr
}

// gateways returns the first gateway of each family among ips.
func gateways(ips []result.IPConfig) (gw4, gw6 netip.Addr) {
	for _, ip := range ips {
		switch {
		case !ip.Gateway.IsValid():
		case ip.Gateway.Is4() && !gw4.IsValid():
			gw4 = ip.Gateway
		case ip.Gateway.Is6() && !gw6.IsValid():
			gw6 = ip.Gateway
		}
	}
	return gw4, gw6
}

func hasV6(ips []result.IPConfig) bool {
	return slices.ContainsFunc(ips, func(ip result.IPConfig) bool { return ip.Address.Addr().Is6() })
}

func routesNeedV6(routes []result.Route) bool {
	return slices.ContainsFunc(routes, func(r result.Route) bool { return r.Dst.Addr().Is6() && r.GW.IsValid() })
}

// IPNet converts a prefix to the net.IPNet netlink wants, keeping host bits.
func IPNet(p netip.Prefix) *net.IPNet {
	a := p.Addr().Unmap()
	bits := 32
	if a.Is6() {
		bits = 128
	}
	return &net.IPNet{IP: net.IP(a.AsSlice()), Mask: net.CIDRMask(p.Bits(), bits)}
}

// Prefix converts a netlink address back to a netip prefix with host bits.
func Prefix(n *net.IPNet) (netip.Prefix, bool) {
	if n == nil {
		return netip.Prefix{}, false
	}
	a, ok := netip.AddrFromSlice(n.IP)
	if !ok {
		return netip.Prefix{}, false
	}
	ones, _ := n.Mask.Size()
	return netip.PrefixFrom(a.Unmap(), ones), true
}
