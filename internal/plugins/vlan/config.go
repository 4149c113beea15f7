package vlan

import (
	"errors"
	"fmt"
	"syscall"

	"github.com/vishvananda/netlink"

	"github.com/cnikit/cni/internal/core/cnierror"
	"github.com/cnikit/cni/internal/plugins/attachment"
	"github.com/cnikit/cni/internal/plugins/onelink"
	"github.com/cnikit/cni/internal/spec/skel"
)

// Config is the vlan plugin's configuration (the keys beyond the spec's common ones).
type Config struct {
	Master          string `json:"master"`
	VLANID          int    `json:"vlanId"`
	MTU             int    `json:"mtu"`
	LinkInContainer bool   `json:"linkInContainer"`
}

// maxVLANID is the largest 802.1Q id a link can carry (4095 is reserved).
const maxVLANID = 4094

// load parses and validates the config without looking at the system: the master and
// its MTU are resolved by ADD and CHECK only, so DEL works after the master is gone.
func load(req *skel.Request) (*Config, error) {
	c, err := skel.LoadConfig[Config](req)
	if err != nil {
		return nil, err
	}
	switch {
	case c.Master == "":
		return nil, cnierror.Invalid("master: required: the interface to create the VLAN on")
	case c.VLANID < 0 || c.VLANID > maxVLANID:
		return nil, cnierror.Invalid("vlanId: must be 0-%d, got %d", maxVLANID, c.VLANID)
	case req.Net.IPAM.Type == "":
		return nil, cnierror.Invalid("ipam: type is required: vlan configures the addresses IPAM gives")
	}
	return c, onelink.ValidateMaster(c.Master, c.MTU)
}

// child is the 802.1Q link to create on the master; an id already taken on the master is
// the config's fault (code 7).
func (c *Config) child() attachment.Child {
	return attachment.Child{
		Kind: fmt.Sprintf("vlan %d", c.VLANID), Master: c.Master, InContainer: c.LinkInContainer, MTU: c.MTU,
		Make: func(master *attachment.Master) netlink.Link {
			return &netlink.Vlan{LinkAttrs: attachment.ChildAttrs(master, c.MTU), VlanId: c.VLANID}
		},
		CreateError: func(master *attachment.Master, err error) error {
			if errors.Is(err, syscall.EEXIST) {
				return cnierror.Invalid("vlanId: %d is already in use on master %q", c.VLANID, master.Name())
			}
			return nil
		},
	}
}
