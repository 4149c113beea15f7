package result

// The wire types below are the JSON shapes of the three result families. Field order
// is the order the reference library writes: struct order for 0.x, and alphabetical
// at every level for 1.x (its encoder goes through a map to drop an empty "dns").
// Addresses stay strings here; they become netip values in parse.go.

// shape is a family of versions that share one wire shape.
type shape int

const (
	shape02 shape = iota + 1 // 0.1.0, 0.2.0
	shape04                  // 0.3.0, 0.3.1, 0.4.0
	shape1                   // 1.0.0, 1.1.0
)

// shapeOf returns the wire shape of a known version.
func shapeOf(v string) (shape, bool) {
	switch v {
	case "0.1.0", "0.2.0":
		return shape02, true
	case "0.3.0", "0.3.1", "0.4.0":
		return shape04, true
	case "1.0.0", "1.1.0":
		return shape1, true
	}
	return 0, false
}

// SameShape reports whether versions a and b, both known, share one wire shape: a
// prevResult must share its config's, as the reference library checks.
func SameShape(a, b string) bool {
	sa, okA := shapeOf(a)
	sb, okB := shapeOf(b)
	return okA && okB && sa == sb
}

type wireResult02 struct {
	CNIVersion string    `json:"cniVersion"`
	IP4        *wireIP02 `json:"ip4,omitempty"`
	IP6        *wireIP02 `json:"ip6,omitempty"`
	DNS        WireDNS   `json:"dns"`
}

type wireIP02 struct {
	IP      string      `json:"ip"`
	Gateway string      `json:"gateway,omitempty"`
	Routes  []WireRoute `json:"routes,omitempty"`
}

type wireResult04 struct {
	CNIVersion string        `json:"cniVersion"`
	Interfaces []wireIface04 `json:"interfaces,omitempty"`
	IPs        []wireIP04    `json:"ips,omitempty"`
	Routes     []WireRoute   `json:"routes,omitempty"`
	DNS        WireDNS       `json:"dns"`
}

type wireIface04 struct {
	Name    string `json:"name"`
	Mac     string `json:"mac,omitempty"`
	Sandbox string `json:"sandbox,omitempty"`
}

type wireIP04 struct {
	Version   string `json:"version"`
	Interface *int   `json:"interface,omitempty"`
	Address   string `json:"address"`
	Gateway   string `json:"gateway,omitempty"`
}

// WireRoute is a route as JSON carries it everywhere but in a 1.x result: in every 0.x
// result (the reference library shares one route type across versions, so even 0.2.0
// carries the 1.1.0 route fields), in a config's ipam.routes, in the routes flannel
// hands its delegate, and in the invocation log. Its fields are in the reference's
// order, which the 0.x encoders write.
type WireRoute struct {
	Dst      string `json:"dst"`
	GW       string `json:"gw,omitempty"`
	MTU      int    `json:"mtu,omitempty"`
	AdvMSS   int    `json:"advmss,omitempty"`
	Priority int    `json:"priority,omitempty"`
	Table    *int   `json:"table,omitempty"`
	Scope    *int   `json:"scope,omitempty"`
}

// WireDNS is the "dns" object of a 0.x result and of a network config, in the
// reference's field order.
type WireDNS struct {
	Nameservers []string `json:"nameservers,omitempty"`
	Domain      string   `json:"domain,omitempty"`
	Search      []string `json:"search,omitempty"`
	Options     []string `json:"options,omitempty"`
}

// Result returns d in the result model; a nil d (a config without "dns") is no DNS.
func (d *WireDNS) Result() DNS {
	if d == nil {
		return DNS{}
	}
	return DNS(*d)
}

type wireResult1 struct {
	CNIVersion string       `json:"cniVersion"`
	DNS        *wireDNS1    `json:"dns,omitempty"`
	Interfaces []wireIface1 `json:"interfaces,omitempty"`
	IPs        []wireIP1    `json:"ips,omitempty"`
	Routes     []wireRoute1 `json:"routes,omitempty"`
}

type wireIface1 struct {
	Mac        string `json:"mac,omitempty"`
	MTU        int    `json:"mtu,omitempty"`
	Name       string `json:"name"`
	PciID      string `json:"pciID,omitempty"`
	Sandbox    string `json:"sandbox,omitempty"`
	SocketPath string `json:"socketPath,omitempty"`
}

type wireIP1 struct {
	Address   string `json:"address"`
	Gateway   string `json:"gateway,omitempty"`
	Interface *int   `json:"interface,omitempty"`
}

// wireRoute1 is WireRoute in the alphabetical order a 1.x result is written in.
type wireRoute1 struct {
	AdvMSS   int    `json:"advmss,omitempty"`
	Dst      string `json:"dst"`
	GW       string `json:"gw,omitempty"`
	MTU      int    `json:"mtu,omitempty"`
	Priority int    `json:"priority,omitempty"`
	Scope    *int   `json:"scope,omitempty"`
	Table    *int   `json:"table,omitempty"`
}

type wireDNS1 struct {
	Domain      string   `json:"domain,omitempty"`
	Nameservers []string `json:"nameservers,omitempty"`
	Options     []string `json:"options,omitempty"`
	Search      []string `json:"search,omitempty"`
}

func (w WireRoute) sorted() wireRoute1 {
	return wireRoute1{AdvMSS: w.AdvMSS, Dst: w.Dst, GW: w.GW, MTU: w.MTU, Priority: w.Priority, Scope: w.Scope, Table: w.Table}
}

func (w wireRoute1) unsorted() WireRoute {
	return WireRoute{Dst: w.Dst, GW: w.GW, MTU: w.MTU, AdvMSS: w.AdvMSS, Priority: w.Priority, Table: w.Table, Scope: w.Scope}
}
