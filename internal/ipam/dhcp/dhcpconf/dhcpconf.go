// Package dhcpconf reads the dhcp IPAM configuration: the reference's keys, and ipv4,
// ipv6 and routes for DHCPv6. The plugin reads it to find the
// daemon and to refuse a bad config before calling; the daemon reads it again from the
// same stdin bytes (the reference's wire carries the config, not a parsed form) to build
// the options its client sends.
package dhcpconf

import (
	"cmp"
	"encoding/json"
	"fmt"
	"net/netip"
	"strconv"
	"strings"

	"github.com/insomniacslk/dhcp/dhcpv4"

	"github.com/cnikit/cni/internal/core/cnierror"
	"github.com/cnikit/cni/internal/ipam/ipamconf"
	"github.com/cnikit/cni/internal/result"
	"github.com/cnikit/cni/internal/spec/skel"
)

// DefaultSocketPath is where the plugin finds the daemon unless daemonSocketPath says
// otherwise.
const DefaultSocketPath = "/run/cni/dhcp.sock"

// DefaultRequest is the parameter request list unless a request entry sets
// skipDefault: the reference asks for the mask and routers; the DNS and route options
// are asked for too, because servers send only what is asked and the result carries
// them.
var defaultRequest = []dhcpv4.OptionCode{
	dhcpv4.OptionSubnetMask,
	dhcpv4.OptionRouter,
	dhcpv4.OptionDomainNameServer,
	dhcpv4.OptionDomainName,
	dhcpv4.OptionStaticRoutingTable,
	dhcpv4.OptionClasslessStaticRoute,
}

// optionNames are the dhcp-options(5) names the config may use instead of a number:
// the reference's six, and the ones a result reads. An array of constants, not a map: a
// package-level map is built at the start of every exec of the binary.
var optionNames = [...]struct {
	name string
	code uint8
}{
	{"subnet-mask", 1},
	{"routers", 3},
	{"domain-name-servers", 6},
	{"host-name", 12},
	{"domain-name", 15},
	{"interface-mtu", 26},
	{"static-routes", 33},
	{"ntp-servers", 42},
	{"vendor-class-identifier", 60},
	{"dhcp-client-identifier", 61},
	{"user-class", 77},
	{"domain-search", 119},
	{"classless-static-routes", 121},
}

// Config is the validated configuration of one request.
type Config struct {
	Network    string
	SocketPath string
	// Provide are the options sent with every request, values resolved.
	Provide []dhcpv4.Option
	// Request is the parameter request list (option 55); empty means the library's.
	Request []dhcpv4.OptionCode
	// Priority is the metric of every route of the result (0: unset).
	Priority int
	// IPv4 and IPv6 say which families the attachment gets a lease of: DHCPv4 alone
	// unless ipam.ipv6 is true, and DHCPv6 alone with ipam.ipv4 false.
	IPv4, IPv6 bool
	// Routes are ipam.routes, added to the result: DHCPv6 carries no routes, so these
	// (or router advertisements) give the IPv6 default route.
	Routes []result.Route
	// Valid are GC's valid attachments.
	Valid []skel.Attachment
}

type netJSON struct {
	Name string    `json:"name"`
	IPAM *ipamJSON `json:"ipam"`

	Valid  []skel.Attachment `json:"cni.dev/valid-attachments,omitempty"`
	Legacy []skel.Attachment `json:"cni.dev/attachments,omitempty"`
}

type ipamJSON struct {
	DaemonSocketPath string           `json:"daemonSocketPath"`
	Provide          []provideJSON    `json:"provide"`
	Request          []requestJSON    `json:"request"`
	Priority         int              `json:"priority"`
	IPv4             *bool            `json:"ipv4"`
	IPv6             bool             `json:"ipv6"`
	Routes           []ipamconf.Route `json:"routes"`
}

type provideJSON struct {
	Option  optionName `json:"option"`
	Value   string     `json:"value"`
	FromArg string     `json:"fromArg"`
}

type requestJSON struct {
	SkipDefault bool       `json:"skipDefault"`
	Option      optionName `json:"option"`
}

// optionName accepts a name or a number, in a string or bare, as "option" values
// appear both ways in configs.
type optionName string

func (o *optionName) UnmarshalJSON(b []byte) error {
	var n json.Number
	if err := json.Unmarshal(b, &n); err == nil {
		*o = optionName(n.String())
		return nil
	}
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("option must be a name or a number: %s", b)
	}
	*o = optionName(s)
	return nil
}

// Parse reads the config bytes of a request; cniArgs (CNI_ARGS) feeds "fromArg".
func Parse(data []byte, cniArgs string) (*Config, error) {
	var raw netJSON
	if err := json.Unmarshal(data, &raw); err != nil {
		return nil, skel.ConfigDecodeError("dhcp", err)
	}
	if raw.IPAM == nil {
		return nil, cnierror.New(cnierror.CodeInvalidConfig, "ipam: IPAM config missing 'ipam' key")
	}
	c := &Config{Network: raw.Name, SocketPath: cmp.Or(raw.IPAM.DaemonSocketPath, DefaultSocketPath), Priority: raw.IPAM.Priority,
		Valid: skel.GCAttachments(raw.Valid, raw.Legacy)}
	if c.Priority < 0 {
		return nil, cnierror.Newf(cnierror.CodeInvalidConfig, "ipam.priority: %d is negative", c.Priority)
	}
	c.IPv4 = raw.IPAM.IPv4 == nil || *raw.IPAM.IPv4
	c.IPv6 = raw.IPAM.IPv6
	if !c.IPv4 && !c.IPv6 {
		return nil, cnierror.New(cnierror.CodeInvalidConfig, "ipam.ipv4: false leaves no address family (set ipam.ipv6 to true for DHCPv6 alone)")
	}
	var err error
	if c.Routes, err = ipamconf.Routes("ipam.routes", raw.IPAM.Routes); err != nil {
		return nil, err
	}
	if c.Provide, err = provide(raw.IPAM.Provide, looseArgs(cniArgs)); err != nil {
		return nil, err
	}
	if c.Request, err = request(raw.IPAM.Request); err != nil {
		return nil, err
	}
	return c, nil
}

