package tap

import (
	"net"
	"strings"

	"github.com/cnikit/cni/internal/core/cnierror"
	"github.com/cnikit/cni/internal/plugins/onelink"
	"github.com/cnikit/cni/internal/spec/skel"
)

// Config is the tap plugin's configuration (the keys beyond the spec's common ones).
type Config struct {
	MAC string `json:"mac"`
	MTU int    `json:"mtu"`
	// SelinuxContext is the SELinux context the tap is created under. The reference's
	// documentation spells it "selinuxcontext": Go's JSON key matching is case-blind,
	// so both spellings land here.
	SelinuxContext string  `json:"selinuxContext"`
	MultiQueue     bool    `json:"multiQueue"`
	Owner          *uint32 `json:"owner"`
	Group          *uint32 `json:"group"`
	// Bridge is an existing bridge inside the container netns to enslave the tap to.
	Bridge string `json:"bridge"`

	RuntimeConfig struct {
		MAC string `json:"mac"`
	} `json:"runtimeConfig"`

	// mac is the resolved MAC, nil to let the kernel choose.
	mac net.HardwareAddr
}

const (
	minMTU = 68 // the smallest MTU IPv4 allows
	maxMTU = 65535
	// maxContext bounds selinuxContext: the kernel takes a page at most.
	maxContext = 4095
)

// load parses and validates the config once, resolving the MAC from the config,
// CNI_ARGS MAC= and runtimeConfig.mac (later ones win, as in the reference).
func load(req *skel.Request) (*Config, error) {
	c, err := skel.LoadConfig[Config](req)
	if err != nil {
		return nil, err
	}
	if c.MTU != 0 && (c.MTU < minMTU || c.MTU > maxMTU) {
		return nil, cnierror.Invalid("mtu: must be %d-%d, got %d", minMTU, maxMTU, c.MTU)
	}
	if c.Bridge != "" {
		if err := skel.ValidateIfNameField("bridge", c.Bridge); err != nil {
			return nil, err
		}
	}
	if err := validContext(c.SelinuxContext); err != nil {
		return nil, err
	}
	c.mac, err = onelink.ContainerMAC(req.Args.CNIArgs, c.MAC, c.RuntimeConfig.MAC, "MAC")
	return c, err
}

// validContext accepts "user:role:type[:level]" in printable ASCII: the value is
// written to a /proc file.
func validContext(s string) error {
	if s == "" {
		return nil
	}
	if len(s) > maxContext || strings.Count(s, ":") < 2 {
		return cnierror.Invalid("selinuxContext: %q is not an SELinux context (user:role:type:level)", s)
	}
	for i := 0; i < len(s); i++ {
		if s[i] <= ' ' || s[i] > '~' {
			return cnierror.Invalid("selinuxContext: invalid character %q", s[i])
		}
	}
	return nil
}
