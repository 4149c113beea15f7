// Package vlan is the vlan plugin: it gives the container an 802.1Q VLAN interface with
// the configured id on a master (a host interface; with linkInContainer, an interface
// inside the container), so the container's traffic leaves the master tagged. ADD
// creates the link straight inside the container and configures the addresses IPAM
// gives; DEL releases the addresses and deletes the link without looking at the master
// (the reference's DEL fails once the master is gone); CHECK verifies the link, its id,
// MTU and master, addresses and routes; GC and STATUS ask IPAM.
package vlan

import (
	"fmt"

	"github.com/vishvananda/netlink"

	"github.com/cnikit/cni/internal/plugins/onelink"
	"github.com/cnikit/cni/internal/spec/skel"
)

// Plugin returns the vlan plugin's registry entry.
func Plugin() *skel.Plugin {
	return onelink.Plugin(onelink.Member[*Config]{
		Name:  "vlan",
		About: "gives containers an 802.1Q VLAN interface on a host interface",
		Load:  load,
		Link:  onelink.OnMaster[*Config]{Child: (*Config).child, Verify: verify},
	})
}

// verify checks that the container interface is a VLAN with the configured id (and
// MTU, when set); the skeleton checks its master, MAC, addresses and routes.
func verify(conf *Config, l netlink.Link) error {
	v, ok := l.(*netlink.Vlan)
	switch {
	case !ok:
		return fmt.Errorf("is a %s, not a vlan", l.Type())
	case v.VlanId != conf.VLANID:
		return fmt.Errorf("vlan id %d, config says %d", v.VlanId, conf.VLANID)
	case conf.MTU != 0 && v.MTU != conf.MTU:
		return fmt.Errorf("mtu %d, config says %d", v.MTU, conf.MTU)
	}
	return nil
}
