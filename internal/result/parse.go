package result

import (
	"encoding/json"
	"fmt"
	"net/netip"

	"github.com/cnikit/cni/internal/core/cnierror"
	"github.com/cnikit/cni/internal/core/version"
)

// Parse decodes a result of any known version. The version is the JSON's "cniVersion";
// when that is missing, empty or null, defaultVersion is used (pass the config's version:
// libcni does so, issue #895), and when both are empty, 0.1.0 as the spec says.
//
// The literal input null gives an empty result in that version, because libcni turns
// a plugin's null output into {"cniVersion": <config version>}.
//
// Decode failures are *cnierror.Error with code 6; an unknown version has code 1.
// Each wire shape reads only the fields its reference type has: an "mtu" on a 0.4.0
// interface is ignored, while every version keeps the extended route fields.
func Parse(data []byte, defaultVersion string) (*Result, error) {
	var head struct {
		CNIVersion json.RawMessage `json:"cniVersion"`
	}
	if err := json.Unmarshal(data, &head); err != nil {
		return nil, cnierror.Newf(cnierror.CodeDecode, "decode CNI result: %v", err)
	}
	v := defaultVersion
	var s string
	if json.Unmarshal(head.CNIVersion, &s) == nil && s != "" {
		v = s
	}
	v = version.OrDefault(v)
	sh, ok := shapeOf(v)
	if !ok {
		return nil, cnierror.Newf(cnierror.CodeIncompatibleVersion, "unsupported CNI result version %q", v)
	}
	r, err := decodeShape(sh, data)
	if err != nil {
		return nil, cnierror.Newf(cnierror.CodeDecode, "decode CNI %s result: %v", v, err)
	}
	r.CNIVersion = v
	return r, nil
}

// UnmarshalJSON decodes a result the way Parse does with no default version, so a
// result without "cniVersion" is a 0.1.0 one.
func (r *Result) UnmarshalJSON(data []byte) error {
	if string(data) == "null" {
		return nil
	}
	p, err := Parse(data, "")
	if err != nil {
		return err
	}
	*r = *p
	return nil
}

func decodeShape(sh shape, data []byte) (*Result, error) {
	switch sh {
	case shape02:
		return decodeWire(data, fromWire02)
	case shape04:
		return decodeWire(data, fromWire04)
	}
	return decodeWire(data, fromWire1)
}

// decodeWire reads data as the wire type W, then converts that to the model with from.
func decodeWire[W any](data []byte, from func(*W) (*Result, error)) (*Result, error) {
	var w W
	if err := json.Unmarshal(data, &w); err != nil {
		return nil, err
	}
	return from(&w)
}

// fromWire02 lists ip4 before ip6 and their routes in the same order, as the reference
// 0.2.0 -> 0.4.0 converter does.
func fromWire02(w *wireResult02) (*Result, error) {
	r := &Result{DNS: DNS(w.DNS)}
	for _, f := range []struct {
		name string
		ip   *wireIP02
	}{{"ip4", w.IP4}, {"ip6", w.IP6}} {
		if f.ip == nil {
			continue
		}
		ip, err := fromWireIP("ip", nil, f.ip.IP, f.ip.Gateway)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", f.name, err)
		}
		r.IPs = append(r.IPs, ip)
		routes, err := each("routes", f.ip.Routes, fromWireRoute)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", f.name, err)
		}
		r.Routes = append(r.Routes, routes...)
	}
	return r, nil
}

// fromWire04 ignores each ip's "version": the model derives it from the address, so a
// 0.4.0 entry whose "version" contradicts its address is read by its address.
func fromWire04(w *wireResult04) (r *Result, err error) {
	r = &Result{DNS: DNS(w.DNS)}
	for _, wi := range w.Interfaces {
		r.Interfaces = append(r.Interfaces, Interface{Name: wi.Name, Mac: wi.Mac, Sandbox: wi.Sandbox})
	}
	if r.IPs, err = each("ips", w.IPs, func(ip wireIP04) (IPConfig, error) {
		return fromWireIP("address", ip.Interface, ip.Address, ip.Gateway)
	}); err != nil {
		return nil, err
	}
	r.Routes, err = each("routes", w.Routes, fromWireRoute)
	return r, err
}

