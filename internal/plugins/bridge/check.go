package bridge

import (
	"errors"
	"fmt"

	"github.com/vishvananda/netlink"

	"github.com/cnikit/cni/internal/host/link"
	"github.com/cnikit/cni/internal/plugins/attachment"
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
	if err := attachment.CheckHead(req); err != nil {
		return err
	}
	prev := req.PrevResult
	ns, err := attachment.Open(req, false)
	if err != nil {
		return err
	}
	defer ns.Close()

	br, err := checkBridge(ns.Host, conf, prev)
	if err != nil {
		return err
	}
	if err := checkVeth(ns, req, br, prev); err != nil {
		return err
	}
	if conf.hasIPAM {
		if err := link.VerifyIface(ns.Cont, req.Args.IfName, prev); err != nil {
			return err
		}
	}
	return checkRules(req, conf)
}

// checkRules verifies the MAC spoof check and the masquerade, where the config asks for
// them.
func checkRules(req *skel.Request, conf *Config) error {
	if conf.MacSpoofChk {
		if err := checkSpoofCheck(spoofKey{conf.Name, req.Args.ContainerID, req.Args.IfName}); err != nil {
			return err
		}
	}
	if !conf.Masquerading() || !conf.hasIPAM {
		return nil
	}
	opts, err := conf.MasqOptions()
	if err != nil {
		return err
	}
	ips, _ := link.IfaceIPs(req.PrevResult, req.Args.IfName)
	return attachment.CheckMasquerade(req, conf.Name, ips, opts)
}

func checkBridge(host *link.NS, conf *Config, prev *result.Result) (netlink.Link, error) {
	l, err := host.ByName(conf.Bridge)
	if err != nil {
		return nil, fmt.Errorf("bridge %q: %w", conf.Bridge, err)
	}
	if _, ok := l.(*netlink.Bridge); !ok {
		return nil, fmt.Errorf("bridge %q: is a %s, not a bridge", conf.Bridge, l.Type())
	}
	if want, ok := attachment.PrevInterface(prev, conf.Bridge, false); ok && want.Mac != "" &&
		!attachment.SameMAC(want.Mac, l.Attrs().HardwareAddr) {
		return nil, fmt.Errorf("bridge %q: MAC %s, prevResult says %s", conf.Bridge, l.Attrs().HardwareAddr, want.Mac)
	}
	if conf.PromiscMode != (l.Attrs().Promisc != 0) {
		return nil, fmt.Errorf("bridge %q: promiscuous mode is %t, config says %t", conf.Bridge, l.Attrs().Promisc != 0, conf.PromiscMode)
	}
	return l, nil
}

func checkVeth(ns attachment.Pair, req *skel.Request, br netlink.Link, prev *result.Result) error {
	if _, err := attachment.ContainerLink(req, ns.Cont, isVeth); err != nil {
		return err
	}
	peer, err := link.HostPeer(ns.Host, ns.Cont, req.Args.IfName)
	if err != nil {
		return err
	}
	if peer.Attrs().MasterIndex != br.Attrs().Index {
		return fmt.Errorf("host veth %q: not a port of bridge %q", peer.Attrs().Name, br.Attrs().Name)
	}
	if _, ok := attachment.PrevInterface(prev, peer.Attrs().Name, false); !ok {
		return errors.New("host veth " + peer.Attrs().Name + ": not in prevResult")
	}
	return nil
}

// isVeth is the bridge's test of the container interface's kind.
func isVeth(l netlink.Link) error {
	if _, ok := l.(*netlink.Veth); !ok {
		return fmt.Errorf("is a %s, not a veth", l.Type())
	}
	return nil
}
