// Package hostdevice is the host-device plugin: it hands an existing device of the host
// (a NIC, an SR-IOV VF, a veth end) to a container. ADD finds the device by name, MAC,
// sysfs path, PCI address or the runtime's deviceID, moves it through a throw-away netns
// into the container under CNI_IFNAME with its host name in the alias, and configures
// IPAM's addresses on it; a PCI function bound to a userspace I/O driver (DPDK) is not
// moved and its addresses are only reported. DEL releases the addresses and brings the
// device back under its name with the MTU and up state it had; it succeeds when the
// device or the netns is already gone, finishes the job when the kernel returned the
// device to the host by itself, and releases IPAM even without a netns. CHECK verifies
// the device and its addresses; GC drops the state of attachments no longer in use and
// asks IPAM to do the same; STATUS asks IPAM. The state files are read as untrusted
// input (internal/core/statedir) and only say what to put back: DEL and GC act on a link
// only when it proves to be the device ADD moved (its alias plus its permanent MAC or
// index), and keep the state of a physical device out of reach until it is back.
package hostdevice

import (
	"errors"
	"fmt"
	"net"
	"slices"

	"github.com/vishvananda/netlink"

	"github.com/cnikit/cni/internal/core/cnierror"
	"github.com/cnikit/cni/internal/core/rollback"
	"github.com/cnikit/cni/internal/core/version"
	"github.com/cnikit/cni/internal/host/link"
	"github.com/cnikit/cni/internal/plugins/attachment"
	"github.com/cnikit/cni/internal/result"
	"github.com/cnikit/cni/internal/spec/skel"
)

// Plugin returns the host-device plugin's registry entry.
func Plugin() *skel.Plugin { return newPlugin(sysfs{root: "/sys"}) }

// newPlugin is Plugin reading the device tree below another root (tests).
func newPlugin(sys sysfs) *skel.Plugin {
	p := plugin{sys: sys}
	return &skel.Plugin{
		Name:     "host-device",
		About:    "moves an existing host device (NIC, VF, veth end) into the container",
		Versions: version.All(),
		Add:      p.add,
		Del:      p.del,
		Check:    p.check,
		GC:       p.gc,
		Status:   p.status,
	}
}

type plugin struct {
	sys sysfs
}

func (p plugin) add(req *skel.Request) (_ *result.Result, err error) {
	c, err := load(req, p.sys)
	if err != nil {
		return nil, err
	}
	ns, err := attachment.Open(req, true)
	if err != nil {
		return nil, err
	}
	defer ns.Close()
	var s *store
	if !c.dpdk {
		if s, err = openStore(c.dataDir, true); err != nil {
			return nil, err
		}
		defer s.Close() // after the undo steps, which remove the state
	}

	var undo rollback.Stack
	defer undo.OnError(&err)

	if c.dpdk {
		// The container drives the PCI function itself through its userspace driver:
		// there is no kernel interface to move, and the addresses are for it to apply.
		addrs, err := attachment.AddIPAM(req, &undo)
		if err != nil {
			return nil, err
		}
		return attachment.Report(req, addrs, result.Interface{Name: req.Args.IfName, Sandbox: req.Args.Netns, PciID: c.sel.value}), nil
	}
	if err := p.attach(req, c, s, ns.Host, ns.Cont, &undo); err != nil {
		return nil, err
	}
	addrs, err := attachment.AddIPAM(req, &undo)
	if err != nil {
		return nil, err
	}
	return attachment.Finish(req, ns.Cont, addrs, attachment.Options{})
}

// attach records the device's state, moves it into the container and sets it up.
func (p plugin) attach(req *skel.Request, c *conf, s *store, host, cont *link.NS, undo *rollback.Stack) error {
	ifName := req.Args.IfName
	hl, err := find(host, p.sys, c.sel)
	if err != nil {
		return err
	}
	if hl.Attrs().Flags&net.FlagLoopback != 0 {
		return cnierror.Invalid("%s: %s is the loopback interface", c.sel.field, hl.Attrs().Name)
	}
	if err := cont.NameFree(ifName); err != nil {
		return err
	}
	st := snapshot(hl, p.sys.deviceOf(hl.Attrs().Name))
	st.Network, st.ContainerID, st.IfName = req.Net.Name, req.Args.ContainerID, ifName
	name := stateName(req.Args.ContainerID, ifName)
	if err := s.write(name, &st); err != nil {
		return err
	}
	undo.Push("state", func() error { return s.remove(name) })

	cl, err := moveIn(host, cont, &st, ifName)
	if err != nil {
		return err
	}
	undo.Push("move back", func() error {
		_, err := moveOut(host, cont, ifName, &st)
		return err
	})
	if idx := cl.Attrs().Index; idx != st.Index {
		// Its host index was taken in the container: the new one proves it there.
		st.ContainerIndex = idx
		if err := s.write(name, &st); err != nil {
			return err
		}
	}
	// Up in the container, as the reference leaves it, addresses or not.
	if err := cont.Handle().LinkSetUp(cl); err != nil {
		return fmt.Errorf("container %s: set up: %w", ifName, err)
	}
	return nil
}

func (p plugin) del(req *skel.Request) error {
	return errors.Join(attachment.DelIPAM(req), p.giveBack(req, loadForDel(req)))
}

