package bridge

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"syscall"

	"github.com/vishvananda/netlink"

	"github.com/cnikit/cni/internal/core/cnierror"
	"github.com/cnikit/cni/internal/host/link"
	"github.com/cnikit/cni/internal/host/nlconn"
	"github.com/cnikit/cni/internal/host/sysctl"
	"github.com/cnikit/cni/internal/result"
)

// ensureBridge creates the bridge or adopts an existing one, which must be a bridge, and
// sets it up. The bridge is shared by every attachment and is never removed, so it is
// looked up first: one message for every ADD but the first.
func ensureBridge(host *link.NS, conf *Config) (netlink.Link, error) {
	h := host.Handle()
	l, err := h.LinkByName(conf.Bridge)
	if link.IsNotFound(err) {
		l, err = createBridge(h, conf)
	}
	if err != nil {
		return nil, fmt.Errorf("bridge %q: %w", conf.Bridge, err)
	}
	existing, ok := l.(*netlink.Bridge)
	if !ok {
		return nil, cnierror.Newf(cnierror.CodeInvalidConfig, "bridge: %q already exists but is a %s, not a bridge", conf.Bridge, l.Type())
	}
	if conf.needVLAN && (existing.VlanFiltering == nil || !*existing.VlanFiltering) {
		if err := h.BridgeSetVlanFiltering(l, true); err != nil {
			return nil, fmt.Errorf("bridge %q: enable vlan_filtering: %w", conf.Bridge, err)
		}
	}
	if conf.PromiscMode && l.Attrs().Promisc == 0 {
		if err := h.SetPromiscOn(l); err != nil {
			return nil, fmt.Errorf("bridge %q: set promiscuous: %w", conf.Bridge, err)
		}
	}
	// A bridge must not autoconfigure from router advertisements on the container side.
	if err := sysctl.Ensure(sysctl.Iface("ipv6", conf.Bridge, "accept_ra"), "0"); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("bridge %q: %w", conf.Bridge, err)
	}
	if l.Attrs().Flags&net.FlagUp == 0 {
		if err := h.LinkSetUp(l); err != nil {
			return nil, fmt.Errorf("bridge %q: set up: %w", conf.Bridge, err)
		}
	}
	return l, nil
}

// createBridge creates the bridge, or finds that a concurrent ADD just did, and looks
// it up.
func createBridge(h *nlconn.Handle, conf *Config) (netlink.Link, error) {
	attrs := netlink.NewLinkAttrs()
	attrs.Name, attrs.MTU = conf.Bridge, conf.MTU
	br := &netlink.Bridge{LinkAttrs: attrs}
	if conf.needVLAN {
		on := true
		br.VlanFiltering = &on
	}
	if err := h.LinkAdd(br); err != nil && !errors.Is(err, syscall.EEXIST) {
		return nil, fmt.Errorf("create: %w", err)
	}
	return h.LinkByName(conf.Bridge)
}

// plugPort makes the host veth a port of the bridge with the configured port flags and
// VLANs, and returns the bridge's MAC as pinMAC leaves it.
func plugPort(host *link.NS, br, port netlink.Link, conf *Config) (net.HardwareAddr, error) {
	h := host.Handle()
	name := port.Attrs().Name
	if err := h.LinkSetMaster(port, br); err != nil {
		return nil, fmt.Errorf("host veth %q: set master %q: %w", name, br.Attrs().Name, err)
	}
	if conf.HairpinMode {
		if err := h.LinkSetHairpin(port, true); err != nil {
			return nil, fmt.Errorf("host veth %q: set hairpin: %w", name, err)
		}
	}
	if conf.PortIsolation {
		if err := h.LinkSetIsolated(port, true); err != nil {
			return nil, fmt.Errorf("host veth %q: set isolated: %w", name, err)
		}
	}
	if err := setPortVLANs(h, port, conf.VLAN, conf.trunk, conf.PreserveDefaultVLAN); err != nil {
		return nil, err
	}
	return pinMAC(h, br.Attrs().Name)
}

// setPortVLANs makes vlan the port's untagged PVID and adds the trunk VLANs tagged. The
// bridge's default VLAN 1 is dropped from the port unless preserve is set; a trunk
// without vlan gets VLAN 1 back as its native (untagged PVID) VLAN, as the reference
// has done since v1.8.0 "for backward compatibility" (its #1180).
func setPortVLANs(h *nlconn.Handle, port netlink.Link, vlan int, trunk []VLANRange, preserve bool) error {
	if vlan == 0 && len(trunk) == 0 {
		return nil
	}
	name := port.Attrs().Name
	if !preserve {
		if err := h.BridgeVlanDel(port, 1, true, true, false, true); err != nil && !errors.Is(err, syscall.ENOENT) {
			return fmt.Errorf("host veth %q: remove default vlan: %w", name, err)
		}
	}
	if vlan != 0 {
		if err := h.BridgeVlanAdd(port, uint16(vlan), true, true, false, true); err != nil {
			return fmt.Errorf("host veth %q: add vlan %d: %w", name, vlan, err)
		}
	}
	for _, r := range trunk {
		add := func() error {
			return h.BridgeVlanAddRange(port, uint16(*r.MinID), uint16(*r.MaxID), false, false, false, true)
		}
		if *r.MinID == *r.MaxID {
			// The kernel refuses a range whose first and last id are the same (EINVAL).
			add = func() error { return h.BridgeVlanAdd(port, uint16(*r.MinID), false, false, false, true) }
		}
		if err := add(); err != nil {
			return fmt.Errorf("host veth %q: add trunk vlans %d-%d: %w", name, *r.MinID, *r.MaxID, err)
		}
	}
	if vlan == 0 {
		if err := h.BridgeVlanAdd(port, 1, true, true, false, true); err != nil {
			return fmt.Errorf("host veth %q: add native vlan 1 to the trunk: %w", name, err)
		}
	}
	return nil
}

