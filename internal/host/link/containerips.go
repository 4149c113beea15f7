package link

import (
	"context"
	"fmt"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/cnikit/cni/internal/result"
)

// ContainerIPs returns the addresses of the container interface ifName for a meta
// plugin: those prevResult gives it (result.ContainerIPs), or, when it gives it none,
// the global ones the kernel has on the interface inside the netns at netnsPath, which
// is opened only then. Main plugins that list an interface's addresses on its host side
// or not at all still put them on the interface; the reference's meta plugins then do
// nothing (portmap maps no port, and says nothing), ours act on the addresses the
// container really has. The kernel's entries carry no gateway and no interface index.
func ContainerIPs(netnsPath, ifName string, prev *result.Result) ([]result.IPConfig, error) {
	if ips := prev.ContainerIPs(ifName); len(ips) > 0 {
		return ips, nil
	}
	// Reading addresses is no step of the invocation log: no context to record it in.
	cont, err := OpenContainer(context.Background(), netnsPath)
	if err != nil {
		return nil, err
	}
	defer cont.Close()
	return cont.GlobalAddrs(ifName)
}

// GlobalAddrs returns the global unicast addresses of universe scope on the link called
// name, IPv4 before IPv6, in the kernel's order within each family: no link-local,
// loopback or host-scoped ones, which are no address the network reaches the
// container at.
func (n *NS) GlobalAddrs(name string) ([]result.IPConfig, error) {
	l, err := n.ByName(name)
	if err != nil {
		return nil, err
	}
	var out []result.IPConfig
	for _, family := range []int{netlink.FAMILY_V4, netlink.FAMILY_V6} {
		addrs, err := n.h.AddrList(l, family)
		if err != nil {
			return nil, fmt.Errorf("addresses of %q: %w", name, err)
		}
		for _, a := range addrs {
			if p, ok := Prefix(a.IPNet); ok && a.Scope == unix.RT_SCOPE_UNIVERSE && p.Addr().IsGlobalUnicast() {
				out = append(out, result.IPConfig{Address: p})
			}
		}
	}
	return out, nil
}
