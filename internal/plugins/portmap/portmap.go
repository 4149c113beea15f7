// Package portmap is the portmap meta plugin: it forwards ports of the host to a
// container (runtimeConfig.portMappings), with DNAT rules in iptables (the reference
// layout, chain for chain) or in nftables (maps looked up per packet, over netlink).
// ADD installs the mappings of one attachment, DEL removes everything of an attachment
// from its network name and container id alone, CHECK verifies the rules, and GC
// removes the mappings of attachments of the network that are no longer valid. Mappings
// the reference plugin made before the node's plugins were replaced are adopted
// (reference.go): its iptables layout is ours, its nftables rules (tables
// cni_hostport) are checked by CHECK and removed by DEL.
package portmap

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"

	"github.com/vishvananda/netlink"

	"github.com/cnikit/cni/internal/core/background"
	"github.com/cnikit/cni/internal/core/cnierror"
	"github.com/cnikit/cni/internal/core/rollback"
	"github.com/cnikit/cni/internal/core/version"
	"github.com/cnikit/cni/internal/host/conntrack"
	"github.com/cnikit/cni/internal/host/link"
	"github.com/cnikit/cni/internal/host/netfilter"
	"github.com/cnikit/cni/internal/host/owner"
	"github.com/cnikit/cni/internal/host/sysctl"
	"github.com/cnikit/cni/internal/result"
	"github.com/cnikit/cni/internal/spec/skel"
)

// Plugin returns portmap's registry entry.
func Plugin() *skel.Plugin {
	return &skel.Plugin{
		Name:     "portmap",
		About:    "forwards host ports to the container (iptables or nftables)",
		Versions: version.All(),
		Add:      add,
		Del:      del,
		Check:    check,
		GC:       gc,
		Repair:   repair,
	}
}

// backend is one rule engine's implementation of the mappings.
type backend interface {
	add(ctx context.Context, o attachment, s *settings, fams []family) error
	// del removes everything of the attachment whose chains are named by hash and
	// returns the mappings it removed.
	del(ctx context.Context, hash string) ([]flow, error)
	check(ctx context.Context, o attachment, s *settings, fams []family) error
	// installed lists the attachments that have mappings installed.
	installed(ctx context.Context) ([]installed, error)
}

func backendFor(b netfilter.Backend) backend {
	if b == netfilter.IPTables {
		return iptBackend{}
	}
	return nftBackend{}
}

func load(req *skel.Request) (*settings, error) {
	conf, err := skel.LoadConfig[Config](req)
	if err != nil {
		return nil, err
	}
	return parseSettings(conf)
}

// loadChained is load for ADD, CHECK and REPAIR, which need prevResult: portmap is a
// chained plugin.
func loadChained(req *skel.Request) (*settings, error) {
	if req.PrevResult == nil {
		return nil, cnierror.New(cnierror.CodeInvalidConfig, "prevResult: portmap must be called as a chained plugin")
	}
	return load(req)
}

// add installs the attachment's mappings. Without mappings it passes the previous
// result through and touches nothing.
func add(req *skel.Request) (_ *result.Result, err error) {
	s, err := loadChained(req)
	if err != nil {
		return nil, err
	}
	// Also without mappings: what the reference left mapped to these addresses would
	// hand its host ports to this pod.
	if err := removeStale(req); err != nil {
		return nil, err
	}
	if len(s.mappings) == 0 {
		return req.PrevResult, nil
	}
	fams := s.families(containerAddrs(req))
	if len(fams) == 0 {
		return req.PrevResult, nil
	}
	o := attachment{net: req.Net.Name, cid: req.Args.ContainerID}
	b := backendFor(addBackend(s.backend, o))
	var undo rollback.Stack
	defer undo.OnError(&err)
	// Pushed first: a failure in the second family must also undo the first, and
	// del copes with whatever part was installed.
	undo.Push("port mappings", func() error { _, err := b.del(req.UndoContext(), o.hash()); return err })
	if err := b.add(req.Context(), o, s, fams); err != nil {
		return nil, err
	}
	for _, f := range fams {
		if s.snat && !f.v6 {
			if err := enableLocalnet(f.addr.Addr(), req.Stderr); err != nil {
				return nil, err
			}
		}
		// Stale UDP flows to an earlier holder of a host port would keep their old
		// DNAT forever; TCP ones end on their own.
		var stale []conntrack.Match
		for _, m := range f.mappings {
			if m.proto == "udp" {
				stale = append(stale, conntrack.Match{Proto: protoNumber("udp"), OrigDstPort: m.hostPort})
			}
		}
		if _, err := conntrack.Delete(f.v6, stale); err != nil {
			fmt.Fprintf(req.Stderr, "portmap: %v\n", err)
		}
	}
	return req.PrevResult, nil
}

// addBackend is the backend of an ADD: nftables when the attachment is there already (a
// repeated ADD, `cni repair`), so that it stays where its first ADD put it whatever the
// rule picks now, else chosen. An attachment in iptables is not looked for: on a node
// with legacy tables only a listing could tell (RecordedBackend answers "may"), and a
// config naming nftables must not be overridden by a guess.
func addBackend(chosen netfilter.Backend, o attachment) netfilter.Backend {
	if chosen != netfilter.NFTables {
		if held, ok := RecordedBackend(o.net, o.cid); ok && held == netfilter.NFTables {
			return held
		}
	}
	return chosen
}

// containerAddrs returns the addresses to map ports to: the first IPv4 and the first
// IPv6 address of the container interface. A container without any address has no
// port to map to; as the reference does, the ADD then passes prevResult on, and says
// why on stderr.
func containerAddrs(req *skel.Request) (v4, v6 netip.Prefix) {
	ips, err := link.ContainerIPs(req.Args.Netns, req.Args.IfName, req.PrevResult)
	if v4, v6 = firstAddrs(ips); !v4.IsValid() && !v6.IsValid() {
		if err == nil {
			err = errors.New("none in prevResult or on the interface")
		}
		fmt.Fprintf(req.Stderr, "portmap: no address of interface %q to map ports to: %v\n", req.Args.IfName, err)
	}
	return v4, v6
}

