// Package ipamconf holds the config pieces the built-in IPAM types share: ipam.routes
// (result.WireRoute) turned into the result model with errors that name the offending
// field (ipam.dns is skel.DNS, result.WireDNS).
package ipamconf

import (
	"fmt"
	"net/netip"

	"github.com/cnikit/cni/internal/core/cnierror"
	"github.com/cnikit/cni/internal/result"
)

// Route is one entry of ipam.routes, with the 1.1.0 extensions: the route of a result.
type Route = result.WireRoute

// Args is the config's "args" object as the IPAM types read it: the runtime's requested
// addresses under args.cni.ips (CONVENTIONS.md).
type Args struct {
	CNI *struct {
		IPs []string `json:"ips,omitempty"`
	} `json:"cni,omitempty"`
}

// Routes validates routes; field is their config path, e.g. "ipam.routes". A dst keeps
// its host bits, as the reference's CIDR type does.
func Routes(field string, in []Route) ([]result.Route, error) {
	var out []result.Route
	for i, r := range in {
		dst, err := ParseCIDR(Field(field, i)+".dst", r.Dst)
		if err != nil {
			return nil, err
		}
		rt := result.Route{Dst: dst, MTU: r.MTU, AdvMSS: r.AdvMSS, Priority: r.Priority, Table: r.Table, Scope: r.Scope}
		if r.GW != "" {
			if rt.GW, err = ParseAddr(Field(field, i)+".gw", r.GW); err != nil {
				return nil, err
			}
		}
		out = append(out, rt)
	}
	return out, nil
}

// ParseCIDR parses an address with its prefix length, keeping the host bits.
func ParseCIDR(field, s string) (netip.Prefix, error) {
	p, err := netip.ParsePrefix(s)
	if err != nil {
		return netip.Prefix{}, cnierror.Newf(cnierror.CodeInvalidConfig, "%s: invalid CIDR %q", field, s)
	}
	return result.Unmap(p), nil
}

// ParseAddr parses a plain address. A zone (fe80::1%eth0) is refused: a result cannot
// carry one, so the next plugin could not read the result back (the reference's
// net.ParseIP refuses it too).
func ParseAddr(field, s string) (netip.Addr, error) {
	a, err := netip.ParseAddr(s)
	if err != nil || a.Zone() != "" {
		return netip.Addr{}, cnierror.Newf(cnierror.CodeInvalidConfig, "%s: invalid IP address %q", field, s)
	}
	return a.Unmap(), nil
}

// Field formats an indexed field path.
func Field(base string, i int) string { return fmt.Sprintf("%s[%d]", base, i) }
