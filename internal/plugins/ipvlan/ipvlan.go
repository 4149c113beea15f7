// Package ipvlan is the ipvlan plugin: it gives the container an ipvlan interface on a
// master (the config's; when chained, the single interface of the prevResult; else the
// link of the default route; with linkInContainer, an interface inside the container).
// ipvlan children share the master's MAC and are told apart by address, in mode l2, l3
// or l3s. ADD creates the link straight inside the container and configures the
// addresses IPAM gives, or, without IPAM, those the prevResult carries; DEL releases the
// addresses and deletes the link without resolving any master; CHECK verifies the link,
// its mode and master, addresses and routes; GC and STATUS ask IPAM.
package ipvlan

import (
	"fmt"

	"github.com/vishvananda/netlink"

	"github.com/cnikit/cni/internal/plugins/attachment"
	"github.com/cnikit/cni/internal/plugins/onelink"
	"github.com/cnikit/cni/internal/spec/skel"
)

// Plugin returns the ipvlan plugin's registry entry.
func Plugin() *skel.Plugin {
	return onelink.Plugin(onelink.Member[*Config]{
		Name:  "ipvlan",
		About: "gives containers an ipvlan interface (l2, l3 or l3s) on a host interface",
		Load:  load,
		Link:  onelink.OnMaster[*Config]{Child: (*Config).child, Chained: chained, Verify: verify},
	})
}

// chained completes the child for ADD: without IPAM, it takes the prevResult's
// addresses, and without a configured master, the prevResult's single interface.
func chained(req *skel.Request, conf *Config, c attachment.Child) (_ attachment.Child, err error) {
	if c.FromPrevResult, err = addressesFromPrev(req); err != nil {
		return c, err
	}
	c.Master, err = conf.masterName(req.PrevResult)
	return c, err
}

// verify checks that the container interface is an ipvlan in the configured mode; the
// skeleton checks that its master still exists (the configured one, when the config
// names it), and its addresses and routes.
func verify(conf *Config, l netlink.Link) error {
	iv, ok := l.(*netlink.IPVlan)
	if !ok {
		return fmt.Errorf("is a %s, not an ipvlan", l.Type())
	}
	if iv.Mode != conf.mode {
		return fmt.Errorf("ipvlan mode %s, config says %s", modeName(iv.Mode), modeName(conf.mode))
	}
	return nil
}
