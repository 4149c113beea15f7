// Package static is the static IPAM plugin: it returns the addresses, routes and DNS
// written in the config (or given through CNI_ARGS, args or the ips capability) and
// keeps no state. CHECK verifies that prevResult carries every configured address.
package static

import (
	"fmt"
	"slices"
	"strings"

	"github.com/cnikit/cni/internal/core/cnierror"
	"github.com/cnikit/cni/internal/core/version"
	"github.com/cnikit/cni/internal/ipam/ipamconf"
	"github.com/cnikit/cni/internal/result"
	"github.com/cnikit/cni/internal/spec/skel"
)

// Plugin returns the static registry entry.
func Plugin() *skel.Plugin {
	return &skel.Plugin{
		Name:     "static",
		About:    "assigns the addresses given in the config",
		Versions: version.All(),
		Add:      add,
		Del:      func(*skel.Request) error { return nil }, // nothing was reserved
		Check:    check,
	}
}

type addressJSON struct {
	Address string `json:"address"`
	Gateway string `json:"gateway,omitempty"`
}

type netJSON struct {
	CNIVersion string `json:"cniVersion"`
	IPAM       *struct {
		Addresses []addressJSON    `json:"addresses,omitempty"`
		Routes    []ipamconf.Route `json:"routes,omitempty"`
		DNS       skel.DNS         `json:"dns,omitempty"`
	} `json:"ipam"`
	RuntimeConfig struct {
		IPs []string `json:"ips,omitempty"`
	} `json:"runtimeConfig"`
	Args *ipamconf.Args `json:"args,omitempty"`
}

// config is the validated static configuration.
type config struct {
	IPs    []result.IPConfig
	Routes []result.Route
	DNS    result.DNS
}

func add(req *skel.Request) (*result.Result, error) {
	c, err := loadConfig(req)
	if err != nil {
		return nil, err
	}
	return &result.Result{CNIVersion: req.Net.CNIVersion, IPs: c.IPs, Routes: c.Routes, DNS: c.DNS}, nil
}

// check fails unless every configured address (and its gateway, when one is set) is
// in prevResult.
func check(req *skel.Request) error {
	if req.PrevResult == nil {
		return cnierror.New(cnierror.CodeInvalidConfig, "prevResult: required prevResult missing")
	}
	c, err := loadConfig(req)
	if err != nil {
		return err
	}
	for _, want := range c.IPs {
		if !slices.ContainsFunc(req.PrevResult.IPs, func(ip result.IPConfig) bool {
			return ip.Address == want.Address && (!want.Gateway.IsValid() || ip.Gateway == want.Gateway)
		}) {
			return fmt.Errorf("static: failed to find address %s added", want.Address)
		}
	}
	return nil
}

// Validate checks an ADD's config as ADD reads it: for a main plugin to call before it
// makes anything (ipam.Validate).
func Validate(req *skel.Request) error {
	_, err := loadConfig(req)
	return err
}

// loadConfig reads the addresses (see addresses), routes and DNS of the config.
func loadConfig(req *skel.Request) (*config, error) {
	raw, err := skel.LoadConfig[netJSON](req)
	if err != nil {
		return nil, err
	}
	if raw.IPAM == nil {
		return nil, cnierror.New(cnierror.CodeInvalidConfig, "ipam: IPAM config missing 'ipam' key")
	}
	c := &config{DNS: raw.IPAM.DNS.Result()}
	if c.Routes, err = ipamconf.Routes("ipam.routes", raw.IPAM.Routes); err != nil {
		return nil, err
	}
	if err := c.addresses(raw, req.Args.CNIArgs); err != nil {
		return nil, err
	}
	v4 := 0
	for _, ip := range c.IPs {
		if ip.Address.Addr().Is4() {
			v4++
		}
	}
	if (v4 > 1 || len(c.IPs)-v4 > 1) && !version.AtLeast(version.OrDefault(raw.CNIVersion), "0.3.0") {
		return nil, cnierror.Newf(cnierror.CodeInvalidConfig,
			"ipam.addresses: CNI version %s does not support more than 1 address per family", raw.CNIVersion)
	}
	return c, nil
}

// addresses reads ipam.addresses, then appends CNI_ARGS IP= (comma list) and applies
// GATEWAY= to every address whose subnet holds it; args.cni.ips and then
// runtimeConfig.ips replace the list, as the reference orders them.
func (c *config) addresses(raw *netJSON, cniArgs string) (err error) {
	for i, a := range raw.IPAM.Addresses {
		ip, err := parseAddress(ipamconf.Field("ipam.addresses", i), a)
		if err != nil {
			return err
		}
		c.IPs = append(c.IPs, ip)
	}
	if err := applyCNIArgs(c, cniArgs); err != nil {
		return err
	}
	if raw.Args != nil && raw.Args.CNI != nil && len(raw.Args.CNI.IPs) > 0 {
		if c.IPs, err = parseCIDRs("args.cni.ips", raw.Args.CNI.IPs); err != nil {
			return err
		}
	}
	if len(raw.RuntimeConfig.IPs) > 0 {
		c.IPs, err = parseCIDRs("runtimeConfig.ips", raw.RuntimeConfig.IPs)
	}
	return err
}

func parseAddress(field string, a addressJSON) (result.IPConfig, error) {
	p, err := ipamconf.ParseCIDR(field+".address", a.Address)
	if err != nil {
		return result.IPConfig{}, err
	}
	ip := result.IPConfig{Address: p}
	if a.Gateway != "" {
		if ip.Gateway, err = ipamconf.ParseAddr(field+".gateway", a.Gateway); err != nil {
			return result.IPConfig{}, err
		}
	}
	return ip, nil
}

func parseCIDRs(field string, in []string) ([]result.IPConfig, error) {
	out := make([]result.IPConfig, 0, len(in))
	for i, s := range in {
		p, err := ipamconf.ParseCIDR(ipamconf.Field(field, i), strings.TrimSpace(s))
		if err != nil {
			return nil, err
		}
		out = append(out, result.IPConfig{Address: p})
	}
	return out, nil
}

// applyCNIArgs appends IP=a/b,c/d and sets GATEWAY=x,y on the addresses holding them.
func applyCNIArgs(c *config, raw string) error {
	args, err := skel.ParseCNIArgs(raw, "IP", "GATEWAY")
	if err != nil {
		return err
	}
	if s := args["IP"]; s != "" {
		ips, err := parseCIDRs("CNI_ARGS IP", strings.Split(s, ","))
		if err != nil {
			return err
		}
		c.IPs = append(c.IPs, ips...)
	}
	if s := args["GATEWAY"]; s != "" {
		for _, g := range strings.Split(s, ",") {
			gw, err := ipamconf.ParseAddr("CNI_ARGS GATEWAY", strings.TrimSpace(g))
			if err != nil {
				return err
			}
			for i := range c.IPs {
				if c.IPs[i].Address.Masked().Contains(gw) {
					c.IPs[i].Gateway = gw
				}
			}
		}
	}
	return nil
}
