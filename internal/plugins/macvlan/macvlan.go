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

	"github.com/cnikit/cni/internal/attachment"
	"github.com/cnikit/cni/internal/link"
	"github.com/cnikit/cni/internal/result"
	"github.com/cnikit/cni/internal/rollback"
	"github.com/cnikit/cni/internal/skel"
	"github.com/cnikit/cni/internal/version"
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

func add(req *skel.Request) (_ *result.Result, err error) {
	conf, err := load(req)
	if err != nil {
		return nil, err
	}
	host, cont, err := link.OpenPair(req.Args.Netns)
	if err != nil {
		return nil, err
	}
	defer host.Close()
	defer cont.Close()

	master, err := attachment.FindMaster(attachment.MasterNS(host, cont, conf.LinkInContainer), conf.Master)
	if err != nil {
		return nil, err
	}
	if err := master.CheckMTU(conf.MTU); err != nil {
		return nil, err
	}

	var undo rollback.Stack
	defer undo.OnError(&err)

	if _, err := link.CreateChild(master.NS, cont, conf.macvlan(master), req.Args.IfName); err != nil {
		return nil, fmt.Errorf("macvlan on %q: %w", master.Name(), err)
	}
	undo.Push("macvlan", func() error { return cont.Delete(req.Args.IfName) })
	addrs, err := attachment.AddIPAM(req, &undo)
	if err != nil {
		return nil, err
	}
	return attachment.Finish(req, cont, addrs, attachment.Options{Notify: true})
}

// check verifies the container interface is a macvlan in the configured mode on the
// configured master, with the reported MAC, addresses and routes.
func check(req *skel.Request) error {
	conf, err := load(req)
	if err != nil {
		return err
	}
	host, cont, err := link.OpenPair(req.Args.Netns)
	if err != nil {
		return err
	}
	defer host.Close()
	defer cont.Close()
	return attachment.Check(req, cont, func(l netlink.Link) error {
		mv, ok := l.(*netlink.Macvlan)
		if !ok {
			return fmt.Errorf("is a %s, not a macvlan", l.Type())
		}
		if mv.Mode != conf.mode {
			return fmt.Errorf("macvlan mode %s, config says %s", modeName(mv.Mode), modeName(conf.mode))
		}
		return attachment.CheckParent(attachment.MasterNS(host, cont, conf.LinkInContainer), l, conf.Master)
	})
}

func status(req *skel.Request) error {
	if _, err := load(req); err != nil {
		return err
	}
	return attachment.Status(req)
}