// giveBack returns the attachment's device to the host and drops its state. The state
// stays when that fails, so that a retried DEL can finish, and when the device is out
// of reach and will come back (see recoverDevice).
func (p plugin) giveBack(req *skel.Request, dataDir string) error {
	s, err := openStore(dataDir, false)
	if err != nil {
		note(req, "%v; returning the device by its alias only", err)
	}
	defer s.Close()
	name := stateName(req.Args.ContainerID, req.Args.IfName)
	st, err := s.read(name)
	if err != nil {
		note(req, "%v", err)
	}
	host, err := link.Current()
	if err != nil {
		return err
	}
	defer host.Close()
	cont, err := link.OpenIfPresent(req.Args.Netns)
	if err != nil {
		return err
	}
	if cont != nil {
		defer cont.Close()
		moved, err := moveOut(host, cont, req.Args.IfName, st)
		if err != nil {
			return err
		}
		if moved {
			return s.remove(name)
		}
	}
	if st != nil {
		// Without CNI_NETNS the device may still be inside a container that is being
		// torn down, whatever kind it is: nothing proves a virtual one died.
		keep, err := p.recoverDevice(req, host, st, req.Args.Netns == "")
		if err != nil || keep {
			return err
		}
	}
	return s.remove(name)
}

// recoverDevice handles a device that is not in the container: the kernel hands a
// physical device back to the host when its netns dies, and destroys a virtual one. A
// physical device that is in neither (its netns lingers, held by a process, or DEL came
// without CNI_NETNS while the container was still being torn down) will come back:
// keep reports that its state must stay for a later DEL or GC to bring it home, until
// it is seen back or its hardware is gone. netnsUnknown is a DEL without CNI_NETNS: the
// device, virtual or not, may still be in the container, for a DEL with the netns to
// bring home with what ADD recorded (GC, which the runtime sends for attachments that
// are gone, drops it once it is nowhere).
func (p plugin) recoverDevice(req *skel.Request, host *link.NS, st *saved, netnsUnknown bool) (keep bool, err error) {
	l, err := returned(host, st)
	switch {
	case err != nil:
		return true, err
	case l == nil && p.sys.present(st.Device):
		note(req, "%s (%s of container %s) is not back in the host yet; its state is kept for a later DEL or GC to bring it home",
			st.Name, st.IfName, st.ContainerID)
		return true, nil
	case l == nil && netnsUnknown:
		note(req, "%s (%s of container %s) is not in the host, and DEL came without CNI_NETNS: its state is kept for a DEL with the netns to bring it home (or GC to drop it)",
			st.Name, st.IfName, st.ContainerID)
		return true, nil
	case l == nil:
		note(req, "%s (%s of container %s) is gone: a virtual device dies with its netns", st.Name, st.IfName, st.ContainerID)
		return false, nil
	case l.Attrs().Name == st.Name:
		// Back under its own name (CNI_IFNAME was that name), but down and with the
		// alias ADD gave it: put back what ADD took, as for a renamed one.
		return false, errors.Join(restore(host, l, st), clearAlias(host, l))
	}
	if other, err := host.ByName(st.Name); err == nil {
		note(req, "%s came back to the host as %s, but %s is another link's name (index %d) now; leaving it as %s",
			st.Name, l.Attrs().Name, st.Name, other.Attrs().Index, l.Attrs().Name)
		return false, errors.Join(restore(host, l, st), clearAlias(host, l))
	}
	note(req, "%s came back to the host as %s when its netns died; restoring its name", st.Name, l.Attrs().Name)
	return false, bringHome(host, l, st)
}

func (p plugin) check(req *skel.Request) error {
	c, err := load(req, p.sys)
	if err != nil {
		return err
	}
	if c.dpdk {
		// load found the function still bound to its userspace driver: only the head of
		// every CHECK (IPAM, the prevResult) to ask.
		return attachment.CheckHead(req)
	}
	cont, err := link.OpenContainer(req.Context(), req.Args.Netns)
	if err != nil {
		return err
	}
	defer cont.Close()
	return attachment.Check(req, cont, func(l netlink.Link) error { return verifyDevice(c, l) })
}

// verifyDevice checks that the container link is a device host-device moved, the one
// the config names.
func verifyDevice(c *conf, l netlink.Link) error {
	a := l.Attrs()
	if a.Alias == "" {
		return fmt.Errorf("no alias naming its host device; not moved by host-device")
	}
	if c.sel.kind == byName && a.Alias != c.sel.value {
		return fmt.Errorf("came from %s, the config names device %s", a.Alias, c.sel.value)
	}
	return nil
}

// gc forgets the state of attachments no longer in use, bringing home any of their
// devices the kernel returned to the host, and asks IPAM to release their addresses.
func (p plugin) gc(req *skel.Request) error {
	return errors.Join(p.gcStates(req, loadForDel(req)), attachment.GC(req))
}

func (p plugin) gcStates(req *skel.Request, dataDir string) error {
	s, err := openStore(dataDir, false)
	if err != nil {
		return err
	}
	defer s.Close()
	states, err := s.list(req.Net.Name)
	if err != nil || len(states) == 0 {
		return err
	}
	host, err := link.Current()
	if err != nil {
		return err
	}
	defer host.Close()
	var errs []error
	for name, st := range states {
		if slices.Contains(req.ValidAttachments, skel.Attachment{ContainerID: st.ContainerID, IfName: st.IfName}) {
			continue
		}
		keep, err := p.recoverDevice(req, host, st, false)
		if err != nil {
			errs = append(errs, err)
		}
		if err != nil || keep {
			continue
		}
		errs = append(errs, s.remove(name))
	}
	return errors.Join(errs...)
}

func (p plugin) status(req *skel.Request) error {
	if _, err := loadDataDir(req); err != nil {
		return err
	}
	return attachment.Status(req)
}

// note writes a line for the runtime's log.
func note(req *skel.Request, format string, a ...any) {
	if req.Stderr != nil {
		fmt.Fprintf(req.Stderr, "host-device: "+format+"\n", a...)
	}
}
