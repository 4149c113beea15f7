package ptp

import (
	"github.com/cnikit/cni/internal/host/link"
	"github.com/cnikit/cni/internal/host/masq"
	"github.com/cnikit/cni/internal/plugins/attachment"
	"github.com/cnikit/cni/internal/spec/skel"
)

// repair puts back what a host firewall reload removes of the attachment: its
// masquerade. Nothing in the container, no IPAM, no link: those a reload leaves alone.
func repair(req *skel.Request) error {
	conf, err := attachment.LoadPrev(req, "REPAIR", load)
	if err != nil {
		return err
	}
	ips, err := link.IfaceIPs(req.PrevResult, req.Args.IfName)
	if err != nil {
		return err
	}
	return conf.RepairMasquerade(req.Context(), masq.NewAttachment(conf.Name, req.Args.ContainerID, req.Args.IfName, ips), req.Repair().Found)
}
