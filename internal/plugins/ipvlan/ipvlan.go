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

	"github.com/cnikit/cni/internal/attachment"
	"github.com/cnikit/cni/internal/link"
	"github.com/cnikit/cni/internal/result"
	"github.com/cnikit/cni/internal/rollback"
	"github.com/cnikit/cni/internal/skel"
	"github.com/cnikit/cni/internal/version"
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

func add(req *skel.Request) (_ *result.Result, err error) {
	conf, err := load(req)
	if err != nil {
		return nil, err
	}
	fromPrev, err := addressesFromPrev(req)
	if err != nil {
		return nil, err
	}
	masterName, err := conf.masterName(req.PrevResult)
	if err != nil {
		return nil, err
	}
	host, cont, err := link.OpenPair(req.Args.Netns)
	if err != nil {
		return nil, err
	}
	defer host.Close()
	defer cont.Close()

	master, err := attachment.FindMaster(attachment.MasterNS(host, cont, conf.LinkInContainer), masterName)
	if err != nil {
		return nil, err
	}
	if err := master.CheckMTU(conf.MTU); err != nil {
		return nil, err
	}

	var undo rollback.Stack
	defer undo.OnError(&err)

	if _, err := link.CreateChild(master.NS, cont, conf.ipvlan(master), req.Args.IfName); err != nil {
		return nil, fmt.Errorf("ipvlan on %q: %w", master.Name(), err)
	}
	undo.Push("ipvlan", func() error { return cont.Delete(req.Args.IfName) })
	addrs := req.PrevResult
	if !fromPrev {
		if addrs, err = attachment.AddIPAM(req, &undo); err != nil {
			return nil, err
		}
	}
	return attachment.Finish(req, cont, addrs, attachment.Options{Notify: true})
}

// check verifies the container interface is an ipvlan in the configured mode on a
// master that still exists (the configured one, when the config names it), with the
// reported addresses and routes.
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
		iv, ok := l.(*netlink.IPVlan)
		if !ok {
			return fmt.Errorf("is a %s, not an ipvlan", l.Type())
		}
		if iv.Mode != conf.mode {
			return fmt.Errorf("ipvlan mode %s, config says %s", modeName(iv.Mode), modeName(conf.mode))
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
