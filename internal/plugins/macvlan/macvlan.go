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

	"github.com/cnikit/cni/internal/core/version"
	"github.com/cnikit/cni/internal/plugins/attachment"
	"github.com/cnikit/cni/internal/result"
	"github.com/cnikit/cni/internal/spec/skel"
)

// Plugin returns the macvlan plugin's registry entry.
func Plugin() *skel.Plugin {
	return &skel.Plugin{
		Name:     "macvlan",
		About:    "gives containers a macvlan interface of their own on a host interface",
		Versions: version.All(),
		Add:      add,
		Del:      attachment.Del,
		Check:    check,
		GC:       attachment.GC,
		Status:   status,
	}
}

func add(req *skel.Request) (*result.Result, error) {
	conf, err := load(req)
	if err != nil {
		return nil, err
	}
	return attachment.Add(req, conf.child())
}

// check verifies the container interface is a macvlan in the configured mode on the
// configured master, with the reported MAC, addresses and routes.
func check(req *skel.Request) error {
	conf, err := load(req)
	if err != nil {
		return err
	}
	return attachment.CheckChild(req, conf.child(), func(l netlink.Link) error {
		mv, ok := l.(*netlink.Macvlan)
		if !ok {
			return fmt.Errorf("is a %s, not a macvlan", l.Type())
		}
		if mv.Mode != conf.mode {
			return fmt.Errorf("macvlan mode %s, config says %s", modeName(mv.Mode), modeName(conf.mode))
		}
		return nil
	})
}

func status(req *skel.Request) error {
	if _, err := load(req); err != nil {
		return err
	}
	return attachment.Status(req)
}
