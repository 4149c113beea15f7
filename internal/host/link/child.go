package link

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"syscall"

	"github.com/vishvananda/netlink"

	"github.com/cnikit/cni/internal/core/background"
	"github.com/cnikit/cni/internal/core/cnierror"
	"github.com/cnikit/cni/internal/core/ifname"
	"github.com/cnikit/cni/internal/core/steps"
	"github.com/cnikit/cni/internal/host/nlconn"
)

// maxTempNameTries bounds the retries when a random temporary name is taken.
const maxTempNameTries = 3

// CreateChild makes l appear inside cont as ifName. l is a link of any kind with its
// kind's attributes filled in and, for a stacked kind (macvlan, ipvlan, vlan), its
// ParentIndex naming a link in parent's namespace; CreateChild sets its name and target
// namespace itself. The request goes to parent's namespace under a temporary random name
// and the kernel places the link in cont in the same request (IFLA_NET_NS_FD); then it is
// renamed. The temporary name is needed because the kernel first looks a new link's name
// up in the requesting namespace: created as "eth0" directly, it would clash with the
// host's own eth0. The caller undoes it with cont.Delete(ifName).
//
// A CNI_IFNAME already present in cont is a CNI error (code 4); a kernel without the link
// kind gives code 11. Other kernel refusals are returned wrapped, for the plugin to name
// the field they concern (EEXIST: a vlan id already used on the master, for instance).
func CreateChild(parent, cont *NS, l netlink.Link, ifName string) (netlink.Link, error) {
	if err := cont.NameFree(ifName); err != nil {
		return nil, err
	}
	step := cont.steps.Begin(steps.LinkCreate)
	tmp, err := addChild(parent, cont, l, ifName)
	if err := step.Done(err); err != nil {
		return nil, err
	}
	// A step of its own: its start is where an ADD killed leaves the link under its
	// temporary name, which DEL must find too.
	step = cont.steps.Begin(steps.LinkRename)
	created, err := renameChild(cont.Handle(), tmp, ifName)
	if err := step.Done(err); err != nil {
		return nil, errors.Join(err, cont.Delete(tmp))
	}
	return created, nil
}

// NameFree checks that no interface in n is called ifName, for an ADD about to make
// CNI_IFNAME there: a taken name is the CNI error of IfNameTaken, the loopback
// interface's a CNI error of its own (no plugin may take it over, and DEL leaves it),
// and so is a name the kernel gives no link (reservedIfName).
func (n *NS) NameFree(ifName string) error {
	if err := reservedIfName(ifName); err != nil {
		return err
	}
	l, err := n.ByName(ifName)
	switch {
	case err == nil && isLoopback(l):
		return loopbackIfName(ifName)
	case err == nil:
		return IfNameTaken(ifName)
	case !IsNotFound(err):
		return fmt.Errorf("container interface %q: %w", ifName, err)
	}
	return nil
}

// loopbackIfName is the CNI error for a CNI_IFNAME that names the container's loopback
// interface.
func loopbackIfName(ifName string) error {
	return cnierror.Newf(cnierror.CodeInvalidEnv, "CNI_IFNAME: %q is the container's loopback interface, not one a plugin makes", ifName)
}

// reservedIfName is the CNI error for a CNI_IFNAME that no link may have
// (ifname.KernelReserved): refused before anything is made; DEL finds no such link
// and succeeds.
func reservedIfName(ifName string) error {
	if ifname.KernelReserved(ifName) {
		return cnierror.Newf(cnierror.CodeInvalidEnv, "CNI_IFNAME: %q names the kernel's interface defaults (net.ipv4.conf.%s), which no link may be called", ifName, ifName)
	}
	return nil
}

// IfNameTaken is the CNI error for a CNI_IFNAME already present in the container.
func IfNameTaken(ifName string) error {
	return cnierror.Newf(cnierror.CodeInvalidEnv, "CNI_IFNAME: %q: %v", ifName, ErrExists)
}

// addChild sends the create request and returns the temporary name the link got. EEXIST
// is retried only when the temporary name really is taken (in either namespace); any
// other EEXIST is the kernel refusing the link itself.
func addChild(parent, cont *NS, l netlink.Link, ifName string) (string, error) {
	ph := parent.Handle()
	var err error
	attrs := l.Attrs()
	if parent != cont {
		attrs.Namespace = netlink.NsFd(cont.Fd())
	}
	for try := range maxTempNameTries {
		attrs.Name = TempLinkName(ifName, try)
		err = ph.LinkAdd(l)
		if err == nil {
			return attrs.Name, nil
		}
		if !errors.Is(err, syscall.EEXIST) || !nameTaken(parent, cont, attrs.Name) {
			break
		}
	}
	if errors.Is(err, syscall.EOPNOTSUPP) {
		return "", cnierror.Newf(cnierror.CodeTryAgainLater,
			"the kernel does not support %s links (is its module available?): %v", l.Type(), err)
	}
	return "", fmt.Errorf("create %s link: %w", l.Type(), err)
}

func nameTaken(parent, cont *NS, name string) bool {
	for _, n := range []*NS{parent, cont} {
		if _, err := n.ByName(name); err == nil {
			return true
		}
	}
	return false
}

func renameChild(h *nlconn.Handle, tmp, ifName string) (netlink.Link, error) {
	l, err := h.LinkByName(tmp)
	if err != nil {
		return nil, fmt.Errorf("new link %q: %w", tmp, err)
	}
	if err := h.LinkSetName(l, ifName); err != nil {
		if errors.Is(err, syscall.EEXIST) {
			return nil, IfNameTaken(ifName)
		}
		return nil, fmt.Errorf("rename %q to %q: %w", tmp, ifName, err)
	}
	// No lookup after the rename: were it to fail, the caller's undo would delete the
	// temporary name, gone by then, and leave the link behind as ifName.
	l.Attrs().Name = ifName
	return l, nil
}

// TempLinkName returns the name a new link for ifName holds until it is renamed:
// "cnitmp" and 8 hex digits. The first try's digits are a hash of ifName, so that a DEL
// can find the link an ADD killed before the rename left behind (DeleteChild); later
// tries, after a clash, are random.
func TempLinkName(ifName string, try int) string {
	if try > 0 {
		return fmt.Sprintf("cnitmp%08x", rand.Uint32())
	}
	h := fnv.New32a()
	h.Write([]byte(ifName))
	return fmt.Sprintf("cnitmp%08x", h.Sum32())
}

// DeleteChild removes the container interface ifName and what an ADD interrupted before
// its rename left of it (its first temporary name, TempLinkName), for DEL: a netns or
// link that is already gone is success.
func DeleteChild(path, ifName string) error {
	n, err := OpenIfPresent(path)
	if n == nil {
		return err
	}
	defer n.Close()
	return errors.Join(n.Delete(ifName), n.Delete(TempLinkName(ifName, 0)))
}

// DeleteChildInBackground is DeleteChild in the background of the process, as
// DeleteInBackground.
func DeleteChildInBackground(ctx context.Context, path, ifName string) error {
	if path == "" {
		return nil
	}
	step := steps.Begin(ctx, steps.LinkDelete)
	return background.Start(ctx, func() error { return step.Done(DeleteChild(path, ifName)) })
}