// setupL2 finishes an attachment without IPAM: the container interface is only set up,
// unless disableContainerInterface asks to leave it down.
func setupL2(cont *link.NS, ifName string, conf *Config) error {
	if conf.DisableContainerInterface {
		return nil
	}
	if err := prepareContainer(cont, ifName, conf.EnableDAD); err != nil {
		return err
	}
	l, err := cont.ByName(ifName)
	if err != nil {
		return err
	}
	h := cont.Handle()
	if err := h.LinkSetUp(l); err != nil {
		return fmt.Errorf("container interface %q: set up: %w", ifName, err)
	}
	return nil
}

// prepareContainer sets the container interface's sysctls: gratuitous ARP on address
// changes, and duplicate address detection only when asked for, because DAD delays an
// IPv6 address by about a second and addresses from IPAM are unique already. The
// interface was made by this ADD, so its values are the namespace's defaults, which
// differ from ours unless someone changed them: each is written without being read
// first (a write of an unchanged value does nothing to these three).
func prepareContainer(cont *link.NS, ifName string, dad bool) error {
	accept, enhanced := "0", "0"
	if dad {
		accept, enhanced = "1", "1"
	}
	return cont.Do(func() error {
		settings := [][2]string{
			{sysctl.Iface("ipv4", ifName, "arp_notify"), "1"},
			{sysctl.Iface("ipv6", ifName, "accept_dad"), accept},
			{sysctl.Iface("ipv6", ifName, "enhanced_dad"), enhanced},
		}
		for _, s := range settings {
			// A namespace with IPv6 disabled has no ipv6 tree; that is not an error.
			if err := sysctl.Set(s[0], s[1]); err != nil && !errors.Is(err, os.ErrNotExist) {
				return fmt.Errorf("container interface %q: %w", ifName, err)
			}
		}
		return nil
	})
}

// assignGateways, when isGateway is set, fills in the first address of the subnet as
// gateway where IPAM gave none, and adds a default route per family for
// isDefaultGateway. It returns the gateway addresses (with their subnet's prefix
// length) that belong on the bridge.
func assignGateways(conf *Config, res *result.Result) ([]netip.Prefix, error) {
	if !conf.IsGateway {
		return nil, nil
	}
	var gws []netip.Prefix
	defaults := map[bool]bool{} // is4 -> default route added or present
	for i := range res.IPs {
		ip := &res.IPs[i]
		if !ip.Gateway.IsValid() {
			ip.Gateway = ip.Address.Masked().Addr().Next()
		}
		gw := netip.PrefixFrom(ip.Gateway, ip.Address.Bits())
		if !gw.Masked().Contains(ip.Address.Addr()) {
			return nil, cnierror.Newf(cnierror.CodeInvalidConfig, "ipam: gateway %s is outside the subnet of %s", ip.Gateway, ip.Address)
		}
		gws = append(gws, gw)
		is4 := ip.Address.Addr().Is4()
		if conf.IsDefaultGateway && !defaults[is4] {
			if err := addDefaultRoute(res, ip.Gateway); err != nil {
				return nil, err
			}
			defaults[is4] = true
		}
	}
	return gws, nil
}

// addDefaultRoute adds a default route via gw unless IPAM already gave one; a default
// route via another gateway would make isDefaultGateway silently ineffective.
func addDefaultRoute(res *result.Result, gw netip.Addr) error {
	for _, r := range res.Routes {
		if r.Dst.Bits() != 0 || r.Dst.Addr().Is4() != gw.Is4() {
			continue
		}
		if r.GW.IsValid() && r.GW != gw {
			return cnierror.Newf(cnierror.CodeInvalidConfig,
				"isDefaultGateway: ineffective because IPAM sets a default route via %s", r.GW)
		}
		return nil
	}
	dst := netip.PrefixFrom(netip.IPv4Unspecified(), 0)
	if gw.Is6() {
		dst = netip.PrefixFrom(netip.IPv6Unspecified(), 0)
	}
	res.Routes = append(res.Routes, result.Route{Dst: dst, GW: gw})
	return nil
}

