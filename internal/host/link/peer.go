package link

import (
	"errors"
	"fmt"
	"time"

	"github.com/vishvananda/netlink"

	"github.com/cnikit/cni/internal/core/steps"
)

// ErrNotVeth says that a container interface has no host end: it is no veth.
var ErrNotVeth = errors.New("not a veth")

// HostPeer returns the host end of the veth whose container end is ifName inside cont:
// the container link's peer index (IFLA_LINK) names a link in the host namespace, which
// must itself be a veth pointing back. Bandwidth and portmap use this to find the host
// interface from a prevResult that may not name it.
func HostPeer(host, cont *NS, ifName string) (netlink.Link, error) {
	cl, err := cont.ByName(ifName)
	if err != nil {
		return nil, err
	}
	if _, ok := cl.(*netlink.Veth); !ok {
		return nil, fmt.Errorf("container interface %q is a %s: %w", ifName, cl.Type(), ErrNotVeth)
	}
	peer := cl.Attrs().ParentIndex
	if peer == 0 {
		return nil, fmt.Errorf("container veth %q: kernel reported no peer index", ifName)
	}
	hl, err := host.h.LinkByIndex(peer)
	if err != nil {
		return nil, fmt.Errorf("container veth %q: host peer index %d: %w", ifName, peer, err)
	}
	if _, ok := hl.(*netlink.Veth); !ok || hl.Attrs().ParentIndex != cl.Attrs().Index {
		return nil, fmt.Errorf("container veth %q: host link %d (%s) is not its peer", ifName, peer, hl.Attrs().Name)
	}
	return hl, nil
}

// WaitOperUp polls the link called name until its operational state is up, giving up
// after timeout. A veth turns up a moment after both ends are set up.
func WaitOperUp(n *NS, name string, timeout time.Duration) (_ netlink.Link, err error) {
	defer n.steps.Begin(steps.WaitLinkUp).End(&err)
	deadline := time.Now().Add(timeout)
	delay := time.Millisecond
	for {
		l, err := n.ByName(name)
		if err != nil {
			return nil, err
		}
		if l.Attrs().OperState == netlink.OperUp {
			return l, nil
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("link %q: still %s after %s", name, l.Attrs().OperState, timeout)
		}
		time.Sleep(delay)
		delay = min(2*delay, 50*time.Millisecond)
	}
}
