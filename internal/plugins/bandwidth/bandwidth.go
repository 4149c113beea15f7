// Package bandwidth is the bandwidth plugin: a chained plugin that limits a veth-attached
// container's traffic with tbf qdiscs. Traffic into the container is shaped by a root
// tbf on the host veth; traffic out of it is redirected from the host veth's ingress to
// an ifb device ("bwp<hash>") that carries its own root tbf. Rates are in bit/s and
// bursts in bits, as in the reference plugin. Everything happens in the namespace the
// plugin runs in (the host) apart from reading the container veth's peer index.
package bandwidth

import (
	"errors"
	"fmt"

	"github.com/vishvananda/netlink"

	"github.com/cnikit/cni/internal/core/cnierror"
	"github.com/cnikit/cni/internal/core/rollback"
	"github.com/cnikit/cni/internal/core/steps"
	"github.com/cnikit/cni/internal/core/version"
	"github.com/cnikit/cni/internal/host/link"
	"github.com/cnikit/cni/internal/result"
	"github.com/cnikit/cni/internal/spec/skel"
)

// Plugin returns the bandwidth plugin's registry entry.
func Plugin() *skel.Plugin {
	return &skel.Plugin{
		Name:     "bandwidth",
		About:    "limits a veth-attached container's ingress and egress rate with tbf",
		Versions: version.From("0.3.0"),
		Add:      add,
		Del:      del,
		Check:    check,
		GC:       gc,
		Repair:   repair,
	}
}

// add shapes the attachment and returns prevResult with the ifb (if any) appended.
// With no limit configured it passes prevResult through and touches nothing.
func add(req *skel.Request) (_ *result.Result, err error) {
	shaping, _, host, veth, err := shaped(req)
	if err != nil {
		return nil, err
	}
	res := req.PrevResult.Clone()
	if host == nil {
		return res, nil
	}
	defer host.Close()
	h := host.Handle()

	var undo rollback.Stack
	defer undo.OnError(&err)
	// Each kernel change is a step of its own, so that a crash-point build stops
	// between any two of them (internal/core/steps/crashpoint.go).
	ctx := req.Context()
	if shaping.Ingress.Enabled() {
		if err := steps.Begin(ctx, steps.Qdisc).Done(setRootTBF(h, veth, tbfFor(shaping.Ingress))); err != nil {
			return nil, err
		}
		undo.Push("host veth root tbf", func() error { return delRootQdisc(h, veth) })
	}
	if shaping.Egress.Enabled() {
		name := ifbName(req.Net.Name, req.Args.ContainerID)
		step := steps.Begin(ctx, steps.LinkCreate)
		ifb, err := createIfb(host, name, owner{req.Net.Name, req.Args.ContainerID, req.Args.IfName}, veth.Attrs().MTU)
		if err := step.Done(err); err != nil {
			return nil, err
		}
		undo.Push("ifb "+name, func() error { return host.Delete(name) })
		if err := steps.Begin(ctx, steps.Qdisc).Done(setRootTBF(h, ifb, tbfFor(shaping.Egress))); err != nil {
			return nil, err
		}
		// Pushed once the qdisc is ours: a failed add leaves another program's in place.
		if err := steps.Begin(ctx, steps.Qdisc).Done(redirectToIfb(h, veth, ifb)); err != nil {
			return nil, err
		}
		undo.Push("host veth ingress qdisc", func() error { return delIngress(h, veth) })
		res.AddInterface(result.Interface{Name: name, Mac: ifb.Attrs().HardwareAddr.String()})
	}
	return res, nil
}

