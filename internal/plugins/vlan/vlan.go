// Package vlan is the vlan plugin: it gives the container an 802.1Q VLAN interface with
// the configured id on a master (a host interface; with linkInContainer, an interface
// inside the container), so the container's traffic leaves the master tagged. ADD
// creates the link straight inside the container and configures the addresses IPAM
// gives; DEL releases the addresses and deletes the link without looking at the master
// (the reference's DEL fails once the master is gone); CHECK verifies the link, its id,
// MTU and master, addresses and routes; GC and STATUS ask IPAM.
package vlan

import (
	"errors"
	"fmt"
	"syscall"

	"github.com/vishvananda/netlink"

	"github.com/cnikit/cni/internal/attachment"
	"github.com/cnikit/cni/internal/link"
	"github.com/cnikit/cni/internal/result"
	"github.com/cnikit/cni/internal/rollback"
	"github.com/cnikit/cni/internal/skel"
	"github.com/cnikit/cni/internal/version"
)

// Plugin returns the vlan plugin's registry entry.
func Plugin() *skel.Plugin {
	return &skel.Plugin{
		Name:     "vlan",
		About:    "gives containers an 802.1Q VLAN interface on a host interface",
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

	if _, err := link.CreateChild(master.NS, cont, conf.vlan(master), req.Args.IfName); err != nil {
		if errors.Is(err, syscall.EEXIST) {
			return nil, invalid("vlanId: %d is already in use on master %q", conf.VLANID, master.Name())
		}
		return nil, fmt.Errorf("vlan %d on %q: %w", conf.VLANID, master.Name(), err)
	}
	undo.Push("vlan", func() error { return cont.Delete(req.Args.IfName) })
	addrs, err := attachment.AddIPAM(req, &undo)
	if err != nil {
		return nil, err
	}
	return attachment.Finish(req, cont, addrs, attachment.Options{})
}

// check verifies the container interface is a VLAN with the configured id (and MTU, when
// set) on the configured master, with the reported MAC, addresses and routes.
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
		v, ok := l.(*netlink.Vlan)
		switch {
		case !ok:
			return fmt.Errorf("is a %s, not a vlan", l.Type())
		case v.VlanId != conf.VLANID:
			return fmt.Errorf("vlan id %d, config says %d", v.VlanId, conf.VLANID)
		case conf.MTU != 0 && v.MTU != conf.MTU:
			return fmt.Errorf("mtu %d, config says %d", v.MTU, conf.MTU)
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
