package wire

import (
	"net"
	"net/netip"

	"github.com/cnikit/cni/internal/result"
)

// FromResult puts an IPAM result in the wire shape.
func FromResult(r *result.Result) *Result {
	out := &Result{CNIVersion: r.CNIVersion, DNS: r.DNS}
	for _, ip := range r.IPs {
		out.IPs = append(out.IPs, IPConfig{Interface: ip.Interface, Address: ipNet(ip.Address), Gateway: ip.Gateway.AsSlice()})
	}
	for _, rt := range r.Routes {
		out.Routes = append(out.Routes, Route{Dst: ipNet(rt.Dst), GW: rt.GW.AsSlice(), MTU: rt.MTU, AdvMSS: rt.AdvMSS,
			Priority: rt.Priority, Table: rt.Table, Scope: rt.Scope})
	}
	return out
}

// ToResult reads a wire result back; entries whose addresses do not parse are dropped
// (the reference daemon never sends such).
func (w *Result) ToResult() *result.Result {
	out := &result.Result{CNIVersion: w.CNIVersion, DNS: w.DNS}
	for _, ip := range w.IPs {
		p, ok := prefix(ip.Address)
		if !ok {
			continue
		}
		gw, _ := addr(ip.Gateway)
		out.IPs = append(out.IPs, result.IPConfig{Interface: ip.Interface, Address: p, Gateway: gw})
	}
	for _, rt := range w.Routes {
		dst, ok := prefix(rt.Dst)
		if !ok {
			continue
		}
		gw, _ := addr(rt.GW)
		out.Routes = append(out.Routes, result.Route{Dst: dst.Masked(), GW: gw, MTU: rt.MTU, AdvMSS: rt.AdvMSS,
			Priority: rt.Priority, Table: rt.Table, Scope: rt.Scope})
	}
	return out
}

func ipNet(p netip.Prefix) net.IPNet {
	if !p.IsValid() {
		return net.IPNet{}
	}
	return net.IPNet{IP: p.Addr().AsSlice(), Mask: net.CIDRMask(p.Bits(), p.Addr().BitLen())}
}

func addr(ip net.IP) (netip.Addr, bool) {
	if v4 := ip.To4(); v4 != nil {
		return netip.AddrFrom4([4]byte(v4)), true
	}
	a, ok := netip.AddrFromSlice(ip)
	return a, ok
}

func prefix(n net.IPNet) (netip.Prefix, bool) {
	a, ok := addr(n.IP)
	if !ok {
		return netip.Prefix{}, false
	}
	ones, bits := n.Mask.Size()
	switch {
	case bits == 128 && a.Is4() && ones >= 96:
		ones -= 96
	case bits == 0 || bits != a.BitLen():
		return netip.Prefix{}, false
	}
	return netip.PrefixFrom(a, ones), true
}
