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
	"time"

	"github.com/vishvananda/netlink"

	"github.com/cnikit/cni/internal/core/cnierror"
	"github.com/cnikit/cni/internal/core/rollback"
	"github.com/cnikit/cni/internal/core/version"
	"github.com/cnikit/cni/internal/host/link"
	"github.com/cnikit/cni/internal/host/masq"
	"github.com/cnikit/cni/internal/ipam"
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
	if conf.hasIPAM {
		if err := ipam.Validate(req); err != nil {
			return nil, err
		}
	}
	host, cont, err := link.OpenPair(req.Context(), req.Args.Netns)
	if err != nil {
		return nil, err
	}
	defer host.Close()
	defer cont.Close()

	var undo rollback.Stack
	defer undo.OnError(&err)

	br, err := ensureBridge(host, conf)
	if err != nil {
		return nil, err
	}
	veth, err := link.CreateVeth(host, cont, link.VethOptions{IfName: req.Args.IfName, MTU: conf.MTU, MAC: conf.mac})
	if err != nil {
		if errors.Is(err, link.ErrExists) {
			return nil, cnierror.Newf(cnierror.CodeInvalidEnv, "CNI_IFNAME: %v", err)
		}
		return nil, err
	}
	undo.Push("container veth", func() error { return cont.Delete(req.Args.IfName) })
	brMAC, err := plugPort(host, br, veth.Host, conf)
	if err != nil {
		return nil, err
	}
	key := spoofKey{conf.Name, req.Args.ContainerID, req.Args.IfName}
	if conf.MacSpoofChk {
		if err := setupSpoofCheck(key, veth.Host.Attrs().Name, veth.Container.Attrs().HardwareAddr); err != nil {
			return nil, err
		}
		undo.Push("mac spoof check", func() error { return teardownSpoofCheck(key) })
	}

	res := &result.Result{CNIVersion: req.Net.CNIVersion}
	res.AddInterface(result.Interface{Name: br.Attrs().Name})
	res.AddInterface(result.Interface{Name: veth.Host.Attrs().Name, Mac: veth.Host.Attrs().HardwareAddr.String(),
		MTU: veth.Host.Attrs().MTU})
	res.AddInterface(result.Interface{Name: req.Args.IfName, Mac: veth.Container.Attrs().HardwareAddr.String(),
		MTU: veth.Container.Attrs().MTU, Sandbox: req.Args.Netns})

	if conf.hasIPAM {
		if err := addIPs(req, conf, host, cont, br, veth.Container, res, &undo, masqOpts); err != nil {
			return nil, err
		}
	} else if err := setupL2(cont, req.Args.IfName, conf); err != nil {
		return nil, err
	}

	if !conf.DisableContainerInterface {
		if _, err := link.WaitOperUp(host, veth.Host.Attrs().Name, operUpWait); err != nil {
			return nil, fmt.Errorf("bridge port in error state: %w", err)
		}
	}
	// The bridge's MAC can have changed while our port joined: report it as pinMAC left
	// it, which it keeps.
	if brMAC == nil {
		if br, err = host.ByName(conf.Bridge); err != nil {
			return nil, err
		}
		brMAC = br.Attrs().HardwareAddr
	}
	res.Interfaces[ifBridge].Mac = brMAC.String()
	if req.Net.DNS != nil && !req.Net.DNS.Result().IsEmpty() {
		res.DNS = req.Net.DNS.Result()
	}
	return res, nil
}

// addIPs runs IPAM and puts its addresses on the container interface eth, the gateways
// on the bridge, and the masquerade rules in place.
func addIPs(req *skel.Request, conf *Config, host, cont *link.NS, br, eth netlink.Link, res *result.Result,
	undo *rollback.Stack, masqOpts masq.Options) error {
	ipamRes, err := ipam.Add(req)
	if err != nil {
		return err
	}
	undo.Push("ipam", ipam.Release(req))
	if len(ipamRes.IPs) == 0 {
		return cnierror.New(cnierror.CodeInvalidConfig, "ipam: returned no IP configuration")
	}
	gws, err := assignGateways(conf, ipamRes)
	if err != nil {
		return err
	}
	res.IPs, res.Routes, res.DNS = ipamRes.IPs, ipamRes.Routes, ipamRes.DNS
	if err := prepareContainer(cont, req.Args.IfName, conf.EnableDAD); err != nil {
		return err
	}
	if err := link.ConfigureLink(cont, eth, res); err != nil {
		return err
	}
	if conf.IsGateway {
		if err := setupGateways(host, conf, br, gws, res); err != nil {
			return err
		}
	}
	if conf.Masquerading() {
		att := masq.NewAttachment(conf.Name, req.Args.ContainerID, req.Args.IfName, res.IPs)
		if err := masq.Setup(req.Context(), att, masqOpts); err != nil {
			return fmt.Errorf("ipMasq: %w", err)
		}
		undo.Push("ipMasq", func() error {
			return masq.Teardown(req.UndoContext(), conf.Name, req.Args.ContainerID, req.Args.IfName)
		})
	}
	return nil
}

// del undoes what ADD did. It reads no more of the config than its teardown steps
// depend on (see loadForDel), so a config ADD refused, or one changed since, does not
// keep the runtime's DEL of the chain from finishing.
func del(req *skel.Request) error {
	conf := loadForDel(req)
	// Best effort, as DEL must be: one failing step does not keep the others' state.
	// IPAM first, as in the reference: an IPAM plugin such as dhcp releases its lease
	// through the interface. The rules go while the kernel deletes the veth.
	var errs []error
	if req.Net.IPAM.Type != "" {
		errs = append(errs, ipam.Del(req))
	}
	// The process waits for the veth's deletion before answering (see
	// link.NS.DeleteInBackground); the kernel's wait overlaps the rule teardown here and the
	// other plugins' DEL.
	errs = append(errs, link.DeleteVeth(req.Context(), req.Args.Netns, req.Args.IfName, req.PrevResult, isPortOfPrevBridge))
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
	for _, i := range prev.Interfaces {
		if i.Sandbox == "" && i.Name == br.Attrs().Name {
			return true
		}
	}
	return false
}

// gc needs nothing from the config beyond the network's name and IPAM type.
func gc(req *skel.Request) error {
	errs := []error{
		masq.GC(req.Context(), req.Net.Name, req.Valid()),
		gcSpoofChecks(req.Net.Name, req.ValidAttachments),
	}
	if req.Net.IPAM.Type != "" {
		errs = append(errs, ipam.GC(req))
	}
	return errors.Join(errs...)
}

func status(req *skel.Request) error {
	if _, err := load(req); err != nil {
		return err
	}
	if req.Net.IPAM.Type == "" {
		return nil
	}
	return ipam.Status(req)
}
