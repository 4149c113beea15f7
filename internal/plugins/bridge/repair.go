package bridge

import (
	"fmt"

	"github.com/cnikit/cni/internal/host/link"
	"github.com/cnikit/cni/internal/host/masq"
	"github.com/cnikit/cni/internal/plugins/attachment"
	"github.com/cnikit/cni/internal/spec/skel"
)

// repair puts back what a host firewall reload removes of the attachment: its MAC spoof
// check and its masquerade. Nothing in the container is changed (the spoof check reads
// the container interface's MAC), no IPAM, no link: a reload leaves those alone.
func repair(req *skel.Request) error {
	conf, err := attachment.LoadPrev(req, "REPAIR", load)
	if err != nil {
		return err
	}
	if conf.MacSpoofChk {
		if err := repairSpoofCheck(req, spoofKey{conf.Name, req.Args.ContainerID, req.Args.IfName}); err != nil {
			return err
		}
	}
	if !conf.hasIPAM {
		return nil
	}
	ips, _ := link.IfaceIPs(req.PrevResult, req.Args.IfName)
	return conf.RepairMasquerade(req.Context(), masq.NewAttachment(conf.Name, req.Args.ContainerID, req.Args.IfName, ips), req.Repair().Found)
}

// repairSpoofCheck installs the spoof check again, as ADD does, for the host veth and
// the MAC of the container interface the kernel shows.
func repairSpoofCheck(req *skel.Request, key spoofKey) error {
	err := checkSpoofCheck(key)
	if err == nil || !req.Repair().Found("macspoofchk: "+err.Error()) {
		return nil
	}
	ns, err := attachment.Open(req, false)
	if err != nil {
		return err
	}
	defer ns.Close()
	cl, err := ns.Cont.ByName(req.Args.IfName)
	if err != nil {
		return fmt.Errorf("macspoofchk: container interface: %w", err)
	}
	peer, err := link.HostPeer(ns.Host, ns.Cont, req.Args.IfName)
	if err != nil {
		return fmt.Errorf("macspoofchk: %w", err)
	}
	return setupSpoofCheck(key, peer.Attrs().Name, cl.Attrs().HardwareAddr)
}