func provide(list []provideJSON, args map[string]string) ([]dhcpv4.Option, error) {
	var out []dhcpv4.Option
	for i, p := range list {
		field := fmt.Sprintf("ipam.provide[%d]", i)
		code, err := ParseOption(string(p.Option))
		if err != nil {
			return nil, cnierror.Newf(cnierror.CodeInvalidConfig, "%s.option: %v", field, err)
		}
		values := []string{}
		if p.Value != "" {
			values = append(values, p.Value)
		}
		if v, ok := args[p.FromArg]; ok && p.FromArg != "" {
			values = append(values, v)
		}
		for _, v := range values {
			if len(v) > 255 {
				return nil, cnierror.Newf(cnierror.CodeInvalidConfig, "%s: value for option %q is longer than 255 bytes", field, p.Option)
			}
			out = append(out, dhcpv4.OptGeneric(code, []byte(v)))
		}
	}
	return out, nil
}

func request(list []requestJSON) ([]dhcpv4.OptionCode, error) {
	var out dhcpv4.OptionCodeList
	skipDefault := false
	for i, r := range list {
		skipDefault = skipDefault || r.SkipDefault
		if r.Option == "" {
			continue
		}
		code, err := ParseOption(string(r.Option))
		if err != nil {
			return nil, cnierror.Newf(cnierror.CodeInvalidConfig, "ipam.request[%d].option: %v", i, err)
		}
		out.Add(code)
	}
	if !skipDefault {
		out.Add(defaultRequest...)
	}
	return out, nil
}

// ParseOption reads an option name or number (1-254: 0 is padding, 255 the end mark).
func ParseOption(s string) (dhcpv4.OptionCode, error) {
	for _, o := range optionNames {
		if o.name == s {
			return dhcpv4.GenericOptionCode(o.code), nil
		}
	}
	n, err := strconv.ParseUint(s, 10, 8)
	if err != nil || n == 0 || n == 255 {
		return nil, fmt.Errorf("unknown DHCP option %q (a dhcp-options(5) name or a number 1-254)", s)
	}
	return dhcpv4.GenericOptionCode(n), nil
}

// looseArgs reads CNI_ARGS the way the reference daemon does for fromArg: every K=V
// pair, nothing refused, since the runtime passes keys meant for other plugins.
func looseArgs(raw string) map[string]string {
	out := map[string]string{}
	for _, pair := range strings.Split(raw, ";") {
		if k, v, ok := strings.Cut(pair, "="); ok {
			out[k] = v
		}
	}
	return out
}

// NetworkName reads only the network's name: all DEL needs to find a lease, whatever
// else the config says.
func NetworkName(data []byte) (string, error) {
	var raw struct {
		Name string `json:"name"`
	}
	if err := json.Unmarshal(data, &raw); err != nil {
		return "", skel.ConfigDecodeError("dhcp", err)
	}
	return raw.Name, nil
}

// ClientID is the client identifier of an attachment, as the reference forms it:
// "<container id>/<network>/<ifname>", cut to 254 bytes so that with its type byte it
// fits in an option; cut where the reference cuts, both daemons send the same
// identifier for the same attachment.
func ClientID(containerID, network, ifName string) string {
	id := containerID + "/" + network + "/" + ifName
	if len(id) > 254 {
		id = id[:254]
	}
	return id
}

// PrevIPv4 is the IPv4 address that the config's prevResult (the runtime's cached ADD
// result) gives the attachment: the first one on the interface called ifName inside a
// sandbox, or else the first one. It is how a lease another daemon got (the reference
// daemon before an in-place upgrade, which keeps no files) is found again. Anything
// unreadable is no address: DEL and CHECK go on without it.
func PrevIPv4(data []byte, ifName string) (netip.Addr, bool) {
	var raw struct {
		CNIVersion string          `json:"cniVersion"`
		Prev       json.RawMessage `json:"prevResult"`
	}
	if json.Unmarshal(data, &raw) != nil || len(raw.Prev) == 0 {
		return netip.Addr{}, false
	}
	prev, err := result.Parse(raw.Prev, raw.CNIVersion)
	if err != nil {
		return netip.Addr{}, false
	}
	var first netip.Addr
	for _, ip := range prev.IPs {
		a := ip.Address.Addr()
		if !a.Is4() {
			continue
		}
		if i := ip.Interface; i != nil && *i >= 0 && *i < len(prev.Interfaces) &&
			prev.Interfaces[*i].Name == ifName && prev.Interfaces[*i].Sandbox != "" {
			return a, true
		}
		if !first.IsValid() {
			first = a
		}
	}
	return first, first.IsValid()
}