// del removes the attachment's ifb, found from the network name and container id alone
// so that it works without prevResult or netns; the alias keeps it from removing the ifb
// of another interface of the same container. While the container interface is there,
// the host veth's qdiscs go too (unshape). The limits are not read: an attachment whose
// ADD refused them must still be deletable, or the runtime's DEL of the whole chain
// stops here.
func del(req *skel.Request) error {
	host, err := link.Current()
	if err != nil {
		return err
	}
	defer host.Close()
	return errors.Join(unshape(req, host),
		deleteIfb(req.Context(), host, ifbName(req.Net.Name, req.Args.ContainerID), owner{req.Net.Name, req.Args.ContainerID, req.Args.IfName}))
}

// unshape takes the root tbf and the ingress qdisc (with its redirect) off the host end
// of the container interface's veth. A veth that bridge or ptp made goes with its
// attachment and its qdiscs with it, but not every host end does: host-device moves one
// end of a veth whose other end the host keeps, and a main plugin of another project
// may keep its host end. Without a netns (gone, or not given) there is no container end
// to find the host end by; a veth whose netns died went with it. Only what ADD makes is
// deleted (the kernel's delete does not check the kind): a root qdisc that is no tbf
// (an operator's) and an ingress qdisc without the redirect (a clsact) stay.
func unshape(req *skel.Request, host *link.NS) error {
	cont, err := link.OpenIfPresent(req.Args.Netns)
	if err != nil || cont == nil {
		return nil
	}
	defer cont.Close()
	veth, err := link.HostPeer(host, cont, req.Args.IfName)
	if err != nil {
		return nil // no interface, or no veth with its peer here: nothing ADD shaped
	}
	h := host.Handle()
	var errs []error
	if kind, _, err := rootQdisc(host, veth.Attrs().Index); err == nil && kind == "tbf" {
		errs = append(errs, delRootQdisc(h, veth))
	}
	if redirects(h, veth) {
		errs = append(errs, delIngress(h, veth))
	}
	return errors.Join(errs...)
}

// check recomputes the tbf settings and compares them with the kernel's, on the host
// veth for ingress and on the ifb (plus the redirect to it) for egress. Where ADD
// clamped a runtime's burst, the tbf the reference plugins install for the same
// request (their buffer wrapped around 32 bits) passes too: a pod the reference shaped
// before the node moved to ours is as the runtime asked, to the reference's lights,
// and must not fail CHECK for it.
func check(req *skel.Request) error {
	return inspect(req, func(part string, err error, _ func() error) error {
		return fmt.Errorf("%s: %w", part, err)
	})
}

// inspect walks what ADD made for the attachment's limits, as CHECK sees it: the host
// veth's root tbf (ingress), then the ifb's root tbf and the host veth's redirect to the
// ifb (egress). For each part the kernel does not show as ADD left it, missing gets the
// part ("ingress", "egress"), what is wrong, and put, which makes that part again as ADD
// does (nil for the ifb itself: a link, which only ADD makes); inspect stops at the
// first error missing returns. CHECK and REPAIR are this one walk.
func inspect(req *skel.Request, missing func(part string, err error, put func() error) error) error {
	shaping, clamps, host, veth, err := shaped(req)
	if err != nil || host == nil {
		return err
	}
	defer host.Close()
	h := host.Handle()
	if shaping.Ingress.Enabled() {
		if err := checkRootTBF(host, veth, tbfsFor(shaping.Ingress, clamps)...); err != nil {
			if err := missing("ingress", err, func() error { return setRootTBF(h, veth, tbfFor(shaping.Ingress)) }); err != nil {
				return err
			}
		}
	}
	if !shaping.Egress.Enabled() {
		return nil
	}
	ifb, err := host.ByName(ifbName(req.Net.Name, req.Args.ContainerID))
	if err != nil {
		return missing("egress", err, nil)
	}
	if err := checkRootTBF(host, ifb, tbfsFor(shaping.Egress, clamps)...); err != nil {
		if err := missing("egress", err, func() error { return setRootTBF(h, ifb, tbfFor(shaping.Egress)) }); err != nil {
			return err
		}
	}
	if err := checkRedirect(h, veth, ifb); err != nil {
		return missing("egress", err, func() error { return redirectToIfb(h, veth, ifb) })
	}
	return nil
}

