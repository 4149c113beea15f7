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

	"github.com/cnikit/cni/internal/core/version"
	"github.com/cnikit/cni/internal/plugins/attachment"
	"github.com/cnikit/cni/internal/result"
	"github.com/cnikit/cni/internal/spec/skel"
)

// Plugin returns the ipvlan plugin's registry entry.
func Plugin() *skel.Plugin {
	return &skel.Plugin{
		Name:     "ipvlan",
		About:    "gives containers an ipvlan interface (l2, l3 or l3s) on a host interface",
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
	c := conf.child()
	if c.FromPrevResult, err = addressesFromPrev(req); err != nil {
		return nil, err
	}
	if c.Master, err = conf.masterName(req.PrevResult); err != nil {
		return nil, err
	}
	return attachment.Add(req, c)
}

// check verifies the container interface is an ipvlan in the configured mode on a
// master that still exists (the configured one, when the config names it), with the
// reported addresses and routes.
func check(req *skel.Request) error {
	conf, err := load(req)
	if err != nil {
		return err
	}
	return attachment.CheckChild(req, conf.child(), func(l netlink.Link) error {
		iv, ok := l.(*netlink.IPVlan)
		if !ok {
			return fmt.Errorf("is a %s, not an ipvlan", l.Type())
		}
		if iv.Mode != conf.mode {
			return fmt.Errorf("ipvlan mode %s, config says %s", modeName(iv.Mode), modeName(conf.mode))
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
