// Package bridge is the bridge plugin: it connects a container to a Linux bridge on the
// host through a veth pair, optionally makes the bridge the container's gateway, and
// masquerades and spoof-checks the container's traffic. ADD ensures the bridge, creates
// the veth with its container end inside the container, plugs the host end into the
// bridge, asks IPAM for addresses and configures them in the container. DEL releases the
// addresses and removes the veth and every rule, even when the container's netns is
// already gone. CHECK verifies all of it; GC removes rules of attachments no longer in
// use; STATUS asks IPAM.
package bridge

import (
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/vishvananda/netlink"

	"github.com/cnikit/cni/internal/core/rollback"
	"github.com/cnikit/cni/internal/core/version"
	"github.com/cnikit/cni/internal/host/link"
	"github.com/cnikit/cni/internal/host/masq"
	"github.com/cnikit/cni/internal/plugins/attachment"
	"github.com/cnikit/cni/internal/result"
	"github.com/cnikit/cni/internal/spec/skel"
)

// Plugin returns the bridge plugin's registry entry.
func Plugin() *skel.Plugin {
	return &skel.Plugin{
		Name:     "bridge",
		About:    "connects containers to a Linux bridge on the host through veth pairs",
		Versions: version.All(),
		Add:      add,
		Del:      del,
		Check:    check,
		GC:       gc,
		Status:   status,
		Repair:   repair,
	}
}

// operUpWait bounds the wait for the host veth to carry traffic: it is normally up
// within a millisecond or two of both ends being set up.
const operUpWait = 5 * time.Second

// The result's interfaces, in the reference's order; IPs point at the container's.
const (
	ifBridge = iota
	ifHostVeth
	ifContainer
)

func add(req *skel.Request) (_ *result.Result, err error) {
	conf, err := load(req)
	if err != nil {
		return nil, err
	}
	masqOpts, err := conf.MasqOptions()
	if err != nil {
		return nil, err
	}
	// The bridge outlives a failed ADD (it may have been there before, or be shared by
	// then), so the ipam section is checked before it is made.
	ns, err := attachment.Open(req, conf.hasIPAM)
	if err != nil {
		return nil, err
	}
	defer ns.Close()

	var undo rollback.Stack
	defer undo.OnError(&err)

	br, veth, brMAC, err := plug(req, conf, ns, &undo)
	if err != nil {
		return nil, err
	}
	hostEnd, contEnd := attachment.VethEnds(req, veth)
	ipamRes, err := attachment.AddIPAM(req, &undo) // nil without an IPAM type
	if err != nil {
		return nil, err
	}
	res := attachment.Report(req, ipamRes, result.Interface{Name: br.Attrs().Name}, hostEnd, contEnd)

	if conf.hasIPAM {
		err = addIPs(req, conf, ns, br, veth.Container, res, &undo, masqOpts)
	} else {
		err = setupL2(ns.Cont, req.Args.IfName, conf)
	}
	if err != nil {
		return nil, err
	}
	if err := finish(req, conf, ns.Host, veth.Host, brMAC, res); err != nil {
		return nil, err
	}
	return res, nil
}

// plug connects the container to the bridge: the bridge ensured, the veth made with its
// host end a port of the bridge, and the MAC spoof check when the config asks for it.
// brMAC is the MAC plugPort pinned on the bridge (nil: none).
func plug(req *skel.Request, conf *Config, ns attachment.Pair, undo *rollback.Stack) (
	br netlink.Link, veth *link.Veth, brMAC net.HardwareAddr, err error) {
	if br, err = ensureBridge(ns.Host, conf); err != nil {
		return nil, nil, nil, err
	}
	veth, err = ns.AddVeth(link.VethOptions{IfName: req.Args.IfName, MTU: conf.MTU, MAC: conf.mac}, "container veth", undo)
	if err != nil {
		return nil, nil, nil, err
	}
	if brMAC, err = plugPort(ns.Host, br, veth.Host, conf); err != nil {
		return nil, nil, nil, err
	}
	if conf.MacSpoofChk {
		key := spoofKey{conf.Name, req.Args.ContainerID, req.Args.IfName}
		if err := setupSpoofCheck(key, veth.Host.Attrs().Name, veth.Container.Attrs().HardwareAddr); err != nil {
			return nil, nil, nil, err
		}
		undo.Push("mac spoof check", func() error { return teardownSpoofCheck(key) })
	}
	return br, veth, brMAC, nil
}