// tbfsFor are the tbf settings CHECK accepts for d: ours, and where ADD clamped d's
// burst (a clamp of d's rate and clamped burst), the reference's for the burst asked.
func tbfsFor(d Direction, clamps []Clamp) []tbfParams {
	out := []tbfParams{tbfFor(d)}
	for _, c := range clamps {
		if c.Rate == d.Rate && c.To == d.Burst {
			out = append(out, tbfFor(Direction{Rate: d.Rate, Burst: c.From}))
		}
	}
	return out
}

// gc deletes this network's ifbs whose attachment is not in the valid list. Ownership
// comes from the alias each ifb was given at ADD, so other networks' ifbs are kept.
func gc(req *skel.Request) error {
	host, err := link.Current()
	if err != nil {
		return err
	}
	defer host.Close()
	keep := make(map[string][]string, len(req.ValidAttachments))
	for _, a := range req.ValidAttachments {
		name := ifbName(req.Net.Name, a.ContainerID)
		keep[name] = append(keep[name], a.IfName)
	}
	stale, err := staleIfbs(host, req.Net.Name, keep)
	if err != nil {
		return err
	}
	var errs []error
	for _, name := range stale {
		// Concurrently: each deletion waits for the kernel.
		errs = append(errs, host.DeleteInBackground(req.Context(), name))
	}
	return errors.Join(errs...)
}

var errNotChained = cnierror.New(cnierror.CodeInvalidConfig, "prevResult: bandwidth must be called as a chained plugin")

func load(req *skel.Request) (Shaping, []Clamp, error) {
	conf, err := skel.LoadConfig[Config](req)
	if err != nil {
		return Shaping{}, nil, err
	}
	shaping, clamps, err := conf.Shaping()
	if err != nil {
		return Shaping{}, nil, err
	}
	if req.Stderr != nil {
		for _, c := range clamps {
			fmt.Fprintf(req.Stderr, "bandwidth %q: %s\n", req.Net.Name, c)
		}
	}
	return shaping, clamps, nil
}

// shaped is the head of ADD, CHECK and REPAIR: the limits (and the bursts load clamped)
// of a chained call and, when there are any, the host end of the container's veth in
// host, for the caller to close; host is nil when there is nothing to shape.
func shaped(req *skel.Request) (shaping Shaping, clamps []Clamp, host *link.NS, veth netlink.Link, err error) {
	if shaping, clamps, err = load(req); err != nil {
		return shaping, clamps, nil, nil, err
	}
	if req.PrevResult == nil {
		return shaping, clamps, nil, nil, errNotChained
	}
	if !shaping.IsZero() {
		host, veth, err = hostVeth(req)
	}
	return shaping, clamps, host, veth, err
}

// hostVeth opens the plugin's own namespace and finds the host end of the container
// interface's veth. The kernel names it (the container end's peer, pointing back), so
// prevResult need not: the reference refuses a result that does not list it as a host
// interface (Cilium's, an IPAM-only one), ours shapes the veth all the same.
func hostVeth(req *skel.Request) (*link.NS, netlink.Link, error) {
	cont, err := link.OpenContainer(req.Context(), req.Args.Netns)
	if err != nil {
		return nil, nil, err
	}
	defer cont.Close()
	host, err := link.Current()
	if err != nil {
		return nil, nil, err
	}
	veth, err := link.HostPeer(host, cont, req.Args.IfName)
	if errors.Is(err, link.ErrNotVeth) {
		// A config for another kind of interface, not a kernel failure (code 999).
		host.Close()
		return nil, nil, cnierror.Invalid("ingressRate, egressRate: cannot be applied: %v (bandwidth shapes the host end of a veth)", err)
	}
	if err != nil {
		host.Close()
		return nil, nil, fmt.Errorf("bandwidth needs a veth: %w", err)
	}
	return host, veth, nil
}