// setupGateways puts the gateway addresses on the bridge (or on the VLAN's gateway
// interface) and turns on forwarding for their families.
func setupGateways(host *link.NS, conf *Config, br netlink.Link, gws []netip.Prefix, res *result.Result) error {
	target := br
	if conf.VLAN != 0 {
		gwLink, err := ensureVLANGateway(host, br, conf)
		if err != nil {
			return err
		}
		target = gwLink
		res.AddInterface(result.Interface{Name: gwLink.Attrs().Name, Mac: gwLink.Attrs().HardwareAddr.String()})
	}
	h := host.Handle()
	var v4, v6 bool
	for _, gw := range gws {
		if err := ensureAddr(h, target, gw, conf.ForceAddress); err != nil {
			return err
		}
		v4, v6 = v4 || gw.Addr().Is4(), v6 || gw.Addr().Is6()
	}
	if err := sysctl.EnableForwarding(v4, v6); err != nil {
		return fmt.Errorf("enable forwarding: %w", err)
	}
	return nil
}

// pinMAC sets the bridge's MAC to its current value and returns it. A bridge without an
// assigned MAC takes the lowest MAC among its ports, which changes as containers come
// and go and makes neighbours' caches flap; once assigned it stays, so the value
// returned is the bridge's for the rest of the ADD. A portless bridge has no MAC (all
// zeros) and is left alone (nil is returned).
func pinMAC(h *nlconn.Handle, name string) (net.HardwareAddr, error) {
	br, err := h.LinkByName(name)
	if err != nil {
		return nil, fmt.Errorf("bridge %q: %w", name, err)
	}
	mac := br.Attrs().HardwareAddr
	if len(mac) == 0 || bytes.Equal(mac, make([]byte, len(mac))) {
		return nil, nil
	}
	if err := h.LinkSetHardwareAddr(br, mac); err != nil {
		return nil, fmt.Errorf("bridge %q: pin MAC %s: %w", name, mac, err)
	}
	return mac, nil
}

// ensureVLANGateway returns the "<bridge>.<vlan>" interface that carries the gateway
// address for a VLAN: one end of a host-only veth pair whose other end is an access
// port of the VLAN on the bridge.
func ensureVLANGateway(host *link.NS, br netlink.Link, conf *Config) (netlink.Link, error) {
	name := fmt.Sprintf("%s.%d", br.Attrs().Name, conf.VLAN)
	if l, err := host.ByName(name); err == nil {
		return l, nil
	} else if !link.IsNotFound(err) {
		return nil, err
	}
	v, err := link.CreateVeth(host, host, link.VethOptions{IfName: name, MTU: br.Attrs().MTU, ContainerUp: true})
	if err != nil {
		return nil, fmt.Errorf("vlan gateway %q: %w", name, err)
	}
	h := host.Handle()
	if err := h.LinkSetMaster(v.Host, br); err != nil {
		return nil, fmt.Errorf("vlan gateway %q: set master: %w", name, err)
	}
	if err := setPortVLANs(h, v.Host, conf.VLAN, nil, conf.PreserveDefaultVLAN); err != nil {
		return nil, err
	}
	return v.Container, nil
}

// ensureAddr puts gw on l. Another IPv4 address, or an overlapping IPv6 one, is replaced
// with forceAddress and is an error otherwise; distinct IPv6 subnets may coexist.
func ensureAddr(h *nlconn.Handle, l netlink.Link, gw netip.Prefix, force bool) error {
	family := netlink.FAMILY_V4
	if gw.Addr().Is6() {
		family = netlink.FAMILY_V6
	}
	addrs, err := h.AddrList(l, family)
	if err != nil {
		return fmt.Errorf("%q: list addresses: %w", l.Attrs().Name, err)
	}
	for _, a := range addrs {
		have, ok := link.Prefix(a.IPNet)
		if !ok || have.Addr().IsLinkLocalUnicast() {
			continue
		}
		if have == gw {
			return nil
		}
		if gw.Addr().Is6() && !have.Masked().Overlaps(gw.Masked()) {
			continue
		}
		if !force {
			return cnierror.Newf(cnierror.CodeInvalidConfig,
				"forceAddress: %q already has address %s, different from %s", l.Attrs().Name, have, gw)
		}
		if err := h.AddrDel(l, &a); err != nil {
			return fmt.Errorf("%q: remove address %s: %w", l.Attrs().Name, have, err)
		}
	}
	// The gateway address is this plugin's to give out, so IPv6 duplicate detection would
	// only keep it unusable (tentative) for a second after the first ADD.
	addr := &netlink.Addr{IPNet: link.IPNet(gw)}
	if gw.Addr().Is6() {
		addr.Flags = syscall.IFA_F_NODAD
	}
	if err := h.AddrAdd(l, addr); err != nil && !errors.Is(err, syscall.EEXIST) {
		return fmt.Errorf("%q: add address %s: %w", l.Attrs().Name, gw, err)
	}
	return nil
}
