package attachment

import (
	"errors"
	"fmt"

	"github.com/cnikit/cni/internal/core/cnierror"
	"github.com/cnikit/cni/internal/core/rollback"
	"github.com/cnikit/cni/internal/host/link"
	"github.com/cnikit/cni/internal/host/masq"
	"github.com/cnikit/cni/internal/result"
	"github.com/cnikit/cni/internal/spec/skel"
)

// Pair is the host's and the container's network namespace, open for one ADD, CHECK or
// REPAIR of a plugin that joins the two through a link the host holds a side of: a veth
// pair (bridge, ptp) or a host device moved in (host-device). A new member's ADD starts
// from it as ptp's does, each step pushing its undo:
//
//	ns, err := attachment.Open(req, false) // true when something is made before IPAM runs
//	...
//	defer ns.Close()
//	var undo rollback.Stack
//	defer undo.OnError(&err)
//	addrs, err := attachment.AddIPAM(req, &undo)
//	...
//	veth, err := ns.AddVeth(link.VethOptions{IfName: req.Args.IfName}, "veth", &undo)
//	...
//	hostEnd, contEnd := attachment.VethEnds(req, veth)
//	res := attachment.Report(req, addrs, hostEnd, contEnd) // then its own work, from res
//
// Its CHECK and REPAIR open the pair after LoadPrev or CheckHead; its DEL needs none:
// DelVeth, then the removal of its own rules.
type Pair struct {
	Host, Cont *link.NS
}

// Open opens the pair (link.OpenPair), with validateIPAM once the config's ipam section
// passes CheckIPAM: an ADD that calls IPAM after making something refuses it first.
func Open(req *skel.Request, validateIPAM bool) (Pair, error) {
	if validateIPAM {
		if err := CheckIPAM(req); err != nil {
			return Pair{}, err
		}
	}
	host, cont, err := link.OpenPair(req.Context(), req.Args.Netns)
	return Pair{Host: host, Cont: cont}, err
}

// Close closes both namespaces, the container's first (a nil one too).
func (p Pair) Close() {
	p.Cont.Close()
	p.Host.Close()
}

// AddVeth creates the veth pair, its container end opts.IfName made inside the container
// (link.CreateVeth), and pushes its deletion onto undo as the step what. A name already
// taken in the container is the runtime's mistake: code 4, invalid environment.
func (p Pair) AddVeth(opts link.VethOptions, what string, undo *rollback.Stack) (*link.Veth, error) {
	veth, err := link.CreateVeth(p.Host, p.Cont, opts)
	if err != nil {
		if errors.Is(err, link.ErrExists) {
			return nil, cnierror.Newf(cnierror.CodeInvalidEnv, "CNI_IFNAME: %v", err)
		}
		return nil, err
	}
	undo.Push(what, func() error { return p.Cont.Delete(opts.IfName) })
	return veth, nil
}

// VethEnds are veth's two ends as the result reports them, in the reference's order:
// the host end, then the container end CNI_IFNAME in the sandbox.
func VethEnds(req *skel.Request, veth *link.Veth) (hostEnd, contEnd result.Interface) {
	h, c := veth.Host.Attrs(), veth.Container.Attrs()
	return result.Interface{Name: h.Name, Mac: h.HardwareAddr.String(), MTU: h.MTU},
		result.Interface{Name: req.Args.IfName, Mac: c.HardwareAddr.String(), MTU: c.MTU, Sandbox: req.Args.Netns}
}

// DelVeth is the head of a veth plugin's DEL, best effort: DelIPAM, then link.DeleteVeth
// (ours proves a host end the prevResult names is the attachment's). The kernel's
// deletion, which the process awaits, overlaps the rule teardown the caller appends.
func DelVeth(req *skel.Request, ours link.HostEndTest) []error {
	return []error{DelIPAM(req), link.DeleteVeth(req.Context(), req.Args.Netns, req.Args.IfName, req.PrevResult, ours)}
}

// Masquerade sets up the masquerade of the attachment's addresses ips on network (ipMasq)
// and pushes its teardown onto undo.
func Masquerade(req *skel.Request, network string, ips []result.IPConfig, opts masq.Options, undo *rollback.Stack) error {
	att := masq.NewAttachment(network, req.Args.ContainerID, req.Args.IfName, ips)
	if err := masq.Setup(req.Context(), att, opts); err != nil {
		return fmt.Errorf("ipMasq: %w", err)
	}
	undo.Push("ipMasq", func() error {
		return masq.Teardown(req.UndoContext(), network, req.Args.ContainerID, req.Args.IfName)
	})
	return nil
}

// CheckMasquerade verifies for CHECK the masquerade Masquerade set up.
func CheckMasquerade(req *skel.Request, network string, ips []result.IPConfig, opts masq.Options) error {
	if err := masq.Check(req.Context(), masq.NewAttachment(network, req.Args.ContainerID, req.Args.IfName, ips), opts); err != nil {
		return fmt.Errorf("ipMasq: %w", err)
	}
	return nil
}
