package flannel

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"maps"
	"net/netip"
	"path/filepath"
	"slices"
	"strings"

	"github.com/cnikit/cni/internal/core/cnierror"
	"github.com/cnikit/cni/internal/result"
	"github.com/cnikit/cni/internal/spec/skel"
)

// The reference's defaults.
const (
	DefaultSubnetFile = "/run/flannel/subnet.env"
	DefaultDataDir    = "/var/lib/cni/flannel"
)

// Config is the plugin's part of the network config: the reference's keys. Delegate,
// IPAM and RuntimeConfig are open objects handed on to the delegate, so they are kept
// as decoded JSON (numbers as json.Number, so large integers survive).
type Config struct {
	SubnetFile    string         `json:"subnetFile"`
	DataDir       string         `json:"dataDir"`
	Delegate      map[string]any `json:"delegate"`
	IPAM          map[string]any `json:"ipam"`
	RuntimeConfig map[string]any `json:"runtimeConfig"`
}

// load decodes and validates the config.
func load(req *skel.Request) (*Config, error) {
	c := &Config{SubnetFile: DefaultSubnetFile, DataDir: DefaultDataDir}
	dec := json.NewDecoder(bytes.NewReader(req.Config))
	dec.UseNumber()
	if err := dec.Decode(c); err != nil {
		return nil, skel.ConfigDecodeError("flannel", err)
	}
	skel.WarnUnknownKeys[Config](req)
	if err := checkPath("subnetFile", c.SubnetFile); err != nil {
		return nil, err
	}
	return c, checkPath("dataDir", c.DataDir)
}

// storedPathOf is where the request's attachment keeps its delegate config. It reads
// only dataDir: DEL needs no more to find its state, so a config that is broken
// elsewhere cannot keep an attachment from being deleted.
func storedPathOf(req *skel.Request) (string, error) {
	var c struct {
		DataDir string `json:"dataDir"`
	}
	_ = json.Unmarshal(req.Config, &c) // the skel decoded it as an object already
	dir := cmp.Or(c.DataDir, DefaultDataDir)
	return storedPath(dir, req.Args.ContainerID), checkPath("dataDir", dir)
}

// checkPath insists on an absolute path: a relative one would resolve against whatever
// directory the runtime happens to exec the plugin in.
func checkPath(key, p string) error {
	if p == "" || !filepath.IsAbs(p) || strings.ContainsRune(p, 0) {
		return cnierror.Newf(cnierror.CodeInvalidConfig, "%s: %q is not an absolute path", key, p)
	}
	return nil
}

// checkDelegate applies the reference's rules to the delegate object: flannel sets its
// name and ipam, and its type, when given, names a plugin.
func (c *Config) checkDelegate() error {
	if t, ok := c.Delegate["type"]; ok {
		s, isString := t.(string)
		if !isString || s == "" || strings.ContainsRune(s, '/') {
			return cnierror.New(cnierror.CodeInvalidConfig, "delegate.type: must be a plugin name (a non-empty string)")
		}
	}
	for _, k := range []string{"name", "ipam"} {
		if _, ok := c.Delegate[k]; ok {
			return cnierror.Newf(cnierror.CodeInvalidConfig, "delegate.%s: must not be set, flannel sets it", k)
		}
	}
	return nil
}

// ipamRoutes returns the config's ipam.routes, validated, to be written into the
// delegate's as the reference library writes its Route type.
func (c *Config) ipamRoutes() ([]result.WireRoute, error) {
	var routes []result.WireRoute
	if raw, ok := c.IPAM["routes"]; ok {
		b, _ := json.Marshal(raw)
		if err := json.Unmarshal(b, &routes); err != nil {
			return nil, cnierror.Newf(cnierror.CodeInvalidConfig, "ipam.routes: %v", err)
		}
	}
	for i, r := range routes {
		dst, err := netip.ParsePrefix(r.Dst)
		if err != nil {
			return nil, cnierror.Newf(cnierror.CodeInvalidConfig, "ipam.routes[%d].dst: %q is not a CIDR", i, r.Dst)
		}
		routes[i].Dst = dst.String()
		if r.GW != "" {
			gw, err := netip.ParseAddr(r.GW)
			if err != nil {
				return nil, cnierror.Newf(cnierror.CodeInvalidConfig, "ipam.routes[%d].gw: %q is not an IP address", i, r.GW)
			}
			routes[i].GW = gw.String()
		}
	}
	if routes == nil {
		routes = []result.WireRoute{}
	}
	return routes, nil
}

// delegateConfig builds the delegate's network config from the plugin's config and the
// subnet file exactly as the reference does (see docs/plugins/flannel.md):
//
//   - the "delegate" object, plus "runtimeConfig" when the request carries one;
//   - name = the network's name; type defaults to "bridge"; ipMasq defaults to
//     !FLANNEL_IPMASQ (masquerade here unless the daemon does); mtu defaults to
//     FLANNEL_MTU; a bridge's isGateway defaults to true; cniVersion = the request's;
//   - ipam = the config's "ipam" with type defaulting to "host-local", "ranges" one
//     range set per family from FLANNEL_SUBNET and FLANNEL_IPV6_SUBNET, and "routes" the
//     config's ipam.routes followed by one route per cluster network.
func delegateConfig(c *Config, net skel.NetConf, env *SubnetEnv) (map[string]any, error) {
	if err := c.checkDelegate(); err != nil {
		return nil, err
	}
	routes, err := c.ipamRoutes()
	if err != nil {
		return nil, err
	}
	d := map[string]any{}
	maps.Copy(d, c.Delegate)
	if c.RuntimeConfig != nil {
		d["runtimeConfig"] = c.RuntimeConfig
	}
	d["name"] = net.Name
	setDefault(d, "type", "bridge")
	setDefault(d, "ipMasq", !*env.IPMasq)
	setDefault(d, "mtu", *env.MTU)
	if d["type"] == "bridge" {
		setDefault(d, "isGateway", true)
	}
	if net.CNIVersion != "" {
		d["cniVersion"] = net.CNIVersion
	}
	d["ipam"] = delegateIPAM(c.IPAM, env, routes)
	return d, nil
}

func delegateIPAM(conf map[string]any, env *SubnetEnv, routes []result.WireRoute) map[string]any {
	ipam := map[string]any{}
	maps.Copy(ipam, conf)
	setDefault(ipam, "type", "host-local")
	var ranges [][]map[string]any
	for _, sn := range []netip.Prefix{env.Subnet, env.IPv6Subnet} {
		if sn.IsValid() {
			ranges = append(ranges, []map[string]any{{"subnet": sn.String()}})
		}
	}
	ipam["ranges"] = ranges
	for _, nw := range slices.Concat(env.Networks, env.IPv6Networks) {
		routes = append(routes, result.WireRoute{Dst: nw.String()})
	}
	ipam["routes"] = routes
	return ipam
}

func setDefault(m map[string]any, key string, v any) {
	if _, ok := m[key]; !ok {
		m[key] = v
	}
}

// delegateType reads the type of a stored delegate config.
func delegateType(conf map[string]any) (string, error) {
	t, ok := conf["type"].(string)
	if !ok || t == "" || strings.ContainsRune(t, '/') {
		return "", fmt.Errorf("delegate config has no plugin type")
	}
	return t, nil
}