func fromWire1(w *wireResult1) (r *Result, err error) {
	r = &Result{}
	if w.DNS != nil {
		r.DNS = DNS{Nameservers: w.DNS.Nameservers, Domain: w.DNS.Domain, Search: w.DNS.Search, Options: w.DNS.Options}
	}
	for _, wi := range w.Interfaces {
		r.Interfaces = append(r.Interfaces, Interface{
			Name: wi.Name, Mac: wi.Mac, MTU: wi.MTU, Sandbox: wi.Sandbox, SocketPath: wi.SocketPath, PciID: wi.PciID,
		})
	}
	if r.IPs, err = each("ips", w.IPs, func(ip wireIP1) (IPConfig, error) {
		return fromWireIP("address", ip.Interface, ip.Address, ip.Gateway)
	}); err != nil {
		return nil, err
	}
	r.Routes, err = each("routes", w.Routes, func(rt wireRoute1) (Route, error) { return fromWireRoute(rt.unsorted()) })
	return r, err
}

// each converts every element of in with conv; a failure names the element as
// field[i]. It returns nil for no elements, as appending one by one did.
func each[In, Out any](field string, in []In, conv func(In) (Out, error)) ([]Out, error) {
	var out []Out
	for i, x := range in {
		y, err := conv(x)
		if err != nil {
			return nil, fmt.Errorf("%s[%d]: %w", field, i, err)
		}
		out = append(out, y)
	}
	return out, nil
}

// fromWireIP reads one address entry, whose address is under the key field.
func fromWireIP(field string, iface *int, address, gateway string) (IPConfig, error) {
	addr, err := parsePrefix(address)
	if err != nil {
		return IPConfig{}, fmt.Errorf("%s: %w", field, err)
	}
	gw, err := parseAddr(gateway)
	if err != nil {
		return IPConfig{}, fmt.Errorf("gateway: %w", err)
	}
	return IPConfig{Interface: iface, Address: addr, Gateway: gw}, nil
}

func fromWireRoute(w WireRoute) (Route, error) {
	dst, err := parsePrefix(w.Dst)
	if err != nil {
		return Route{}, fmt.Errorf("dst: %w", err)
	}
	gw, err := parseAddr(w.GW)
	if err != nil {
		return Route{}, fmt.Errorf("gw: %w", err)
	}
	return Route{Dst: dst, GW: gw, MTU: w.MTU, AdvMSS: w.AdvMSS, Priority: w.Priority, Table: w.Table, Scope: w.Scope}, nil
}

// parsePrefix reads a CIDR keeping its host bits (and Unmaps it). The reference library
// would accept a missing address and later print it as "<nil>", which nothing can read
// back, so a missing one is an error here.
func parsePrefix(s string) (netip.Prefix, error) {
	if s == "" {
		return netip.Prefix{}, fmt.Errorf("missing CIDR")
	}
	p, err := netip.ParsePrefix(s)
	return Unmap(p), err
}

// Unmap turns an IPv4-mapped IPv6 prefix (::ffff:10.0.0.0/120) into its IPv4 form, as
// Go's net package (and so the reference) reads one: results and configs alike.
func Unmap(p netip.Prefix) netip.Prefix {
	if a := p.Addr(); a.Is4In6() {
		return netip.PrefixFrom(a.Unmap(), max(p.Bits()-96, 0))
	}
	return p
}

// parseAddr reads an optional address: "" is no address, like the reference's net.IP.
// Zones are refused because net.ParseIP refuses them.
func parseAddr(s string) (netip.Addr, error) {
	if s == "" {
		return netip.Addr{}, nil
	}
	a, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Addr{}, err
	}
	if a.Zone() != "" {
		return netip.Addr{}, fmt.Errorf("address %q has a zone", s)
	}
	return a.Unmap(), nil
}
