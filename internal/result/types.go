// Package result holds the CNI ADD result in one version-independent model (netip values
// inside) and reads and writes it in the wire shape of every spec version, 0.1.0 to 1.1.0,
// converting between them the way the reference library does, quirks included.
package result

import "net/netip"

// Result is an ADD result. CNIVersion names the wire shape it is encoded in.
type Result struct {
	CNIVersion string
	Interfaces []Interface
	IPs        []IPConfig
	Routes     []Route
	DNS        DNS
}

// Interface is one entry of "interfaces". MTU, SocketPath and PciID exist from 1.1.0 on
// (1.0.0 carries them too, as the reference library's shared type does).
type Interface struct {
	Name       string
	Mac        string
	MTU        int
	Sandbox    string
	SocketPath string
	PciID      string
}

// IPConfig is one entry of "ips". Address keeps the host bits (10.1.0.5/24).
// Interface indexes Interfaces; nil when the result names no interface (IPAM results).
type IPConfig struct {
	Interface *int
	Address   netip.Prefix
	Gateway   netip.Addr
}

// Route is one entry of "routes". MTU, AdvMSS, Priority, Table and Scope are the 1.1.0
// additions; zero/nil means unset.
type Route struct {
	Dst      netip.Prefix
	GW       netip.Addr
	MTU      int
	AdvMSS   int
	Priority int
	Table    *int
	Scope    *int
}

// DNS is the "dns" object.
type DNS struct {
	Nameservers []string
	Domain      string
	Search      []string
	Options     []string
}

// IsEmpty reports whether no DNS field is set.
func (d DNS) IsEmpty() bool {
	return len(d.Nameservers) == 0 && d.Domain == "" && len(d.Search) == 0 && len(d.Options) == 0
}
