package attachment

import (
	"fmt"
	"net"

	"github.com/vishvananda/netlink"

	"github.com/cnikit/cni/internal/core/cnierror"
	"github.com/cnikit/cni/internal/host/link"
	"github.com/cnikit/cni/internal/ipam"
	"github.com/cnikit/cni/internal/result"
	"github.com/cnikit/cni/internal/spec/skel"
)

// Check verifies for CHECK what Finish reported: IPAM agrees (when the config names an
// IPAM type), the prevResult names CNI_IFNAME inside a sandbox, the link there passes
// kind (the plugin's own test of its type and settings) and has the reported MAC, and
// its addresses and routes are in place.
func Check(req *skel.Request, cont *link.NS, kind func(netlink.Link) error) error {
	if err := CheckHead(req); err != nil {
		return err
	}
	if _, err := ContainerLink(req, cont, kind); err != nil {
		return err
	}
	return link.VerifyIface(cont, req.Args.IfName, req.PrevResult)
}

// ContainerLink is the container interface CNI_IFNAME as CHECK finds it: named in the
// prevResult inside a sandbox, present in cont, passing kind and with the reported MAC.
func ContainerLink(req *skel.Request, cont *link.NS, kind func(netlink.Link) error) (netlink.Link, error) {
	ifName := req.Args.IfName
	want, ok := PrevInterface(req.PrevResult, ifName, true)
	if !ok {
		return nil, fmt.Errorf("prevResult: no container interface %q", ifName)
	}
	l, err := cont.ByName(ifName)
	if err != nil {
		return nil, fmt.Errorf("container interface: %w", err)
	}
	if err := kind(l); err != nil {
		return nil, fmt.Errorf("container interface %q: %w", ifName, err)
	}
	if want.Mac != "" && !SameMAC(want.Mac, l.Attrs().HardwareAddr) {
		return nil, fmt.Errorf("container interface %q: MAC %s, prevResult says %s", ifName, l.Attrs().HardwareAddr, want.Mac)
	}
	return l, nil
}

// CheckHead is the head of a CHECK of this family: IPAM agrees, when the config names an
// IPAM type, and the prevResult to verify against is there (code 7 without it).
func CheckHead(req *skel.Request) error {
	if err := IfIPAM(req, ipam.Check); err != nil {
		return err
	}
	return RequirePrev(req, "CHECK")
}

// LoadPrev is the head of a CHECK or REPAIR (cmd): the plugin's config, read by load,
// and the prevResult it works from (RequirePrev).
func LoadPrev[C any](req *skel.Request, cmd string, load func(*skel.Request) (*C, error)) (*C, error) {
	c, err := load(req)
	if err == nil {
		err = RequirePrev(req, cmd)
	}
	return c, err
}

// RequirePrev refuses a CHECK or REPAIR (cmd) without the prevResult it works from:
// code 7.
func RequirePrev(req *skel.Request, cmd string) error {
	if req.PrevResult == nil {
		return cnierror.New(cnierror.CodeInvalidConfig, "prevResult: required for "+cmd)
	}
	return nil
}

// PrevInterface returns prev's interface called name: inside a sandbox (the container's
// side) with inSandbox, else outside any (the host's side, a bridge or a host veth).
func PrevInterface(prev *result.Result, name string, inSandbox bool) (result.Interface, bool) {
	for _, i := range prev.Interfaces {
		if i.Name == name && (i.Sandbox != "") == inSandbox {
			return i, true
		}
	}
	return result.Interface{}, false
}

// SameMAC reports whether s, a MAC as a result reports it, is hw.
func SameMAC(s string, hw net.HardwareAddr) bool {
	want, err := net.ParseMAC(s)
	return err == nil && want.String() == hw.String()
}
