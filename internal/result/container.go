package result

import (
	"net/netip"
	"slices"
)

// ContainerIPs returns the entries of r.IPs that belong to the container interface
// ifName, the way the reference's meta plugins read a result that another plugin made:
// an entry whose Interface names an interface called ifName, and one that names no
// interface at all, or an index outside Interfaces (IPAM results, Calico's, a 0.2.0
// result converted up), which the reference takes for the interface's. An entry on an
// interface with another name is not the container's.
//
// The entries keep r's order, except that those on an interface called ifName but
// outside any sandbox come last: the reference's portmap skips them (it takes such an
// interface for the host's), so the first address of a family is the one it picks
// whenever it picks one, and the others are used only when there is nothing else.
func (r *Result) ContainerIPs(ifName string) []IPConfig {
	var sure, sandboxless []IPConfig
	for _, ip := range r.IPs {
		if ip.Interface == nil || *ip.Interface < 0 || *ip.Interface >= len(r.Interfaces) {
			sure = append(sure, ip)
			continue
		}
		switch iface := r.Interfaces[*ip.Interface]; {
		case iface.Name != ifName:
		case iface.Sandbox == "":
			sandboxless = append(sandboxless, ip)
		default:
			sure = append(sure, ip)
		}
	}
	return slices.Concat(sure, sandboxless)
}

// Addrs returns the addresses of r.IPs, in r's order (IPv4-mapped IPv6 ones as IPv4):
// none for a nil result.
func (r *Result) Addrs() []netip.Addr {
	if r == nil {
		return nil
	}
	out := make([]netip.Addr, 0, len(r.IPs))
	for _, ip := range r.IPs {
		out = append(out, ip.Address.Addr().Unmap())
	}
	return out
}
