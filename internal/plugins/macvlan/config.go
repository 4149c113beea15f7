package macvlan

import (
	"errors"
	"net"
	"syscall"

	"github.com/vishvananda/netlink"

	"github.com/cnikit/cni/internal/core/cnierror"
	"github.com/cnikit/cni/internal/plugins/attachment"
	"github.com/cnikit/cni/internal/plugins/onelink"
	"github.com/cnikit/cni/internal/spec/skel"
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

// modeNames are the config's mode names, in the order of the kernel's modes; "" is the
// default, bridge. An array, not a map: a package-level map is built at every exec.
var modeNames = [...]string{
	netlink.MACVLAN_MODE_DEFAULT:  "",
	netlink.MACVLAN_MODE_PRIVATE:  "private",
	netlink.MACVLAN_MODE_VEPA:     "vepa",
	netlink.MACVLAN_MODE_BRIDGE:   "bridge",
	netlink.MACVLAN_MODE_PASSTHRU: "passthru",
	netlink.MACVLAN_MODE_SOURCE:   "source",
}

func modeName(m netlink.MacvlanMode) string { return onelink.ModeName(modeNames[:], m) }

// load parses and validates the config without looking at the system: the master and
// its MTU are resolved by ADD and CHECK only. The MAC comes from the config, CNI_ARGS MAC
// and runtimeConfig.mac (the `mac` capability), later ones winning, as in the reference.
func load(req *skel.Request) (*Config, error) {
	c, err := skel.LoadConfig[Config](req)
	if err != nil {
		return nil, err
	}
	c.mode, err = onelink.ParseMode(modeNames[:], c.Mode, netlink.MACVLAN_MODE_BRIDGE, "macvlan", "bridge, private, vepa, passthru or source")
	if err != nil {
		return nil, err
	}
	if err := onelink.ValidateMaster(c.Master, c.MTU); err != nil {
		return nil, err
	}
	c.mac, err = onelink.ContainerMAC(req.Args.CNIArgs, c.MAC, c.RuntimeConfig.MAC, "MAC", "IP", "GATEWAY")
	return c, err
}

// child is the macvlan to create on the master.
func (c *Config) child() attachment.Child {
	return attachment.Child{
		Kind: "macvlan", Master: c.Master, InContainer: c.LinkInContainer, MTU: c.MTU,
		Make: func(master *attachment.Master) netlink.Link {
			attrs := attachment.ChildAttrs(master, c.MTU)
			attrs.HardwareAddr = c.mac
			return &netlink.Macvlan{LinkAttrs: attrs, Mode: c.mode, BCQueueLen: c.BCQueueLen}
		},
		CreateError: func(master *attachment.Master, err error) error {
			if errors.Is(err, syscall.EINVAL) {
				// Its reasons are the master's kind (not Ethernet) and passthru's rule:
				// such a macvlan must be its master's only one.
				return cnierror.Invalid("mode, master: the kernel refuses a %s macvlan on %q (%v): a master must be an Ethernet device, and a passthru macvlan its master's only macvlan",
					modeName(c.mode), master.Name(), err)
			}
			return nil
		},
		Options: attachment.Options{Notify: true},
	}
}
