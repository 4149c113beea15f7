package result

import (
	"net/netip"
	"slices"

	"github.com/cnikit/cni/internal/core/cnierror"
	"github.com/cnikit/cni/internal/core/version"
)

// Convert returns a copy of r in version to, with the reference library's converter
// semantics; r itself is never changed. An empty to means 0.1.0, as in the reference.
//
// The copy holds exactly what the wire shape of to can carry:
//   - to 0.1.0/0.2.0 from a newer version: the first IPv4 and the first IPv6 address
//     only, no interfaces, and only routes whose destination family has an address,
//     reduced to dst and gw; "cannot convert: no valid IP addresses" if none is left.
//   - 0.1.0/0.2.0 to newer: ip4 then ip6, with no interface index.
//   - 1.x to 0.3.x/0.4.0: interface mtu, socketPath and pciID are dropped; the extended
//     route fields stay, because the reference shares one route type.
//   - within a family, and 0.x to 1.x: everything is carried, only the version changes.
//
// Unknown versions and targets above 1.1.0 fail with code 1.
func (r *Result) Convert(to string) (*Result, error) {
	to = version.OrDefault(to)
	from, okFrom := shapeOf(r.CNIVersion)
	target, okTo := shapeOf(to)
	if !okFrom || !okTo {
		return nil, cnierror.Newf(cnierror.CodeIncompatibleVersion,
			"no converter for CNI result version %s to %s", r.CNIVersion, to)
	}
	out := r.Clone()
	out.fit(from)
	if target == shape02 && from != shape02 {
		s := split(out, true)
		if s.ip == [2]*IPConfig{} {
			return nil, cnierror.New(cnierror.CodeIncompatibleVersion, "cannot convert: no valid IP addresses")
		}
		s.apply(out)
	}
	out.fit(target)
	out.CNIVersion = to
	return out, nil
}

// fit drops what the wire shape sh cannot carry, so that the model says what an
// encode-then-parse round trip would.
func (r *Result) fit(sh shape) {
	switch sh {
	case shape02:
		split(r, false).apply(r)
	case shape04:
		for i := range r.Interfaces {
			r.Interfaces[i].MTU, r.Interfaces[i].SocketPath, r.Interfaces[i].PciID = 0, "", ""
		}
	}
}

// split02 is a result placed in the 0.1.0/0.2.0 shape: one address per family, each
// with the routes of its family.
type split02 struct {
	ip     [2]*IPConfig // by family: IPv4, IPv6
	routes [2][]Route
}

// family indexes split02's fields by a's family. Like the reference, anything that is
// not IPv4 counts as IPv6.
func family(a netip.Addr) int {
	if a.Is4() {
		return 0
	}
	return 1
}

// split keeps the first address of each family and the routes that can hang under one
// of them. With dstGWOnly
// the routes lose their extended fields, as the reference's down-converter does.
func split(r *Result, dstGWOnly bool) split02 {
	var s split02
	for _, ip := range r.IPs {
		ip.Interface = nil
		if f := family(ip.Address.Addr()); s.ip[f] == nil {
			s.ip[f] = &ip
		}
	}
	for _, rt := range r.Routes {
		if dstGWOnly {
			rt = Route{Dst: rt.Dst, GW: rt.GW}
		}
		if f := family(rt.Dst.Addr()); s.ip[f] != nil {
			s.routes[f] = append(s.routes[f], rt)
		}
	}
	return s
}

// apply makes r hold s: ip4 before ip6, their routes in the same order, no interfaces.
func (s split02) apply(r *Result) {
	r.Interfaces = nil
	r.IPs = nil
	for _, ip := range s.ip {
		if ip != nil {
			r.IPs = append(r.IPs, *ip)
		}
	}
	r.Routes = slices.Concat(s.routes[0], s.routes[1]) // nil when both are empty
}
