package hostdevice

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/cnikit/cni/internal/core/cnierror"
	"github.com/cnikit/cni/internal/core/ifname"
	"github.com/cnikit/cni/internal/host/link"
)

// find returns the host link the selector names.
func find(host *link.NS, sys sysfs, sel selector) (netlink.Link, error) {
	switch sel.kind {
	case byName:
		l, err := host.ByName(sel.value)
		if link.IsNotFound(err) {
			return nil, cnierror.Invalid("%s: no interface %q in the host netns", sel.field, sel.value)
		}
		return l, err
	case byMAC:
		return findByMAC(host, sel)
	}
	names, err := sysNetdevs(sys, sel)
	if err != nil {
		return nil, err
	}
	for _, name := range names {
		l, err := host.ByName(name)
		if err == nil {
			return l, nil
		}
		if !link.IsNotFound(err) {
			return nil, err
		}
	}
	return nil, cnierror.Invalid("%s: %s's interfaces %q are not in the host netns", sel.field, sel.value, names)
}

// findByMAC finds the link with the MAC. When links that share a MAC match too, the
// device itself is the one match that does not.
func findByMAC(host *link.NS, sel selector) (netlink.Link, error) {
	links, err := host.Handle().LinkList()
	if err != nil {
		return nil, fmt.Errorf("list host links: %w", err)
	}
	var all, devices []netlink.Link
	for _, l := range links {
		if !bytes.Equal(l.Attrs().HardwareAddr, sel.mac) {
			continue
		}
		all = append(all, l)
		// Links of these types carry the MAC of a port or parent.
		if !slices.Contains([]string{"bridge", "bond", "vlan", "ipvlan"}, l.Type()) {
			devices = append(devices, l)
		}
	}
	switch {
	case len(all) == 1:
		return all[0], nil
	case len(devices) == 1:
		return devices[0], nil
	case len(all) == 0:
		return nil, cnierror.Invalid("%s: no interface with MAC %s in the host netns", sel.field, sel.mac)
	}
	names := make([]string, len(all))
	for i, l := range all {
		names[i] = l.Attrs().Name
	}
	return nil, cnierror.Invalid("%s: %d interfaces have MAC %s (%s); name the device instead", sel.field, len(all), sel.mac, strings.Join(names, ", "))
}

// sysNetdevs asks sysfs for the interface names of a kernel path, PCI function or
// auxiliary device. A device that exists, is bound to a driver and has no interface yet
// is "try again later": drivers register their interfaces a moment after binding.
func sysNetdevs(sys sysfs, sel selector) ([]string, error) {
	var (
		names []string
		err   error
		what  = "device"
	)
	switch sel.kind {
	case byKernelPath:
		names, err = deviceNetdevs(sys.kernelPath(sel.value))
	case byPCI:
		what = "PCI device"
		names, err = sys.pciNetdevs(sel.value)
		if errors.Is(err, errNoNetdev) {
			if drv, _ := sys.pciDriver(sel.value); drv == "" {
				return nil, cnierror.Invalid("%s: PCI device %s is bound to no driver, so it has no interface", sel.field, sel.value)
			}
		}
	case byAux:
		what = "auxiliary device"
		names, err = deviceNetdevs(sys.auxDevice(sel.value))
	}
	switch {
	case errors.Is(err, errNoDevice):
		return nil, cnierror.Invalid("%s: no %s %s", sel.field, what, sel.value)
	case errors.Is(err, errNoNetdev):
		return nil, cnierror.Newf(cnierror.CodeTryAgainLater,
			"%s: %s %s has no network interface in this netns (not registered yet, or in use elsewhere)", sel.field, what, sel.value)
	case err != nil:
		return nil, cnierror.Newf(cnierror.CodeIO, "%s: %v", sel.field, err)
	}
	return names, nil
}

// snapshot records what DEL must put back, and what proves a link to be this device
// (see isDevice). device is its path below /sys/devices/, "" for a virtual device.
func snapshot(l netlink.Link, device string) saved {
	a := l.Attrs()
	s := saved{Name: a.Name, MTU: a.MTU, Up: a.Flags&net.FlagUp != 0, Index: a.Index, Device: device}
	if len(a.HardwareAddr) > 0 {
		s.MAC = a.HardwareAddr.String()
	}
	// The kernel reports an all-zero permanent address for devices that have none.
	if slices.ContainsFunc(a.PermHWAddr, func(b byte) bool { return b != 0 }) {
		s.PermMAC = a.PermHWAddr.String()
	}
	return s
}

// isDevice reports whether l provably is the device st describes: it carries the alias
// ADD gave it, the device's host name, and its permanent MAC or, for a device without
// one, one of the indexes it had in the host or the container. A name alone proves
// nothing: a state file naming any host link could otherwise make DEL or GC re-MAC it,
// change its MTU, bring it up or rename it.
//
// A state written before the MAC and indexes were recorded (by the release before, on
// a node upgraded under running pods) has the alias to go by, and for a link in the host
// (returned) also the marks of the kernel's return: the device comes back down, under
// its container name or "dev<N>".
func (st *saved) isDevice(l netlink.Link, returned bool) bool {
	a := l.Attrs()
	switch {
	case a.Alias != st.Name:
		return false
	case st.PermMAC != "":
		return bytes.Equal(a.PermHWAddr, parseMAC(st.PermMAC))
	case st.Index == 0:
		return !returned || a.Flags&net.FlagUp == 0 && (a.Name == st.IfName || isKernelDevName(a.Name))
	}
	return a.Index != 0 && (a.Index == st.Index || a.Index == st.ContainerIndex)
}

