package ipvlan

import (
	"github.com/vishvananda/netlink"

	"github.com/cnikit/cni/internal/core/cnierror"
	"github.com/cnikit/cni/internal/plugins/attachment"
	"github.com/cnikit/cni/internal/plugins/onelink"
	"github.com/cnikit/cni/internal/result"
	"github.com/cnikit/cni/internal/spec/skel"
)

// Config is the ipvlan plugin's configuration (the keys beyond the spec's common ones).
type Config struct {
	// Master is the parent interface; "" takes the single interface of the prevResult
	// when chained, else the link of the default route.
	Master          string `json:"master"`
	Mode            string `json:"mode"`
	MTU             int    `json:"mtu"`
	LinkInContainer bool   `json:"linkInContainer"`

	// Derived by load.
	mode netlink.IPVlanMode
}

// modeNames are the config's mode names, in the order of the kernel's modes
// (IPVLAN_MODE_L2, L3, L3S); "" is the default, l2.
var modeNames = [...]string{netlink.IPVLAN_MODE_L2: "l2", netlink.IPVLAN_MODE_L3: "l3", netlink.IPVLAN_MODE_L3S: "l3s"}

func modeName(m netlink.IPVlanMode) string { return onelink.ModeName(modeNames[:], m) }

// load parses and validates the config without looking at the system: the master and
// its MTU are resolved by ADD and CHECK only.
func load(req *skel.Request) (*Config, error) {
	c, err := skel.LoadConfig[Config](req)
	if err != nil {
		return nil, err
	}
	if c.mode, err = onelink.ParseMode(modeNames[:], c.Mode, netlink.IPVLAN_MODE_L2, "ipvlan", "l2, l3 or l3s"); err != nil {
		return nil, err
	}
	return c, onelink.ValidateMaster(c.Master, c.MTU)
}

// masterName returns the master to use for ADD: the config's, else, when chained, the
// single interface the prevResult names ("" leaves it to the default route).
func (c *Config) masterName(prev *result.Result) (string, error) {
	if c.Master != "" || prev == nil {
		return c.Master, nil
	}
	if len(prev.Interfaces) != 1 || prev.Interfaces[0].Name == "" {
		return "", cnierror.Invalid("master: not set, and the prevResult names %d interfaces, not the single one a chained ipvlan takes as master",
			len(prev.Interfaces))
	}
	name := prev.Interfaces[0].Name
	if err := attachment.ValidateMasterName(name); err != nil {
		return "", err
	}
	return name, nil
}

// addressesFromPrev reports whether ADD applies the prevResult's addresses instead of
// asking IPAM: only without an IPAM type, and only when there are some. Without either
// there is nothing to configure the interface with.
func addressesFromPrev(req *skel.Request) (bool, error) {
	if req.Net.IPAM.Type != "" {
		return false, nil
	}
	if req.PrevResult == nil || len(req.PrevResult.IPs) == 0 {
		return false, cnierror.Invalid("ipam: type is required unless the prevResult carries IP addresses")
	}
	return true, nil
}

// child is the ipvlan to create on the master, with the configured master (a chained
// ADD may take it from the prevResult instead).
func (c *Config) child() attachment.Child {
	return attachment.Child{
		Kind: "ipvlan", Master: c.Master, InContainer: c.LinkInContainer, MTU: c.MTU,
		Make: func(master *attachment.Master) netlink.Link {
			return &netlink.IPVlan{LinkAttrs: attachment.ChildAttrs(master, c.MTU), Mode: c.mode}
		},
		Options: attachment.Options{Notify: true},
	}
}
