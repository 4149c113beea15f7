package hostlocal

import (
	"cmp"
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"github.com/cnikit/cni/internal/core/cnierror"
	"github.com/cnikit/cni/internal/core/version"
	"github.com/cnikit/cni/internal/ipam/ipamconf"
	"github.com/cnikit/cni/internal/result"
	"github.com/cnikit/cni/internal/spec/skel"
)

// defaultDataDir is where the reference plugin keeps its reservations; sharing it keeps
// both implementations' allocations visible to each other.
const defaultDataDir = "/var/lib/cni/networks"

// rangeJSON is one pool as written in ranges, ipRanges or the legacy top-level keys.
type rangeJSON struct {
	Subnet     string `json:"subnet,omitempty"`
	RangeStart string `json:"rangeStart,omitempty"`
	RangeEnd   string `json:"rangeEnd,omitempty"`
	Gateway    string `json:"gateway,omitempty"`
}

type ipamJSON struct {
	rangeJSON
	Type       string           `json:"type"`
	Routes     []ipamconf.Route `json:"routes,omitempty"`
	DataDir    string           `json:"dataDir,omitempty"`
	ResolvConf string           `json:"resolvConf,omitempty"`
	Ranges     [][]rangeJSON    `json:"ranges,omitempty"`
}

// netJSON is the part of the full network config host-local reads.
type netJSON struct {
	CNIVersion    string    `json:"cniVersion"`
	Name          string    `json:"name"`
	IPAM          *ipamJSON `json:"ipam"`
	RuntimeConfig struct {
		IPs      []string      `json:"ips,omitempty"`
		IPRanges [][]rangeJSON `json:"ipRanges,omitempty"`
	} `json:"runtimeConfig"`
	Args *ipamconf.Args `json:"args,omitempty"`
}

// config is the validated host-local configuration of one request.
type config struct {
	Network    string
	Version    string
	Sets       []rangeSet
	Routes     []result.Route
	DataDir    string
	ResolvConf string
	// Requested are the addresses asked for through CNI_ARGS, args and the ips capability.
	Requested []netip.Addr
}