// enableLocalnet sets route_localnet on the host interface that routes to the
// container, so that 127.0.0.1:hostPort can be DNATed out of it. Without a route to the
// container there is no such interface and nothing to set: the mappings still work from
// elsewhere, so the ADD goes on, as the reference's does.
func enableLocalnet(target netip.Addr, log io.Writer) error {
	routes, err := netlink.RouteGet(net.IP(target.AsSlice()))
	if err != nil || len(routes) == 0 {
		fmt.Fprintf(log, "portmap: no route to %s (%v): localhost is not mapped to it\n", target, err)
		return nil
	}
	l, err := netlink.LinkByIndex(routes[0].LinkIndex)
	if err != nil {
		return fmt.Errorf("portmap: interface routing to %s: %w", target, err)
	}
	if err := sysctl.Ensure(sysctl.Iface("ipv4", l.Attrs().Name, "route_localnet"), "1"); err != nil {
		return fmt.Errorf("portmap: %w", err)
	}
	return nil
}

// del removes everything of the attachment in both backends (a node's backend choice
// can change between ADD and DEL) and the conntrack entries of its mappings. It needs
// neither runtimeConfig nor prevResult.
// The config is deliberately not validated: a config that became invalid must not
// keep an attachment's rules alive.
// The reference's nftables rules of the container go too (reference.go): those reaching
// an address prevResult lists, or all of the container's without prevResult.
func del(req *skel.Request) error {
	flows, err := nftBackend{}.removeReference(req.Context(), req.Args.ContainerID, req.PrevResult.Addrs())
	return errors.Join(err, forgetFlows(req.Context(), flows),
		removeAttachment(req.Context(), attachment{net: req.Net.Name, cid: req.Args.ContainerID}.hash()))
}

// removeAttachment removes the attachment whose chains are named by hash.
func removeAttachment(ctx context.Context, hash string) error {
	// Best effort, as DEL must be: a failing backend does not keep the other backend's
	// rules or the conntrack entries alive.
	nftFlows, nftErr := nftBackend{}.del(ctx, hash)
	iptFlows, iptErr := iptBackend{}.del(ctx, hash)
	return errors.Join(nftErr, iptErr, forgetFlows(ctx, append(nftFlows, iptFlows...)))
}

// forgetFlows deletes the conntrack entries of the removed mappings in the background
// of the process (background.Start), as link deletions are: each family costs a walk of the
// kernel's whole conntrack table, 10 to 30 ms on a busy machine, which then overlaps
// the other plugins' DEL work (the veth's deletion above all) instead of adding to it.
// The table is opened here, in the host's namespace, since the background goroutine
// may run on a thread of any namespace.
func forgetFlows(ctx context.Context, flows []flow) error {
	var m4, m6 []conntrack.Match
	for _, f := range flows {
		m := conntrack.Match{Proto: protoNumber(f.proto), OrigDstPort: f.hostPort, ReplySrc: f.target}
		if f.target.Is6() {
			m6 = append(m6, m)
		} else {
			m4 = append(m4, m)
		}
	}
	if len(m4)+len(m6) == 0 {
		return nil // and no table to open
	}
	t, err := conntrack.OpenCurrent()
	if err != nil {
		return fmt.Errorf("portmap: %w", err)
	}
	return background.Start(ctx, func() error {
		defer t.Close()
		_, err4 := t.Delete(false, m4)
		_, err6 := t.Delete(true, m6)
		if err := errors.Join(err4, err6); err != nil {
			return fmt.Errorf("portmap: %w", err)
		}
		return nil
	})
}

// check verifies the attachment's rules against the mappings it was given.
func check(req *skel.Request) error {
	s, err := loadChained(req)
	if err != nil {
		return err
	}
	if len(s.mappings) == 0 {
		return nil
	}
	_, err = verify(req, s)
	return err
}

// verify checks the attachment's mappings in the backend s chose, or as the reference
// left them, and returns the families it checked.
func verify(req *skel.Request, s *settings) ([]family, error) {
	o := attachment{net: req.Net.Name, cid: req.Args.ContainerID}
	fams := s.families(containerAddrs(req))
	b := s.backend
	err := backendFor(b).check(req.Context(), o, s, fams)
	if err == nil {
		return fams, nil
	}
	// Where its ADD put it, whatever the rule picks now; asked only here, so that a
	// CHECK of an intact attachment costs no lookup more.
	if held, ok := recordedBackend(o.hash()); ok && held != b {
		b = held
		if err = backendFor(b).check(req.Context(), o, s, fams); err == nil {
			return fams, nil
		}
	}
	return fams, checkAdopted(req.Context(), b, o, s, fams, err)
}

// gc removes the mappings of every attachment of this network whose container is not
// in the valid list, in both backends.
func gc(req *skel.Request) error {
	var ids []string
	for _, a := range req.ValidAttachments {
		ids = append(ids, a.ContainerID)
	}
	valid := owner.NewSet(ids...)
	removed := map[string]bool{}
	for _, b := range []backend{nftBackend{}, iptBackend{}} {
		found, err := b.installed(req.Context())
		if err != nil {
			return err
		}
		for _, a := range found {
			if !owner.Names(a.net, req.Net.Name) || valid.Has(a.id) || removed[a.hash] {
				continue
			}
			if err := removeAttachment(req.Context(), a.hash); err != nil {
				return err
			}
			removed[a.hash] = true
		}
	}
	return nil
}
