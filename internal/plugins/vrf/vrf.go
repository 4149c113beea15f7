// Package vrf is the vrf plugin: a chained plugin that puts the container interface into
// a VRF (an l3mdev with its own routing table) inside the container, creating the VRF on
// first use. Enslaving makes the kernel move the interface's subnet routes into the
// VRF's table but drop its gateway routes and, without keep_addr_on_down, its IPv6
// addresses; the plugin puts both back. DEL takes the interface out and deletes the VRF
// once no member is left.
//
// On a kernel without VRF support ADD fails with code 11 and creates nothing; unlike the
// reference, DEL is idempotent when the VRF or the interface is already gone, and ADD,
// DEL of one namespace are serialised so that a DEL deleting an empty VRF cannot race
// an ADD joining it.
package vrf

import (
	"errors"
	"fmt"
	"slices"
	"syscall"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/cnikit/cni/internal/core/cnierror"
	"github.com/cnikit/cni/internal/core/rollback"
	"github.com/cnikit/cni/internal/core/version"
	"github.com/cnikit/cni/internal/host/link"
	"github.com/cnikit/cni/internal/host/nlconn"
	"github.com/cnikit/cni/internal/plugins/lockedns"
	"github.com/cnikit/cni/internal/result"
	"github.com/cnikit/cni/internal/spec/skel"
)

// Plugin returns the vrf plugin's registry entry.
func Plugin() *skel.Plugin {
	return &skel.Plugin{
		Name:     "vrf",
		About:    "puts the container interface into a VRF inside the container",
		Versions: version.From("0.3.1"),
		Add:      add,
		Del:      del,
		Check:    check,
	}
}

var errNotChained = cnierror.New(cnierror.CodeInvalidConfig, "prevResult: vrf must be called as a chained plugin")

// add joins the interface to the VRF and passes prevResult on.
func add(req *skel.Request) (*result.Result, error) {
	p, err := load(req)
	if err != nil {
		return nil, err
	}
	if req.PrevResult == nil {
		return nil, errNotChained
	}
	return lockedns.Add(req, func(cont *link.NS) error {
		return wrap(p.Name, join(cont, req.Args.IfName, p))
	})
}

// join does ADD's work inside the locked namespace. A failure undoes the VRF it made
// and the enslaving; the IPv6 addresses and routes the kernel dropped on enslaving are
// not put back, as the runtime's DEL that follows removes the interface anyway.
func join(cont *link.NS, ifName string, p *Plan) (err error) {
	l, err := cont.ByName(ifName)
	if err != nil {
		return err
	}
	h := cont.Handle()
	var undo rollback.Stack
	defer undo.OnError(&err)
	vrf, err := ensure(cont, &undo, p)
	if err != nil {
		return err
	}
	switch master := l.Attrs().MasterIndex; master {
	case 0:
	case vrf.Index:
		return nil // already a member: a repeated ADD
	default:
		return fmt.Errorf("%s already has a master (%s)", ifName, linkName(h, master))
	}
	return enslave(h, &undo, l, vrf)
}

// ensure returns the VRF called p.Name, creating it (and pushing its deletion) when
// there is none.
func ensure(cont *link.NS, undo *rollback.Stack, p *Plan) (*netlink.Vrf, error) {
	h := cont.Handle()
	vrf, err := find(h, p.Name)
	if err != nil {
		return nil, err
	}
	if vrf != nil {
		if p.Table != 0 && vrf.Table != p.Table {
			return nil, cnierror.Newf(cnierror.CodeInvalidConfig,
				"table: VRF %q exists with table %d, the config says %d", p.Name, vrf.Table, p.Table)
		}
		return vrf, nil
	}
	table := p.Table
	if table == 0 {
		if table, err = freeTable(h); err != nil {
			return nil, err
		}
	}
	if err := h.LinkAdd(&netlink.Vrf{LinkAttrs: netlink.LinkAttrs{Name: p.Name}, Table: table}); err != nil {
		if errors.Is(err, syscall.EOPNOTSUPP) {
			return nil, cnierror.New(cnierror.CodeTryAgainLater,
				"the kernel has no VRF support (CONFIG_NET_VRF, module vrf): cannot create the VRF")
		}
		return nil, fmt.Errorf("create: %w", err)
	}
	undo.Push("VRF "+p.Name, func() error { return cont.Delete(p.Name) })
	if vrf, err = find(h, p.Name); err != nil || vrf == nil {
		return nil, fmt.Errorf("created VRF is gone: %w", err)
	}
	if err := h.LinkSetUp(vrf); err != nil {
		return nil, fmt.Errorf("set up: %w", err)
	}
	return vrf, nil
}

// find returns the VRF called name, nil when there is no link of that name, and an
// invalid-config error when that link is no VRF.
func find(h *nlconn.Handle, name string) (*netlink.Vrf, error) {
	l, err := h.LinkByName(name)
	if link.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	vrf, ok := l.(*netlink.Vrf)
	if !ok {
		return nil, cnierror.Newf(cnierror.CodeInvalidConfig, "vrfname: %q is a %s link, not a VRF", name, l.Type())
	}
	return vrf, nil
}

// freeTable picks the first table from 1 up that no VRF, rule or route uses. (The
// reference looks at VRFs only, and could hand out a table sbr filled.)
func freeTable(h *nlconn.Handle) (uint32, error) {
	used, err := lockedns.UsedTables(h)
	if err != nil {
		return 0, err
	}
	links, err := h.LinkList()
	if err != nil {
		return 0, fmt.Errorf("list links: %w", err)
	}
	for _, l := range links {
		if v, ok := l.(*netlink.Vrf); ok {
			used[int(v.Table)] = true
		}
	}
	return uint32(lockedns.FreeTable(used, 1)), nil
}

