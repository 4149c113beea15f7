// Package macvlan is the macvlan plugin: it gives the container a macvlan interface on a
// master (a host interface, by default the one of the default route; with
// linkInContainer, an interface inside the container), with a MAC of its own, so the
// container sits directly on the master's network. ADD creates the link straight inside
// the container, asks IPAM for addresses (optional: "ipam": {} gives the bare link) and
// configures them; DEL releases the addresses and deletes the link without looking at
// the master, which may be gone; CHECK verifies the link, its mode and master, addresses
// and routes; GC and STATUS ask IPAM.
package macvlan

import (
	"fmt"

	"github.com/vishvananda/netlink"

	"github.com/cnikit/cni/internal/plugins/onelink"
	"github.com/cnikit/cni/internal/spec/skel"
)

// Plugin returns the macvlan plugin's registry entry.
func Plugin() *skel.Plugin {
	return onelink.Plugin(onelink.Member[*Config]{
		Name:  "macvlan",
		About: "gives containers a macvlan interface of their own on a host interface",
		Load:  load,
		Link:  onelink.OnMaster[*Config]{Child: (*Config).child, Verify: verify},
	})
}

// verify checks that the container interface is a macvlan in the configured mode; the
// skeleton checks its master, MAC, addresses and routes.
func verify(conf *Config, l netlink.Link) error {
	mv, ok := l.(*netlink.Macvlan)
	if !ok {
		return fmt.Errorf("is a %s, not a macvlan", l.Type())
	}
	if mv.Mode != conf.mode {
		return fmt.Errorf("macvlan mode %s, config says %s", modeName(mv.Mode), modeName(conf.mode))
	}
	return nil
}
