// Package tap is the tap plugin: it creates a persistent tap device inside the container
// for a VM (KubeVirt, Kata) to attach to, optionally owned by a user and group, with
// several queues, enslaved to a bridge that already exists in the container, and with
// IPAM's addresses. The tap is made with ioctls on /dev/net/tun and configured over
// netlink; nothing is exec'd but, with an SELinux context, the plugin's own binary, so
// that the tap carries that context's label. DEL releases the addresses and deletes the
// tap, succeeding when the netns or the tap is already gone; CHECK verifies the tap and
// its addresses; GC and STATUS ask IPAM.
package tap

import (
	"errors"
	"fmt"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/cnikit/cni/internal/core/cnierror"
	"github.com/cnikit/cni/internal/core/steps"
	"github.com/cnikit/cni/internal/host/link"
	"github.com/cnikit/cni/internal/plugins/attachment"
	"github.com/cnikit/cni/internal/plugins/onelink"
	"github.com/cnikit/cni/internal/spec/skel"
)

// Plugin returns the tap plugin's registry entry: a member of the onelink skeleton whose
// link is made inside the container. Its STATUS reads no config: IPAM's alone.
func Plugin() *skel.Plugin {
	p := onelink.Plugin(onelink.Member[*Config]{
		Name:  "tap",
		About: "creates a tap device in the container for a VM to attach to",
		Load:  load,
		Link:  onelink.InContainer[*Config]{Create: create, Verify: verifyTap},
	})
	p.Status = attachment.Status
	return p
}

// selfExe is the running binary, exec'd as the tap creator under an SELinux label.
const selfExe = "/proc/self/exe"

// nameTries bounds the temporary names tried: one clash among 2^32 is already unlikely.
const nameTries = 3

// create makes the tap CNI_IFNAME in the container, enslaved to the configured bridge
// there. Once the tap exists, it returns how to delete it by its name of the moment.
func create(req *skel.Request, c *Config, cont *link.NS) (remove func() error, err error) {
	var br netlink.Link
	if c.Bridge != "" {
		if br, err = findBridge(cont, c.Bridge); err != nil {
			return nil, err
		}
	}
	if err := cont.NameFree(req.Args.IfName); err != nil {
		return nil, err
	}

	step := steps.Begin(req.Context(), steps.LinkCreate)
	tmp, err := createTap(req, c, cont)
	if err := step.Done(err); err != nil {
		return nil, err
	}
	name := tmp
	remove = func() error { return cont.Delete(name) }
	step = steps.Begin(req.Context(), steps.LinkUp)
	renamed, err := setUp(cont, c, tmp, req.Args.IfName, br)
	if renamed {
		name = req.Args.IfName
	}
	return remove, step.Done(err)
}

// findBridge returns the bridge called name inside the container.
func findBridge(cont *link.NS, name string) (netlink.Link, error) {
	br, err := cont.ByName(name)
	if link.IsNotFound(err) {
		return nil, cnierror.Invalid("bridge: no interface %q in the container netns", name)
	}
	if err != nil {
		return nil, err
	}
	if _, ok := br.(*netlink.Bridge); !ok {
		return nil, cnierror.Invalid("bridge: %q is a %s, not a bridge", name, br.Type())
	}
	return br, nil
}

// createTap makes the tap under a temporary name inside the container and returns the
// name: made under its final name, TUNSETIFF could never say whether CNI_IFNAME was
// taken, and a rename can.
func createTap(req *skel.Request, c *Config, cont *link.NS) (string, error) {
	labelled := c.SelinuxContext != "" && selinuxEnabled()
	if c.SelinuxContext != "" && !labelled && req.Stderr != nil {
		fmt.Fprintf(req.Stderr, "tap: SELinux is not enabled: selinuxContext %q not applied\n", c.SelinuxContext)
	}
	var err error
	for try := range nameTries {
		spec := tapSpec{Name: link.TempLinkName(req.Args.IfName, try), MultiQueue: c.MultiQueue, Owner: c.Owner, Group: c.Group}
		if labelled {
			err = createLabelled(selfExe, c.SelinuxContext, cont, spec)
		} else {
			err = cont.Do(spec.create)
		}
		if !errors.Is(err, unix.EBUSY) {
			return spec.Name, err
		}
	}
	return "", err
}

// setUp gives the new tap its MTU and MAC, renames it to ifName, enslaves it to the
// bridge and sets it up. It reports whether the rename was done, so that the caller's
// undo deletes the tap by the right name.
func setUp(cont *link.NS, c *Config, tmp, ifName string, br netlink.Link) (renamed bool, err error) {
	h := cont.Handle()
	l, err := cont.ByName(tmp)
	if err != nil {
		return false, err
	}
	if c.MTU != 0 {
		if err := h.LinkSetMTU(l, c.MTU); err != nil {
			return false, fmt.Errorf("tap: set mtu %d: %w", c.MTU, err)
		}
	}
	if c.mac != nil {
		if err := h.LinkSetHardwareAddr(l, c.mac); err != nil {
			return false, fmt.Errorf("tap: set mac %s: %w", c.mac, err)
		}
	}
	if err := h.LinkSetName(l, ifName); err != nil {
		if errors.Is(err, unix.EEXIST) {
			return false, link.IfNameTaken(ifName)
		}
		return false, fmt.Errorf("tap: rename %s to %s: %w", tmp, ifName, err)
	}
	if br != nil {
		if err := h.LinkSetMaster(l, br); err != nil {
			return true, fmt.Errorf("tap %s: enslave to bridge %s: %w", ifName, br.Attrs().Name, err)
		}
	}
	if err := h.LinkSetUp(l); err != nil {
		return true, fmt.Errorf("tap %s: set up: %w", ifName, err)
	}
	return true, nil
}