// enslave makes l a member of vrf and puts back what the kernel drops on the way: the
// IPv6 addresses and the gateway routes, which go into the VRF's table.
func enslave(h *nlconn.Handle, undo *rollback.Stack, l netlink.Link, vrf *netlink.Vrf) error {
	name := l.Attrs().Name
	addrs, err := h.AddrList(l, netlink.FAMILY_V6)
	if err != nil {
		return fmt.Errorf("%s: list addresses: %w", name, err)
	}
	routes, err := h.RouteList(l, netlink.FAMILY_ALL)
	if err != nil {
		return fmt.Errorf("%s: list routes: %w", name, err)
	}
	if err := h.LinkSetMaster(l, vrf); err != nil {
		return fmt.Errorf("%s: set master: %w", name, err)
	}
	undo.Push(name+" out of the VRF", func() error { return h.LinkSetNoMaster(l) })
	if err := restoreAddrs(h, l, addrs); err != nil {
		return err
	}
	for _, r := range routes {
		if r.Scope != netlink.SCOPE_UNIVERSE {
			continue // subnet routes: the kernel moved them itself
		}
		r.Table, r.Flags = int(vrf.Table), 0
		if err := h.RouteReplace(&r); err != nil {
			return fmt.Errorf("%s: move route %s to table %d: %w", name, r.Dst, vrf.Table, err)
		}
	}
	return nil
}

// restoreAddrs re-adds the IPv6 addresses l had before enslaving and lost; they already
// passed duplicate address detection, so they skip it.
func restoreAddrs(h *nlconn.Handle, l netlink.Link, before []netlink.Addr) error {
	after, err := h.AddrList(l, netlink.FAMILY_V6)
	if err != nil {
		return fmt.Errorf("%s: list addresses: %w", l.Attrs().Name, err)
	}
	for _, a := range before {
		if slices.ContainsFunc(after, func(b netlink.Addr) bool { return b.IPNet.String() == a.IPNet.String() }) {
			continue
		}
		re := &netlink.Addr{IPNet: a.IPNet, Scope: a.Scope, Flags: unix.IFA_F_NODAD}
		if err := h.AddrAdd(l, re); err != nil && !errors.Is(err, syscall.EEXIST) {
			return fmt.Errorf("%s: restore address %s: %w", l.Attrs().Name, a.IPNet, err)
		}
	}
	return nil
}

// del takes the interface out of the VRF and deletes the VRF when that left it empty.
// A namespace, VRF or interface that is gone is nothing left to do.
func del(req *skel.Request) error {
	return lockedns.Del(req, "vrf", nameForDel, func(cont *link.NS, name string) error {
		return wrap(name, leave(cont, req.Args.IfName, name))
	})
}

// wrap names the VRF in an error of the work inside the namespace.
func wrap(name string, err error) error {
	if err != nil {
		return fmt.Errorf("vrf %q: %w", name, err)
	}
	return nil
}

func leave(cont *link.NS, ifName, name string) error {
	h := cont.Handle()
	l, err := h.LinkByName(name)
	if link.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	vrf, ok := l.(*netlink.Vrf)
	if !ok {
		return nil // not a VRF, so not one of ours
	}
	var errs []error
	member, err := h.LinkByName(ifName)
	switch {
	case link.IsNotFound(err):
	case err != nil:
		errs = append(errs, err)
	case member.Attrs().MasterIndex == vrf.Index:
		if err := h.LinkSetNoMaster(member); err != nil && !link.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("%s: leave: %w", ifName, err))
		}
	}
	links, err := h.LinkList()
	if err != nil {
		return errors.Join(append(errs, fmt.Errorf("list links: %w", err))...)
	}
	if !slices.ContainsFunc(links, func(l netlink.Link) bool { return l.Attrs().MasterIndex == vrf.Index }) {
		// A VRF already gone is fine (the reference lets ENODEV fail the DEL, its PR #1282).
		errs = append(errs, cont.Delete(name))
	}
	return errors.Join(errs...)
}

// check verifies that the VRF exists (with the configured table) and that the
// interface is its member.
func check(req *skel.Request) error {
	p, err := load(req)
	if err != nil {
		return err
	}
	if req.PrevResult == nil {
		return errNotChained
	}
	cont, err := link.OpenContainer(req.Context(), req.Args.Netns)
	if err != nil {
		return err
	}
	defer cont.Close()
	h := cont.Handle()
	vrf, err := find(h, p.Name)
	switch {
	case err != nil:
		return err
	case vrf == nil:
		return fmt.Errorf("vrf %q: not found", p.Name)
	case p.Table != 0 && vrf.Table != p.Table:
		return fmt.Errorf("vrf %q: table is %d, the config says %d", p.Name, vrf.Table, p.Table)
	}
	l, err := cont.ByName(req.Args.IfName)
	if err != nil {
		return fmt.Errorf("vrf %q: %w", p.Name, err)
	}
	if l.Attrs().MasterIndex != vrf.Index {
		return fmt.Errorf("vrf %q: %s is not a member", p.Name, req.Args.IfName)
	}
	return nil
}

func linkName(h *nlconn.Handle, index int) string {
	l, err := h.LinkByIndex(index)
	if err != nil {
		return fmt.Sprintf("index %d", index)
	}
	return l.Attrs().Name
}
