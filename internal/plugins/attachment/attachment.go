// Package attachment holds what the plugins that give a container one link of its own
// (macvlan, ipvlan, vlan, dummy) do alike: make a child link of a master straight inside
// the container (Add, CheckChild: the plugins differ only in the link they describe),
// address it from IPAM or bring it up bare, report it as the result's interface, verify
// it again for CHECK, and remove it on DEL. DEL looks at nothing but the config's IPAM
// type and the container's netns, never at the master, so it succeeds whatever became of
// the master. The plugins that join the container to the host through a veth pair or a
// moved device (bridge, ptp, host-device) start from Pair, the head they share.
package attachment

import (
	"errors"
	"fmt"
	"os"

	"github.com/cnikit/cni/internal/core/cnierror"
	"github.com/cnikit/cni/internal/core/rollback"
	"github.com/cnikit/cni/internal/host/link"
	"github.com/cnikit/cni/internal/host/sysctl"
	"github.com/cnikit/cni/internal/ipam"
	"github.com/cnikit/cni/internal/result"
	"github.com/cnikit/cni/internal/spec/skel"
)

// CheckIPAM checks the config's ipam section as far as it can be checked without
// reserving anything (ipam.Validate), when it names a type: the first step of an ADD
// that will call AddIPAM, so that a broken section is refused before anything is made.
func CheckIPAM(req *skel.Request) error { return IfIPAM(req, ipam.Validate) }

// AddIPAM runs the IPAM ADD when the config names an IPAM type and pushes the release of
// its reservation onto undo. A config without one ("ipam": {}) gives nil: the link alone.
// A result without addresses is refused, as nothing could be configured from it.
func AddIPAM(req *skel.Request, undo *rollback.Stack) (*result.Result, error) {
	if req.Net.IPAM.Type == "" {
		return nil, nil
	}
	res, err := ipam.Add(req)
	if err != nil {
		return nil, err
	}
	undo.Push("ipam", ipam.Release(req))
	if len(res.IPs) == 0 {
		return nil, cnierror.New(cnierror.CodeInvalidConfig, "ipam: returned no IP configuration")
	}
	return res, nil
}

// Options say how Finish treats the new interface.
type Options struct {
	// Notify sets arp_notify and ndisc_notify, so that the neighbours on a medium shared
	// with other hosts (macvlan, ipvlan) learn the addresses' new owner as soon as the
	// interface comes up.
	Notify bool
}

// Finish configures the container interface CNI_IFNAME and returns the ADD result:
// addrs's addresses and routes on the interface (with addrs nil, the interface is only
// set up), the interface reported with its MAC, MTU and sandbox, every address pointing
// at it, and the config's dns, else the one addrs carries.
func Finish(req *skel.Request, cont *link.NS, addrs *result.Result, opts Options) (*result.Result, error) {
	ifName := req.Args.IfName
	l, err := cont.ByName(ifName)
	if err != nil {
		return nil, err
	}
	res := Report(req, addrs, result.Interface{Name: ifName, Mac: l.Attrs().HardwareAddr.String(),
		MTU: l.Attrs().MTU, Sandbox: req.Args.Netns})
	if len(res.IPs) == 0 {
		h := cont.Handle()
		if err := h.LinkSetUp(l); err != nil {
			return nil, fmt.Errorf("%s: set up: %w", ifName, err)
		}
		return res, nil
	}
	if opts.Notify {
		if err := setNotify(cont, ifName); err != nil {
			return nil, err
		}
	}
	if err := link.ConfigureIface(cont, ifName, res); err != nil {
		return nil, err
	}
	return res, nil
}

// Report is the ADD result for ifaces, the last of them the container's interface:
// addrs's addresses (addrs may be nil) all pointing at that one, addrs's routes, and the
// dns (DNS).
func Report(req *skel.Request, addrs *result.Result, ifaces ...result.Interface) *result.Result {
	res := &result.Result{CNIVersion: req.Net.CNIVersion}
	var idx int
	for _, iface := range ifaces {
		idx = res.AddInterface(iface)
	}
	if addrs != nil {
		for _, ip := range addrs.IPs {
			ip.Interface = &idx
			res.IPs = append(res.IPs, ip)
		}
		res.Routes, res.DNS = addrs.Routes, addrs.DNS
	}
	res.DNS = DNS(req, res.DNS)
	return res
}

// DNS is the result's dns: the config's when it sets any, else fromIPAM.
func DNS(req *skel.Request, fromIPAM result.DNS) result.DNS {
	if req.Net.DNS != nil && !req.Net.DNS.Result().IsEmpty() {
		return req.Net.DNS.Result()
	}
	return fromIPAM
}

// setNotify turns on gratuitous ARP and unsolicited neighbour advertisements for ifName.
// A namespace with IPv6 disabled has no ipv6 tree; that is not an error.
func setNotify(cont *link.NS, ifName string) error {
	return cont.Do(func() error {
		for _, name := range []string{
			sysctl.Iface("ipv4", ifName, "arp_notify"),
			sysctl.Iface("ipv6", ifName, "ndisc_notify"),
		} {
			if err := sysctl.Ensure(name, "1"); err != nil && !errors.Is(err, os.ErrNotExist) {
				return fmt.Errorf("%s: %w", ifName, err)
			}
		}
		return nil
	})
}

// Del releases the IPAM reservation, when the config names an IPAM type, and deletes
// CNI_IFNAME from the container, with what an ADD killed before its rename left
// (link.DeleteChild). Best effort, as DEL must be: a netns that is empty or
// gone and a link that is gone are success, and the reservation is released whatever
// happens to the link.
func Del(req *skel.Request) error {
	// The kernel's wait for the deletion overlaps the rest of the process's DEL work.
	return errors.Join(DelIPAM(req), link.DeleteChildInBackground(req.Context(), req.Args.Netns, req.Args.IfName))
}

// DelIPAM is the first step of a DEL: the IPAM DEL, when the config names an IPAM type,
// before the link goes, as the reference does (a dhcp lease is released through it).
func DelIPAM(req *skel.Request) error { return IfIPAM(req, ipam.Del) }

// GC asks IPAM, when the config names an IPAM type, to release what the valid
// attachments do not hold; the link itself went with its container.
func GC(req *skel.Request) error { return IfIPAM(req, ipam.GC) }

// Status asks IPAM, when the config names an IPAM type, whether it can serve an ADD.
func Status(req *skel.Request) error { return IfIPAM(req, ipam.Status) }

// IfIPAM runs op (ipam.Check, ...) when the config names an IPAM type; without one
// ("ipam": {}) there is nothing for IPAM to do.
func IfIPAM(req *skel.Request, op func(*skel.Request) error) error {
	if req.Net.IPAM.Type == "" {
		return nil
	}
	return op(req)
}
