package link

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"syscall"

	"github.com/vishvananda/netlink"

	"github.com/cnikit/cni/internal/core/steps"
	"github.com/cnikit/cni/internal/host/nlconn"
)

// ErrExists reports that the container interface name is already taken in the
// container: the spec says ADD must then fail rather than reuse it.
var ErrExists = errors.New("interface already exists in the container")

// VethOptions describes a veth pair to create.
type VethOptions struct {
	// IfName is the container end's name (CNI_IFNAME).
	IfName string
	// HostName is the host end's name; empty picks a random "veth<8 hex>".
	HostName string
	// MTU applies to both ends; 0 keeps the kernel default.
	MTU int
	// MAC is the container end's hardware address; nil lets the kernel choose.
	MAC net.HardwareAddr
	// ContainerUp sets the container end up too (the host end is always set up).
	// Interface plugins usually leave this to ConfigureIface.
	ContainerUp bool
}

// Veth is a created pair, each end looked up in its own namespace.
type Veth struct {
	Host      netlink.Link
	Container netlink.Link
}

// maxNameTries bounds the retries when a random host name is already taken.
const maxNameTries = 10

// CreateVeth creates a veth pair from inside the container namespace, with the peer
// placed in the host namespace by the kernel in the same request: the container end
// never exists in the host, so it cannot clash with a host link of the same name. The
// caller undoes it with cont.Delete(opts.IfName), which removes both ends.
//
// A container interface name already taken fails the create (EEXIST), which is when
// the container is asked whether the name is the one taken (ErrExists) or the host
// end's random one (another is drawn): a name that is free costs no lookup.
func CreateVeth(host, cont *NS, opts VethOptions) (*Veth, error) {
	v, err := createVeth(host, cont, opts)
	if err != nil {
		return nil, err
	}
	if err = setUp(host, v.Host, opts.ContainerUp, cont, v.Container); err != nil {
		_ = cont.Delete(opts.IfName)
		return nil, err
	}
	return v, nil
}

// createVeth makes the pair and looks both ends up: the step LinkCreate, whose end
// leaves the host end down (the state an ADD killed there leaves, issue 36).
func createVeth(host, cont *NS, opts VethOptions) (_ *Veth, err error) {
	defer cont.steps.Begin(steps.LinkCreate).End(&err)
	ch := cont.Handle()
	if err := reservedIfName(opts.IfName); err != nil {
		return nil, err
	}
	hostName, err := addVeth(ch, host, opts)
	if err != nil {
		return nil, err
	}
	v, err := lookupVeth(host, cont, hostName, opts.IfName)
	if err != nil {
		_ = cont.Delete(opts.IfName)
		return nil, err
	}
	return v, nil
}

// addVeth sends the create request, retrying with a fresh random host name when the
// chosen one is taken. It returns the host end's name.
func addVeth(ch *nlconn.Handle, host *NS, opts VethOptions) (string, error) {
	for try := range maxNameTries {
		name := opts.HostName
		if name == "" {
			name = RandomVethName()
		}
		// NewLinkAttrs, not a literal: a zero TxQLen is sent as txqueuelen 0, where
		// the reference and iproute2 leave the kernel's default (1000).
		attrs := netlink.NewLinkAttrs()
		attrs.Name, attrs.MTU, attrs.HardwareAddr = opts.IfName, opts.MTU, opts.MAC
		v := &netlink.Veth{
			LinkAttrs:     attrs,
			PeerName:      name,
			PeerNamespace: netlink.NsFd(host.Fd()),
			PeerTxQLen:    -1,
		}
		err := ch.LinkAdd(v)
		if err == nil {
			return name, nil
		}
		if errors.Is(err, syscall.EEXIST) && try == 0 {
			if err := nameFree(ch, opts.IfName); err != nil {
				return "", err
			}
		}
		if errors.Is(err, syscall.EEXIST) && opts.HostName == "" {
			continue
		}
		return "", fmt.Errorf("create veth %s/%s: %w", opts.IfName, name, err)
	}
	return "", fmt.Errorf("create veth %s: no free host name after %d tries", opts.IfName, maxNameTries)
}

// nameFree reports whether the container end's name is free in the container: a
// failed create asks it, to tell its own name taken from the host end's.
func nameFree(ch *nlconn.Handle, ifName string) error {
	l, err := ch.LinkByName(ifName)
	switch {
	case err == nil && isLoopback(l):
		return loopbackIfName(ifName)
	case err == nil:
		return fmt.Errorf("container veth name %q: %w", ifName, ErrExists)
	case !IsNotFound(err):
		return fmt.Errorf("container veth name %q: %w", ifName, err)
	}
	return nil
}

func lookupVeth(host, cont *NS, hostName, ifName string) (*Veth, error) {
	h, err := host.ByName(hostName)
	if err != nil {
		return nil, fmt.Errorf("host veth: %w", err)
	}
	c, err := cont.ByName(ifName)
	if err != nil {
		return nil, fmt.Errorf("container veth: %w", err)
	}
	return &Veth{Host: h, Container: c}, nil
}

// setUp sets the host end up, and the container end when contUp: the step LinkUp.
func setUp(host *NS, hl netlink.Link, contUp bool, cont *NS, cl netlink.Link) (err error) {
	defer cont.steps.Begin(steps.LinkUp).End(&err)
	if err := host.h.LinkSetUp(hl); err != nil {
		return fmt.Errorf("host veth %q: set up: %w", hl.Attrs().Name, err)
	}
	if contUp {
		if err := cont.h.LinkSetUp(cl); err != nil {
			return fmt.Errorf("container veth %q: set up: %w", cl.Attrs().Name, err)
		}
	}
	return nil
}

// RandomVethName returns "veth" followed by 8 random hex digits, the reference's host
// name scheme. math/rand/v2's top-level generator is seeded from the OS in every
// process, so concurrent plugins draw independent names; unpredictability is not
// needed (addVeth retries on a clash).
func RandomVethName() string {
	return fmt.Sprintf("veth%08x", rand.Uint32())
}
