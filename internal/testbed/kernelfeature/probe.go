package kernelfeature

import (
	"errors"
	"fmt"
	"runtime"
	"syscall"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"

	"github.com/cnikit/cni/internal/core/panics"
)

// Names of the links a probe creates; they live only in the probe's own
// namespace, so they cannot clash with anything.
const (
	probeLink   = "kfprobe0"
	probeParent = "kfparent0"
	probePeer   = "kfpeer0"
)

// probe creates the link that stands for feature in a throwaway namespace.
func probe(feature Feature) (bool, error) {
	var supported bool
	err := inThrowawayNetns(func(h *netlink.Handle) error {
		var err error
		supported, err = tryCreate(h, feature)
		return err
	})
	if err != nil {
		return false, fmt.Errorf("probe %s: %w", feature, err)
	}
	return supported, nil
}

// tryCreate adds one link of the feature's kind; an "operation not supported"
// answer (the kernel has no such link kind, or the option is compiled out)
// means the feature is missing, any other error is a failed probe.
func tryCreate(h *netlink.Handle, feature Feature) (bool, error) {
	link, err := probeLinkFor(h, feature)
	if err != nil {
		return false, err
	}
	if err := h.LinkAdd(link); err != nil {
		if unsupported(err) {
			return false, nil
		}
		return false, fmt.Errorf("add %s link: %w", link.Type(), err)
	}
	if feature == BridgeVLANFiltering {
		return bridgeFiltersVLANs(h, probeLink)
	}
	return true, nil
}

// probeLinkFor describes the link to create; kinds that stack on a lower
// device get a veth as parent, since veth is in every kernel we run on.
func probeLinkFor(h *netlink.Handle, feature Feature) (netlink.Link, error) {
	attrs := netlink.LinkAttrs{Name: probeLink}
	switch feature {
	case Dummy:
		return &netlink.Dummy{LinkAttrs: attrs}, nil
	case VRF:
		return &netlink.Vrf{LinkAttrs: attrs, Table: 100}, nil
	case Bond:
		return netlink.NewLinkBond(attrs), nil
	case BridgeVLANFiltering:
		on := true
		return &netlink.Bridge{LinkAttrs: attrs, VlanFiltering: &on}, nil
	}
	parent, err := addVethParent(h, probeParent, probePeer)
	if err != nil {
		return nil, err
	}
	attrs.ParentIndex = parent
	switch feature {
	case VLAN:
		return &netlink.Vlan{LinkAttrs: attrs, VlanId: 42}, nil
	case IPVLAN:
		return &netlink.IPVlan{LinkAttrs: attrs, Mode: netlink.IPVLAN_MODE_L2}, nil
	case Macvlan:
		return &netlink.Macvlan{LinkAttrs: attrs, Mode: netlink.MACVLAN_MODE_BRIDGE}, nil
	}
	return nil, fmt.Errorf("no probe for %v", feature)
}

// addVethParent creates a veth pair and returns the index of the end named
// name, to serve as lower device for vlan, ipvlan and macvlan links.
func addVethParent(h *netlink.Handle, name, peer string) (int, error) {
	veth := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: name}, PeerName: peer}
	if err := h.LinkAdd(veth); err != nil {
		return 0, fmt.Errorf("add veth parent %q: %w", name, err)
	}
	link, err := h.LinkByName(name)
	if err != nil {
		return 0, fmt.Errorf("look up veth parent %q: %w", name, err)
	}
	return link.Attrs().Index, nil
}

// bridgeFiltersVLANs reads the option back, because a kernel built without
// bridge VLAN filtering may accept the bridge and drop the option.
func bridgeFiltersVLANs(h *netlink.Handle, name string) (bool, error) {
	link, err := h.LinkByName(name)
	if err != nil {
		return false, fmt.Errorf("look up bridge %q: %w", name, err)
	}
	br, ok := link.(*netlink.Bridge)
	if !ok {
		return false, fmt.Errorf("link %q is a %s, not a bridge", name, link.Type())
	}
	return br.VlanFiltering != nil && *br.VlanFiltering, nil
}

// unsupported recognises the kernel's answers for a link kind or option it
// does not have.
func unsupported(err error) bool {
	return errors.Is(err, syscall.EOPNOTSUPP) || errors.Is(err, syscall.EPROTONOSUPPORT)
}

// inThrowawayNetns runs fn with a netlink handle bound to a brand-new,
// unnamed network namespace, which disappears with everything in it once fn
// returns. The namespace is created on a locked OS thread of a goroutine that
// ends without unlocking it, so the Go runtime discards that thread instead
// of handing a thread in the wrong namespace to other goroutines; the
// machine's own namespace is never entered or changed.
func inThrowawayNetns(fn func(h *netlink.Handle) error) error {
	done := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread dies with the goroutine
		done <- panics.Call(func() error { return inNewNetns(fn) })
	}()
	return <-done
}

func inNewNetns(fn func(h *netlink.Handle) error) error {
	ns, err := netns.New()
	if err != nil {
		return fmt.Errorf("create throwaway netns: %w", err)
	}
	// Closing the last reference (this fd, the handle's sockets, the
	// thread) destroys the namespace and its links; it has no name to remove.
	defer ns.Close()
	// Route netlink only: asking for every family would also open xfrm
	// netlink, which fails on kernels without xfrm_user loaded.
	h, err := netlink.NewHandleAt(ns, syscall.NETLINK_ROUTE)
	if err != nil {
		return fmt.Errorf("netlink handle in throwaway netns: %w", err)
	}
	defer h.Close()
	return fn(h)
}