// loadConfig parses and validates the request's config. Requested addresses are only
// read for ADD (withRequests), as DEL must work even when the runtime's args changed.
func loadConfig(req *skel.Request, withRequests bool) (*config, error) {
	raw, err := skel.LoadConfig[netJSON](req)
	if err != nil {
		return nil, err
	}
	if raw.IPAM == nil {
		return nil, cnierror.New(cnierror.CodeInvalidConfig, "ipam: IPAM config missing 'ipam' key")
	}
	c := &config{Network: raw.Name, Version: raw.CNIVersion, DataDir: cmp.Or(raw.IPAM.DataDir, defaultDataDir),
		ResolvConf: raw.IPAM.ResolvConf}
	if c.Routes, err = ipamconf.Routes("ipam.routes", raw.IPAM.Routes); err != nil {
		return nil, err
	}
	if c.Sets, err = parseRangeSets(raw); err != nil {
		return nil, err
	}
	if withRequests {
		if c.Requested, err = requestedIPs(req, raw); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// Validate checks an ADD's config as ADD reads it, reserving nothing: for a main
// plugin to call before it makes anything (ipam.Validate).
func Validate(req *skel.Request) error {
	_, err := loadConfig(req, true)
	return err
}

// loadDataDir reads where the network's reservations live (<dataDir>/<name>): all that
// DEL and GC read from the config, so that a config ADD would refuse (bad ranges,
// changed ranges) can still release what an earlier ADD took.
func loadDataDir(req *skel.Request) (string, error) {
	raw, err := skel.LoadConfig[struct {
		IPAM struct {
			DataDir string `json:"dataDir"`
		} `json:"ipam"`
	}](req)
	if err != nil {
		return "", err
	}
	return cmp.Or(raw.IPAM.DataDir, defaultDataDir), nil
}

// labelled keeps the field path of a range set for error messages.
type labelled struct {
	field string
	pools []rangeJSON
}

// parseRangeSets builds the final list: ipRanges (capability) first, then the legacy
// top-level range, then ranges, as the reference orders them, so last_reserved_ip.<n>
// indexes agree between the two implementations.
func parseRangeSets(raw *netJSON) ([]rangeSet, error) {
	var in []labelled
	for i, s := range raw.RuntimeConfig.IPRanges {
		in = append(in, labelled{fmt.Sprintf("runtimeConfig.ipRanges[%d]", i), s})
	}
	if raw.IPAM.Subnet != "" {
		in = append([]labelled{{"ipam", []rangeJSON{raw.IPAM.rangeJSON}}}, in...)
	}
	for i, s := range raw.IPAM.Ranges {
		in = append(in, labelled{fmt.Sprintf("ipam.ranges[%d]", i), s})
	}
	if len(in) == 0 {
		return nil, cnierror.New(cnierror.CodeInvalidConfig, "ipam.ranges: no IP ranges specified")
	}
	sets := make([]rangeSet, len(in))
	v4 := 0
	for i, l := range in {
		s, err := parseRangeSet(l)
		if err != nil {
			return nil, err
		}
		sets[i] = s
		if s[0].Start.Is4() {
			v4++
		}
	}
	if (v4 > 1 || len(sets)-v4 > 1) && !version.AtLeast(version.OrDefault(raw.CNIVersion), "0.3.0") {
		return nil, cnierror.Newf(cnierror.CodeInvalidConfig,
			"ipam.ranges: CNI version %s does not support more than 1 address per family", raw.CNIVersion)
	}
	for i := range sets {
		for j := i + 1; j < len(sets); j++ {
			if sets[i].overlaps(sets[j]) {
				return nil, cnierror.Newf(cnierror.CodeInvalidConfig, "%s: range set %d overlaps with %d (%s)",
					in[j].field, i, j, in[i].field)
			}
		}
	}
	return sets, nil
}

func parseRangeSet(l labelled) (rangeSet, error) {
	if len(l.pools) == 0 {
		return nil, cnierror.Newf(cnierror.CodeInvalidConfig, "%s: empty range set", l.field)
	}
	set := make(rangeSet, len(l.pools))
	for i, p := range l.pools {
		field := fmt.Sprintf("%s[%d]", l.field, i)
		if l.field == "ipam" {
			field = "ipam"
		}
		r, err := parseRange(field, p)
		if err != nil {
			return nil, err
		}
		if i > 0 && r.Start.Is4() != set[0].Start.Is4() {
			return nil, cnierror.Newf(cnierror.CodeInvalidConfig, "%s: mixed address families in one range set", field)
		}
		if j := slices.IndexFunc(set[:i], r.overlaps); j >= 0 {
			return nil, cnierror.Newf(cnierror.CodeInvalidConfig, "%s: subnets %s and %s overlap", field, set[j].Subnet, r.Subnet)
		}
		set[i] = r
	}
	return set, nil
}

// parseRange validates one pool and fills in the reference defaults: gateway and start
// are subnet+1 (the gateway itself is then skipped), end is the last address (IPv4: the
// one before broadcast).
func parseRange(field string, p rangeJSON) (ipRange, error) {
	bad := func(key, format string, a ...any) error {
		return cnierror.Newf(cnierror.CodeInvalidConfig, "%s.%s: %s", field, key, fmt.Sprintf(format, a...))
	}
	if p.Subnet == "" {
		return ipRange{}, bad("subnet", "missing")
	}
	sub, err := netip.ParsePrefix(p.Subnet)
	if err != nil {
		return ipRange{}, bad("subnet", "invalid CIDR %q", p.Subnet)
	}
	sub = result.Unmap(sub)
	if sub.Bits() > sub.Addr().BitLen()-2 {
		return ipRange{}, bad("subnet", "network %s too small to allocate from", sub)
	}
	if sub.Masked() != sub {
		return ipRange{}, bad("subnet", "network has host bits set: for a subnet mask of length %d the network address is %s",
			sub.Bits(), sub.Masked().Addr())
	}
	r := ipRange{Subnet: sub, Start: sub.Addr().Next(), End: lastAddr(sub), Gateway: sub.Addr().Next()}
	for _, f := range []struct {
		key, text string
		dst       *netip.Addr
	}{{"gateway", p.Gateway, &r.Gateway}, {"rangeStart", p.RangeStart, &r.Start}, {"rangeEnd", p.RangeEnd, &r.End}} {
		if f.text == "" {
			continue
		}
		a, err := netip.ParseAddr(f.text)
		if err != nil {
			return ipRange{}, bad(f.key, "invalid IP address %q", f.text)
		}
		a = a.Unmap()
		if !sub.Contains(a) {
			return ipRange{}, bad(f.key, "%s not in network %s", a, sub)
		}
		*f.dst = a
	}
	if r.Start.Compare(r.End) > 0 {
		return ipRange{}, bad("rangeStart", "%s is after rangeEnd %s", r.Start, r.End)
	}
	return r, nil
}

// lastAddr is the last address the reference hands out by default: the broadcast minus
// one for IPv4, the very last address for IPv6.
func lastAddr(p netip.Prefix) netip.Addr {
	b := p.Addr().AsSlice()
	for i := range b {
		if keep := p.Bits() - i*8; keep < 8 { // the byte holds host bits: set them all
			b[i] |= 0xff >> max(keep, 0)
		}
	}
	a, _ := netip.AddrFromSlice(b)
	if a.Is4() {
		a = a.Prev()
	}
	return a
}

// requestedIPs collects CNI_ARGS IP=, args.cni.ips and runtimeConfig.ips, in that
// order. Each may be a bare address or an address with a prefix length.
func requestedIPs(req *skel.Request, raw *netJSON) ([]netip.Addr, error) {
	cniArgs, err := skel.ParseCNIArgs(req.Args.CNIArgs, "IP")
	if err != nil {
		return nil, err
	}
	type requested struct{ field, text string }
	var asked []requested
	if ip := cniArgs["IP"]; ip != "" {
		asked = append(asked, requested{"CNI_ARGS IP", ip})
	}
	if raw.Args != nil && raw.Args.CNI != nil {
		for i, ip := range raw.Args.CNI.IPs {
			asked = append(asked, requested{fmt.Sprintf("args.cni.ips[%d]", i), ip})
		}
	}
	for i, ip := range raw.RuntimeConfig.IPs {
		asked = append(asked, requested{fmt.Sprintf("runtimeConfig.ips[%d]", i), ip})
	}
	var out []netip.Addr
	for _, r := range asked {
		a, err := parseIPArg(r.text)
		if err != nil {
			return nil, cnierror.Newf(cnierror.CodeInvalidConfig, "%s: invalid IP address %q", r.field, r.text)
		}
		out = append(out, a)
	}
	return out, nil
}

func parseIPArg(s string) (netip.Addr, error) {
	s = strings.TrimSpace(s)
	if strings.Contains(s, "/") {
		p, err := netip.ParsePrefix(s)
		return p.Addr().Unmap(), err
	}
	a, err := netip.ParseAddr(s)
	return a.Unmap(), err
}