// isKernelDevName reports whether name is one the kernel gives a device it returns to
// the host under a taken name: "dev" and a number.
func isKernelDevName(name string) bool {
	digits := strings.TrimPrefix(name, "dev")
	return digits != name && digits != "" && strings.TrimLeft(digits, "0123456789") == ""
}

// parseMAC returns the address s spells, nil when it spells none.
func parseMAC(s string) net.HardwareAddr {
	mac, err := net.ParseMAC(s)
	if err != nil {
		return nil
	}
	return mac
}

// moveIn takes the host device into the container as ifName, its host name in the
// alias. It arrives down. The rename happens on the container side: the host never
// sees the device under a second name, which is what the reference's temporary netns
// is for, at the cost of one namespace move instead of two.
func moveIn(host, cont *link.NS, st *saved, ifName string) (netlink.Link, error) {
	cl, err := link.Relocate(link.Relocation{From: host, To: cont, Name: st.Name, NewName: ifName, Alias: st.Name, RenameIn: cont})
	if errors.Is(err, unix.EEXIST) {
		return nil, link.IfNameTaken(ifName)
	}
	if err != nil {
		return nil, fmt.Errorf("move %s into the container as %s: %w", st.Name, ifName, err)
	}
	return cl, nil
}

// moveOut brings the container's ifName back to the host under its original name. With
// a state the link must prove to be the state's device (isDevice): it then goes back
// under the state's name and gets back what ADD took. Without one (an ADD by the
// reference plugin, which keeps only the alias) the alias names it, as in the
// reference, and nothing else is restored. A link that proves nothing is not one this
// plugin moved and stays where it is. Returns whether a link was moved.
func moveOut(host, cont *link.NS, ifName string, st *saved) (bool, error) {
	l, err := cont.ByName(ifName)
	if link.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	var name string
	switch alias := l.Attrs().Alias; {
	case st != nil && st.isDevice(l, false):
		name = st.Name
	case st == nil && alias != "" && ifname.Check(alias) == nil:
		name = alias
	default:
		return false, nil
	}
	hl, err := link.Relocate(link.Relocation{From: cont, To: host, Name: ifName, NewName: name, RenameIn: cont})
	if err != nil {
		return false, fmt.Errorf("move %s back to the host as %s: %w", ifName, name, err)
	}
	return true, restore(host, hl, st)
}

// restore puts back the MAC, MTU and up state the device had before ADD (a MAC changed
// in the container, by tuning say, whose DEL cannot undo it once the netns is gone).
// Without a state (an ADD by the reference) it stays down, as the reference leaves it.
func restore(host *link.NS, l netlink.Link, st *saved) error {
	if st == nil {
		return nil
	}
	h := host.Handle()
	var errs []error
	if mac := parseMAC(st.MAC); mac != nil && !bytes.Equal(l.Attrs().HardwareAddr, mac) {
		if err := h.LinkSetHardwareAddr(l, mac); err != nil {
			errs = append(errs, fmt.Errorf("%s: restore MAC %s: %w", st.Name, st.MAC, err))
		}
	}
	if st.MTU > 0 && l.Attrs().MTU != st.MTU {
		if err := h.LinkSetMTU(l, st.MTU); err != nil {
			errs = append(errs, fmt.Errorf("%s: restore MTU %d: %w", st.Name, st.MTU, err))
		}
	}
	if st.Up {
		if err := h.LinkSetUp(l); err != nil {
			errs = append(errs, fmt.Errorf("%s: set up: %w", st.Name, err))
		}
	}
	return errors.Join(errs...)
}

// returned finds the device in the host after its container netns died: the kernel
// hands a physical device back to the initial namespace under its container name (or
// "devN" when that is taken), alias intact; one already called st.Name is home. Only a
// link that proves to be the device counts (isDevice).
func returned(host *link.NS, st *saved) (netlink.Link, error) {
	links, err := host.Handle().LinkList()
	if err != nil {
		return nil, fmt.Errorf("list host links: %w", err)
	}
	if i := slices.IndexFunc(links, func(l netlink.Link) bool { return st.isDevice(l, true) }); i >= 0 {
		return links[i], nil
	}
	return nil, nil
}

// bringHome renames a returned device back to its host name and restores it. The rename
// is done in a throw-away netns: host and device are both in the host namespace.
func bringHome(host *link.NS, l netlink.Link, st *saved) error {
	hl, err := link.Relocate(link.Relocation{From: host, To: host, Name: l.Attrs().Name, NewName: st.Name})
	if err != nil {
		return fmt.Errorf("rename returned %s back to %s: %w", l.Attrs().Name, st.Name, err)
	}
	return restore(host, hl, st)
}

// clearAlias removes the alias ADD stored the host name in, when it is still set.
func clearAlias(host *link.NS, l netlink.Link) error {
	if l.Attrs().Alias == "" {
		return nil
	}
	if err := host.Handle().LinkSetAlias(l, ""); err != nil {
		return fmt.Errorf("%s: clear alias: %w", l.Attrs().Name, err)
	}
	return nil
}
