package result

import (
	"encoding/json"
	"fmt"
	"io"
	"net/netip"

	"github.com/cnikit/cni/internal/core/cnierror"
)

// MarshalJSON writes r in the wire shape of r.CNIVersion, byte for byte as the reference
// library writes that version (compact). An unknown or empty version is an error
// (code 1) rather than a guess. A 0.1.0/0.2.0 result is written the way Convert would
// shape it: the first address of each family, each with the routes of its family.
func (r *Result) MarshalJSON() ([]byte, error) {
	sh, ok := shapeOf(r.CNIVersion)
	if !ok {
		return nil, cnierror.Newf(cnierror.CodeIncompatibleVersion,
			"encode CNI result: unsupported CNI result version %q", r.CNIVersion)
	}
	var w any
	var err error
	switch sh {
	case shape02:
		w, err = r.toWire02()
	case shape04:
		w, err = r.toWire04()
	default:
		w, err = r.toWire1()
	}
	if err != nil {
		return nil, fmt.Errorf("encode CNI %s result: %w", r.CNIVersion, err)
	}
	return json.Marshal(w)
}

// Print writes r as indented JSON (4 spaces, like the reference) and a newline.
func (r *Result) Print(w io.Writer) error {
	b, err := json.MarshalIndent(r, "", "    ")
	if err != nil {
		return err
	}
	_, err = w.Write(append(b, '\n'))
	return err
}

func (r *Result) toWire02() (*wireResult02, error) {
	s := split(r, false)
	w := &wireResult02{CNIVersion: r.CNIVersion, DNS: WireDNS(r.DNS)}
	var err error
	if w.IP4, err = toWireIP02(s.ip[0], s.routes[0]); err != nil {
		return nil, fmt.Errorf("ip4: %w", err)
	}
	if w.IP6, err = toWireIP02(s.ip[1], s.routes[1]); err != nil {
		return nil, fmt.Errorf("ip6: %w", err)
	}
	return w, nil
}

func toWireIP02(ip *IPConfig, routes []Route) (w *wireIP02, err error) {
	if ip == nil {
		return nil, nil
	}
	addr, err := formatPrefix("ip", ip.Address)
	if err != nil {
		return nil, err
	}
	w = &wireIP02{IP: addr, Gateway: formatAddr(ip.Gateway)}
	w.Routes, err = each("routes", routes, toWireRoute)
	return w, err
}

func (r *Result) toWire04() (w *wireResult04, err error) {
	w = &wireResult04{CNIVersion: r.CNIVersion, DNS: WireDNS(r.DNS)}
	for _, i := range r.Interfaces {
		w.Interfaces = append(w.Interfaces, wireIface04{Name: i.Name, Mac: i.Mac, Sandbox: i.Sandbox})
	}
	if w.IPs, err = each("ips", r.IPs, func(ip IPConfig) (wireIP04, error) {
		addr, err := formatPrefix("address", ip.Address)
		// The reference recomputes "version" from the address family when it converts.
		v := "6"
		if ip.Address.Addr().Is4() {
			v = "4"
		}
		return wireIP04{Version: v, Interface: ip.Interface, Address: addr, Gateway: formatAddr(ip.Gateway)}, err
	}); err != nil {
		return nil, err
	}
	w.Routes, err = each("routes", r.Routes, toWireRoute)
	return w, err
}

func (r *Result) toWire1() (w *wireResult1, err error) {
	w = &wireResult1{CNIVersion: r.CNIVersion}
	if !r.DNS.IsEmpty() {
		w.DNS = &wireDNS1{Domain: r.DNS.Domain, Nameservers: r.DNS.Nameservers, Options: r.DNS.Options, Search: r.DNS.Search}
	}
	for _, i := range r.Interfaces {
		w.Interfaces = append(w.Interfaces, wireIface1{
			Mac: i.Mac, MTU: i.MTU, Name: i.Name, PciID: i.PciID, Sandbox: i.Sandbox, SocketPath: i.SocketPath,
		})
	}
	if w.IPs, err = each("ips", r.IPs, func(ip IPConfig) (wireIP1, error) {
		addr, err := formatPrefix("address", ip.Address)
		return wireIP1{Address: addr, Gateway: formatAddr(ip.Gateway), Interface: ip.Interface}, err
	}); err != nil {
		return nil, err
	}
	w.Routes, err = each("routes", r.Routes, func(rt Route) (wireRoute1, error) {
		wr, err := toWireRoute(rt)
		return wr.sorted(), err
	})
	return w, err
}

func toWireRoute(rt Route) (WireRoute, error) {
	dst, err := formatPrefix("dst", rt.Dst)
	return WireRoute{
		Dst: dst, GW: formatAddr(rt.GW), MTU: rt.MTU, AdvMSS: rt.AdvMSS, Priority: rt.Priority, Table: rt.Table, Scope: rt.Scope,
	}, err
}

// formatPrefix refuses an unset prefix (field names it in the error): the reference
// would print "<nil>", which no reader accepts.
func formatPrefix(field string, p netip.Prefix) (string, error) {
	if !p.IsValid() {
		return "", fmt.Errorf("%s: CIDR is not set", field)
	}
	return p.String(), nil
}

// formatAddr writes "" for an unset address, which the omitempty tags then drop.
func formatAddr(a netip.Addr) string {
	if !a.IsValid() {
		return ""
	}
	return a.String()
}
