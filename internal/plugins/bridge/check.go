package bridge

import (
	"errors"
	"fmt"
	"net"

	"github.com/vishvananda/netlink"

	"github.com/cnikit/cni/internal/core/cnierror"
	"github.com/cnikit/cni/internal/host/link"
	"github.com/cnikit/cni/internal/host/masq"
	"github.com/cnikit/cni/internal/ipam"
	"github.com/cnikit/cni/internal/result"
	"github.com/cnikit/cni/internal/spec/skel"
)

// check verifies that what ADD reported still holds: IPAM agrees, the bridge exists as
// configured, the container interface is a veth with the reported MAC, addresses and
// routes, its host peer is a port of the bridge, and the rules are in place.
func check(req *skel.Request) error {
	conf, err := load(req)
	if err != nil {
		return err
	}
	if conf.hasIPAM {
		if err := ipam.Check(req); err != nil {
			return err
		}
	}
	prev := req.PrevResult
	if prev == nil {
		return cnierror.New(cnierror.CodeInvalidConfig, "prevResult: required for CHECK")
	}
	host, cont, err := link.OpenPair(req.Context(), req.Args.Netns)
	if err != nil {
		return err
	}
	defer host.Close()
	defer cont.Close()

	br, err := checkBridge(host, conf, prev)
	if err != nil {
		return err
	}
	if err := checkVeth(host, cont, req, br, prev); err != nil {
		return err
	}
	if conf.hasIPAM {
		if err := link.VerifyIface(cont, req.Args.IfName, prev); err != nil {
			return err
		}
	}
	if conf.MacSpoofChk {
		if err := checkSpoofCheck(spoofKey{conf.Name, req.Args.ContainerID, req.Args.IfName}); err != nil {
			return err
		}
	}
	if conf.Masquerading() && conf.hasIPAM {
		opts, err := conf.MasqOptions()
		if err != nil {
			return err
		}
		ips, _ := link.IfaceIPs(prev, req.Args.IfName)
		if err := masq.Check(req.Context(), masq.NewAttachment(conf.Name, req.Args.ContainerID, req.Args.IfName, ips), opts); err != nil {
			return fmt.Errorf("ipMasq: %w", err)
		}
	}
	return nil
}

// findInterface returns the prevResult interface called name, if any.
func findInterface(prev *result.Result, name string, inSandbox bool) (result.Interface, bool) {
	for _, i := range prev.Interfaces {
		if i.Name == name && (i.Sandbox != "") == inSandbox {
			return i, true
		}
	}
	return result.Interface{}, false
}

func checkBridge(host *link.NS, conf *Config, prev *result.Result) (netlink.Link, error) {
	l, err := host.ByName(conf.Bridge)
	if err != nil {
		return nil, fmt.Errorf("bridge %q: %w", conf.Bridge, err)
	}
	if _, ok := l.(*netlink.Bridge); !ok {
		return nil, fmt.Errorf("bridge %q: is a %s, not a bridge", conf.Bridge, l.Type())
	}
	if want, ok := findInterface(prev, conf.Bridge, false); ok && want.Mac != "" &&
		!macEqual(want.Mac, l.Attrs().HardwareAddr) {
		return nil, fmt.Errorf("bridge %q: MAC %s, prevResult says %s", conf.Bridge, l.Attrs().HardwareAddr, want.Mac)
	}
	if conf.PromiscMode != (l.Attrs().Promisc != 0) {
		return nil, fmt.Errorf("bridge %q: promiscuous mode is %t, config says %t", conf.Bridge, l.Attrs().Promisc != 0, conf.PromiscMode)
	}
	return l, nil
}

func checkVeth(host, cont *link.NS, req *skel.Request, br netlink.Link, prev *result.Result) error {
	ifName := req.Args.IfName
	want, ok := findInterface(prev, ifName, true)
	if !ok {
		return fmt.Errorf("prevResult: no container interface %q", ifName)
	}
	cl, err := cont.ByName(ifName)
	if err != nil {
		return fmt.Errorf("container interface: %w", err)
	}
	if _, ok := cl.(*netlink.Veth); !ok {
		return fmt.Errorf("container interface %q: is a %s, not a veth", ifName, cl.Type())
	}
	if want.Mac != "" && !macEqual(want.Mac, cl.Attrs().HardwareAddr) {
		return fmt.Errorf("container interface %q: MAC %s, prevResult says %s", ifName, cl.Attrs().HardwareAddr, want.Mac)
	}
	peer, err := link.HostPeer(host, cont, ifName)
	if err != nil {
		return err
	}
	if peer.Attrs().MasterIndex != br.Attrs().Index {
		return fmt.Errorf("host veth %q: not a port of bridge %q", peer.Attrs().Name, br.Attrs().Name)
	}
	for _, i := range prev.Interfaces {
		if i.Sandbox == "" && i.Name == peer.Attrs().Name {
			return nil
		}
	}
	return errors.New("host veth " + peer.Attrs().Name + ": not in prevResult")
}

func macEqual(s string, hw net.HardwareAddr) bool {
	want, err := net.ParseMAC(s)
	return err == nil && want.String() == hw.String()
}
