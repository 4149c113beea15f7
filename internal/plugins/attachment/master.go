package attachment

import (
	"errors"
	"fmt"
	"net"

	"github.com/vishvananda/netlink"

	"github.com/cnikit/cni/internal/core/cnierror"
	"github.com/cnikit/cni/internal/host/link"
	"github.com/cnikit/cni/internal/spec/skel"
)

// The MTU bounds a config may ask for: 68 is the smallest MTU IPv4 allows.
const (
	minMTU = 68
	maxMTU = 65535
)

// ValidateMTU is the part of the mtu rule that needs no master: 0 (the kernel's default,
// the master's MTU) or 68-65535.
func ValidateMTU(mtu int) error {
	if mtu != 0 && (mtu < minMTU || mtu > maxMTU) {
		return cnierror.Invalid("mtu: must be 0 (the master's) or %d-%d, got %d", minMTU, maxMTU, mtu)
	}
	return nil
}

// ValidateMasterName applies the kernel's interface name rule to a master name taken
// from the config or a prevResult; "" (not set) passes.
func ValidateMasterName(name string) error {
	if name == "" {
		return nil
	}
	return skel.ValidateIfNameField("master", name)
}

// MasterNS returns the namespace the master lives in: the host's, or the container's
// with linkInContainer.
func MasterNS(host, cont *link.NS, inContainer bool) *link.NS {
	if inContainer {
		return cont
	}
	return host
}

// Master is the link a macvlan, ipvlan or vlan hangs off, and the namespace holding it.
type Master struct {
	NS   *link.NS
	Link netlink.Link
}

// FindMaster looks the master up in n: by name, or for name "" as the link of n's
// default route. A master that does not exist, or is the loopback interface, is an
// invalid config (code 7); a namespace without a default route is code 11, as a host
// still coming up may get one.
func FindMaster(n *link.NS, name string) (*Master, error) {
	if name == "" {
		l, err := n.DefaultRouteLink()
		if errors.Is(err, link.ErrNoDefaultRoute) {
			return nil, cnierror.Newf(cnierror.CodeTryAgainLater,
				"master: not set, and there is no default route to take it from (%v)", err)
		}
		if err != nil {
			return nil, fmt.Errorf("master: %w", err)
		}
		return &Master{NS: n, Link: l}, nil
	}
	l, err := n.ByName(name)
	if link.IsNotFound(err) {
		return nil, cnierror.Invalid("master: link %q does not exist%s", name, where(n))
	}
	if err != nil {
		return nil, fmt.Errorf("master: %w", err)
	}
	if l.Attrs().Flags&net.FlagLoopback != 0 {
		// The kernel's refusal would come as a bare "invalid argument" (code 999).
		return nil, cnierror.Invalid("master: %q is the loopback interface, which takes no child links", name)
	}
	return &Master{NS: n, Link: l}, nil
}

func where(n *link.NS) string {
	if n.Path == "" {
		return " in the host's network namespace"
	}
	return " in the container's network namespace (linkInContainer)"
}

// Name is the master's interface name.
func (m *Master) Name() string { return m.Link.Attrs().Name }

// Index is the master's interface index in its namespace, a child link's ParentIndex.
func (m *Master) Index() int { return m.Link.Attrs().Index }

// CheckMTU refuses a child MTU above the master's (code 7), which the kernel would refuse
// less legibly once the link is half made.
func (m *Master) CheckMTU(mtu int) error {
	if max := m.Link.Attrs().MTU; mtu > max {
		return cnierror.Invalid("mtu: %d is above the MTU of master %q (%d)", mtu, m.Name(), max)
	}
	return nil
}

// CheckParent verifies for CHECK that l still hangs off a link in n, and off the one
// called name when name is set. A child's ParentIndex (IFLA_LINK) is its master's index
// in the master's own namespace, even when the child lives in another.
func CheckParent(n *link.NS, l netlink.Link, name string) error {
	h := n.Handle()
	parent, err := h.LinkByIndex(l.Attrs().ParentIndex)
	if err != nil {
		return fmt.Errorf("master (index %d): %w", l.Attrs().ParentIndex, err)
	}
	if name != "" && parent.Attrs().Name != name {
		return fmt.Errorf("master is %q, config says %q", parent.Attrs().Name, name)
	}
	return nil
}