// finish waits for the host veth to carry traffic and completes the result with the
// bridge's MAC.
func finish(req *skel.Request, conf *Config, host *link.NS, hostVeth netlink.Link, brMAC net.HardwareAddr, res *result.Result) error {
	if !conf.DisableContainerInterface {
		if _, err := link.WaitOperUp(host, hostVeth.Attrs().Name, operUpWait); err != nil {
			return fmt.Errorf("bridge port in error state: %w", err)
		}
	}
	// The bridge's MAC can have changed while our port joined: report it as pinMAC left
	// it, which it keeps.
	if brMAC == nil {
		br, err := host.ByName(conf.Bridge)
		if err != nil {
			return err
		}
		brMAC = br.Attrs().HardwareAddr
	}
	res.Interfaces[ifBridge].Mac = brMAC.String()
	return nil
}

// addIPs puts IPAM's addresses (in res) on the container interface eth, the gateways
// on the bridge, and the masquerade rules in place.
func addIPs(req *skel.Request, conf *Config, ns attachment.Pair, br, eth netlink.Link, res *result.Result,
	undo *rollback.Stack, masqOpts masq.Options) error {
	gws, err := assignGateways(conf, res)
	if err != nil {
		return err
	}
	if err := prepareContainer(ns.Cont, req.Args.IfName, conf.EnableDAD); err != nil {
		return err
	}
	if err := link.ConfigureLink(ns.Cont, eth, res); err != nil {
		return err
	}
	if conf.IsGateway {
		if err := setupGateways(ns.Host, conf, br, gws, res); err != nil {
			return err
		}
	}
	if conf.Masquerading() {
		return attachment.Masquerade(req, conf.Name, res.IPs, masqOpts, undo)
	}
	return nil
}

// del undoes what ADD did. It reads no more of the config than its teardown steps
// depend on (see loadForDel), so a config ADD refused, or one changed since, does not
// keep the runtime's DEL of the chain from finishing. Best effort, as DEL must be: one
// failing step does not keep the others' state; the rules go while the kernel deletes
// the veth.
func del(req *skel.Request) error {
	conf := loadForDel(req)
	errs := attachment.DelVeth(req, isPortOfPrevBridge)
	if conf.MacSpoofChk {
		errs = append(errs, teardownSpoofCheck(spoofKey{req.Net.Name, req.Args.ContainerID, req.Args.IfName}))
	}
	errs = append(errs, conf.Unmasquerade(req.Context(), req.Net.Name, req.Args.ContainerID, req.Args.IfName))
	return errors.Join(errs...)
}

// isPortOfPrevBridge reports whether host veth l is a port of a bridge prev lists: the
// proof that a veth named in the cached result is the attachment's host end, for a DEL
// whose netns path is gone while the namespace lingers (link.DeleteVeth).
func isPortOfPrevBridge(host *link.NS, l netlink.Link, prev *result.Result) bool {
	if l.Attrs().MasterIndex == 0 {
		return false
	}
	h := host.Handle()
	br, err := h.LinkByIndex(l.Attrs().MasterIndex)
	if err != nil || br.Type() != "bridge" {
		return false
	}
	_, ok := attachment.PrevInterface(prev, br.Attrs().Name, false)
	return ok
}

// gc needs nothing from the config beyond the network's name and IPAM type.
func gc(req *skel.Request) error {
	return errors.Join(masq.GC(req.Context(), req.Net.Name, req.Valid()),
		gcSpoofChecks(req.Net.Name, req.ValidAttachments), attachment.GC(req))
}

func status(req *skel.Request) error {
	if _, err := load(req); err != nil {
		return err
	}
	return attachment.Status(req)
}
