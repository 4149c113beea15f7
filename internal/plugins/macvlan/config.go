package macvlan

import (
	"net"

	"github.com/vishvananda/netlink"

	"github.com/cnikit/cni/internal/attachment"
	"github.com/cnikit/cni/internal/cnierror"
	"github.com/cnikit/cni/internal/skel"
)

// Config is the macvlan plugin's configuration (the keys beyond the spec's common ones).
type Config struct {
	// Master is the parent interface; "" takes the link of the default route.
	Master          string `json:"master"`
	Mode            string `json:"mode"`
	MTU             int    `json:"mtu"`
	MAC             string `json:"mac"`
	BCQueueLen      uint32 `json:"bcqueuelen"`
	LinkInContainer bool   `json:"linkInContainer"`

	RuntimeConfig struct {
		MAC string `json:"mac"`
	} `json:"runtimeConfig"`

	// Derived by load.
	mode netlink.MacvlanMode
	mac  net.HardwareAddr
}

// modes maps the config's mode names to the kernel's; "" is the default, bridge.
var modes = map[string]netlink.MacvlanMode{
	"":         netlink.MACVLAN_MODE_BRIDGE,
	"bridge":   netlink.MACVLAN_MODE_BRIDGE,
	"private":  netlink.MACVLAN_MODE_PRIVATE,
	"vepa":     netlink.MACVLAN_MODE_VEPA,
	"passthru": netlink.MACVLAN_MODE_PASSTHRU,
	"source":   netlink.MACVLAN_MODE_SOURCE,
}

func modeName(m netlink.MacvlanMode) string {
	for name, mode := range modes {
		if mode == m && name != "" {
			return name
		}
	}
	return "unknown"
}

func invalid(format string, a ...any) error {
	return cnierror.Newf(cnierror.CodeInvalidConfig, format, a...)
}

// load parses and validates the config without looking at the system: the master and
// its MTU are resolved by ADD and CHECK only. The MAC comes from the config, CNI_ARGS MAC
// and runtimeConfig.mac (the `mac` capability), later ones winning, as in the reference.
func load(req *skel.Request) (*Config, error) {
	c, err := skel.LoadConfig[Config](req)
	if err != nil {
		return nil, err
	}
	mode, ok := modes[c.Mode]
	if !ok {
		return nil, invalid("mode: unknown macvlan mode %q (bridge, private, vepa, passthru or source)", c.Mode)
	}
	c.mode = mode
	if err := attachment.ValidateMasterName(c.Master); err != nil {
		return nil, err
	}
	if err := attachment.ValidateMTU(c.MTU); err != nil {
		return nil, err
	}
	if err := c.resolveMAC(req.Args.CNIArgs); err != nil {
		return nil, err
	}
	return c, nil
}

func (c *Config) resolveMAC(cniArgs string) error {
	args, err := skel.ParseCNIArgs(cniArgs, "MAC", "IP", "GATEWAY")
	if err != nil {
		return err
	}
	mac, field := c.MAC, "mac"
	if args["MAC"] != "" {
		mac, field = args["MAC"], "CNI_ARGS MAC"
	}
	if c.RuntimeConfig.MAC != "" {
		mac, field = c.RuntimeConfig.MAC, "runtimeConfig.mac"
	}
	if mac == "" {
		return nil
	}
	hw, err := net.ParseMAC(mac)
	switch {
	case err != nil || len(hw) != 6:
		return invalid("%s: %q is not an Ethernet MAC address", field, mac)
	case hw[0]&1 != 0:
		return invalid("%s: %q is a multicast address", field, mac)
	}
	c.mac = hw
	return nil
}

// macvlan describes the macvlan to create on master.
func (c *Config) macvlan(master *attachment.Master) *netlink.Macvlan {
	return &netlink.Macvlan{
		LinkAttrs:  netlink.LinkAttrs{ParentIndex: master.Index(), MTU: c.MTU, HardwareAddr: c.mac},
		Mode:       c.mode,
		BCQueueLen: c.BCQueueLen,
	}
}
