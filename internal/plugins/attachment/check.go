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
	if req.Net.IPAM.Type != "" {
		if err := ipam.Check(req); err != nil {
			return err
		}
	}
	prev := req.PrevResult
	if prev == nil {
		return cnierror.New(cnierror.CodeInvalidConfig, "prevResult: required for CHECK")
	}
	ifName := req.Args.IfName
	want, ok := sandboxInterface(prev, ifName)
	if !ok {
		return fmt.Errorf("prevResult: no container interface %q", ifName)
	}
	l, err := cont.ByName(ifName)
	if err != nil {
		return fmt.Errorf("container interface: %w", err)
	}
	if err := kind(l); err != nil {
		return fmt.Errorf("container interface %q: %w", ifName, err)
	}
	if want.Mac != "" && !sameMAC(want.Mac, l.Attrs().HardwareAddr) {
		return fmt.Errorf("container interface %q: MAC %s, prevResult says %s", ifName, l.Attrs().HardwareAddr, want.Mac)
	}
	return link.VerifyIface(cont, ifName, prev)
}

// sandboxInterface returns the prevResult interface called name inside a sandbox.
func sandboxInterface(prev *result.Result, name string) (result.Interface, bool) {
	for _, i := range prev.Interfaces {
		if i.Name == name && i.Sandbox != "" {
			return i, true
		}
	}
	return result.Interface{}, false
}

func sameMAC(s string, hw net.HardwareAddr) bool {
	want, err := net.ParseMAC(s)
	return err == nil && want.String() == hw.String()
}
