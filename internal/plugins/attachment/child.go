package attachment

import (
	"fmt"

	"github.com/vishvananda/netlink"

	"github.com/cnikit/cni/internal/core/rollback"
	"github.com/cnikit/cni/internal/host/link"
	"github.com/cnikit/cni/internal/result"
	"github.com/cnikit/cni/internal/spec/skel"
)

// Child is the link a plugin gives the container on a master (macvlan, ipvlan, vlan).
type Child struct {
	// Kind names the link in errors and undo steps ("macvlan", "vlan 100").
	Kind string
	// Master is the configured master ("" for the interface of the default route), in
	// the container's namespace with InContainer (linkInContainer).
	Master      string
	InContainer bool
	// MTU is the configured MTU (0: the kernel's), at most the master's.
	MTU int
	// Make builds the link to create on the master.
	Make func(*Master) netlink.Link
	// CreateError, when set, may give a failed creation a meaning of its own (nil: the
	// error as it is).
	CreateError func(*Master, error) error
	// FromPrevResult configures the prevResult's addresses instead of IPAM's.
	FromPrevResult bool
	Options        Options
}

// ChildAttrs are the attributes of a child of master with the configured MTU (0: the
// kernel's); every other attribute is the kernel's default (NewLinkAttrs: a literal
// would set txqueuelen 0).
func ChildAttrs(master *Master, mtu int) netlink.LinkAttrs {
	attrs := netlink.NewLinkAttrs()
	attrs.ParentIndex, attrs.MTU = master.Index(), mtu
	return attrs
}

// Add is the ADD of such a plugin: the child is created straight inside the container
// (link.CreateChild), addressed and reported by Finish; a failure undoes the link and
// the IPAM reservation.
func Add(req *skel.Request, c Child) (_ *result.Result, err error) {
	ns, err := Open(req, !c.FromPrevResult)
	if err != nil {
		return nil, err
	}
	defer ns.Close()
	cont := ns.Cont

	master, err := FindMaster(MasterNS(ns.Host, cont, c.InContainer), c.Master)
	if err != nil {
		return nil, err
	}
	if err := master.CheckMTU(c.MTU); err != nil {
		return nil, err
	}

	var undo rollback.Stack
	defer undo.OnError(&err)

	if _, err := link.CreateChild(master.NS, cont, c.Make(master), req.Args.IfName); err != nil {
		if c.CreateError != nil {
			if meant := c.CreateError(master, err); meant != nil {
				return nil, meant
			}
		}
		return nil, fmt.Errorf("%s on %q: %w", c.Kind, master.Name(), err)
	}
	undo.Push(c.Kind, func() error { return cont.Delete(req.Args.IfName) })
	addrs := req.PrevResult
	if !c.FromPrevResult {
		if addrs, err = AddIPAM(req, &undo); err != nil {
			return nil, err
		}
	}
	return Finish(req, cont, addrs, c.Options)
}

// CheckChild is the CHECK of such a plugin: Check, with kind (the plugin's test of its
// link's type and settings) and the master the link hangs off.
func CheckChild(req *skel.Request, c Child, kind func(netlink.Link) error) error {
	ns, err := Open(req, false)
	if err != nil {
		return err
	}
	defer ns.Close()
	return Check(req, ns.Cont, func(l netlink.Link) error {
		if err := kind(l); err != nil {
			return err
		}
		return CheckParent(MasterNS(ns.Host, ns.Cont, c.InContainer), l, c.Master)
	})
}
