package ptp

import (
	"fmt"

	"github.com/cnikit/cni/internal/core/cnierror"
	"github.com/cnikit/cni/internal/host/masq"
	"github.com/cnikit/cni/internal/spec/skel"
)

// Config is the ptp plugin's configuration (the keys beyond the spec's common ones).
type Config struct {
	Name        string `json:"name"`
	masq.Config        // ipMasq, ipMasqIPv4, ipMasqIPv6, ipMasqBackend
	MTU         int    `json:"mtu"`
}

const (
	minMTU = 68 // the smallest MTU IPv4 allows
	maxMTU = 65535
)

// loadForDel reads the masquerade keys only, validating nothing else. A value of the
// wrong type cannot tell whether ADD masqueraded, so the masquerade is torn down:
// removing what is not there is harmless, leaving what is there is a leak.
func loadForDel(req *skel.Request) masq.Config {
	c, err := skel.LoadConfig[masq.Config](req)
	if err != nil {
		fmt.Fprintf(req.Stderr, "ptp: %v; tearing down masquerade anyway\n", err)
		return masq.Config{IPMasq: true}
	}
	return *c
}

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
	return c, nil
}
