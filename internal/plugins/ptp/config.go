package ptp

import (
	"github.com/cnikit/cni/internal/cnierror"
	"github.com/cnikit/cni/internal/netfilter"
	"github.com/cnikit/cni/internal/skel"
)

// Config is the ptp plugin's configuration (the keys beyond the spec's common ones).
type Config struct {
	Name          string `json:"name"`
	IPMasq        bool   `json:"ipMasq"`
	IPMasqIPv4    *bool  `json:"ipMasqIPv4"`
	IPMasqIPv6    *bool  `json:"ipMasqIPv6"`
	IPMasqBackend string `json:"ipMasqBackend"`
	MTU           int    `json:"mtu"`

	// Derived by load: the masqueraded families (ipMasq, then the per-family overrides).
	masq4, masq6 bool
}

const (
	minMTU = 68 // the smallest MTU IPv4 allows
	maxMTU = 65535
)

// load parses and validates the config once.
func load(req *skel.Request) (*Config, error) {
	c, err := skel.LoadConfig[Config](req)
	if err != nil {
		return nil, err
	}
	if req.Net.IPAM.Type == "" {
		return nil, cnierror.New(cnierror.CodeInvalidConfig, "ipam: type is required: ptp needs addresses")
	}
	if c.MTU != 0 && (c.MTU < minMTU || c.MTU > maxMTU) {
		return nil, cnierror.Newf(cnierror.CodeInvalidConfig, "mtu: must be %d-%d, got %d", minMTU, maxMTU, c.MTU)
	}
	c.masq4, c.masq6 = c.IPMasq, c.IPMasq
	if c.IPMasqIPv4 != nil {
		c.masq4 = *c.IPMasqIPv4
	}
	if c.IPMasqIPv6 != nil {
		c.masq6 = *c.IPMasqIPv6
	}
	return c, nil
}

// masquerading reports whether any family is masqueraded.
func (c *Config) masquerading() bool { return c.masq4 || c.masq6 }

// backend resolves ipMasqBackend; detection (a netlink round trip) only happens when
// masquerading is on.
func (c *Config) backend() (netfilter.Backend, error) {
	if !c.masquerading() && c.IPMasqBackend == "" {
		return "", nil
	}
	return netfilter.Choose("ipMasqBackend", c.IPMasqBackend)
}
