package link

import (
	"cmp"
	"errors"
	"fmt"
	"net"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netlink/nl"
	"golang.org/x/sys/unix"

	"github.com/cnikit/cni/internal/core/steps"
	"github.com/cnikit/cni/internal/host/nlconn"
	"github.com/cnikit/cni/internal/host/ns"
)

// Relocation describes moving an existing link to another namespace under a new name.
//
// A rename is seen by whoever watches the namespace it happens in: udev and
// NetworkManager on a host react to a device that shows up under one name and is
// renamed a moment later, and race with the rename. RenameIn says where the rename may
// happen: the container side, whose observers do not matter, or, when nil, a
// throw-away namespace (the reference's way), so that neither side ever sees the link
// under a second name.
type Relocation struct {
	From, To *NS
	// Name is the link's name in From.
	Name string
	// NewName is its name in To.
	NewName string
	// Alias is the ifalias it carries in To; "" clears it.
	Alias string
	// RenameIn is From, To or nil (see above).
	RenameIn *NS
}

// Relocate moves a link as r says. The link arrives down in To (the kernel closes a link
// that changes namespace). When a step fails the link is put back in From under its old
// name and alias, up again if it was up, and the error says what failed.
//
// Moving a link between namespaces is the expensive part (the kernel waits for an RCU
// grace period, 15-50 ms on a busy host), so renaming in To or From costs one move and
// the throw-away namespace two.
func Relocate(r Relocation) (_ netlink.Link, err error) {
	defer cmp.Or(r.To.steps, r.From.steps).Begin(steps.LinkMove).End(&err)
	l, err := r.From.ByName(r.Name)
	if err != nil {
		return nil, err
	}
	m := &move{Relocation: r, index: l.Attrs().Index, wasUp: l.Attrs().Flags&net.FlagUp != 0, oldAlias: l.Attrs().Alias}
	switch r.RenameIn {
	case r.To:
		err = m.renameOnArrival()
	case r.From:
		err = m.renameBeforeLeaving()
	default:
		err = m.throughTemp()
	}
	if err != nil {
		return nil, err
	}
	return r.To.ByName(r.NewName)
}

// move is one Relocate in progress.
type move struct {
	Relocation
	index    int
	wasUp    bool
	oldAlias string
}

// renameOnArrival moves and renames the link in one request: under one hold of the
// kernel's RTNL lock the link leaves From under its name and is renamed inside To (or
// takes NewName as it arrives, when Name is taken there). From never sees NewName.
func (m *move) renameOnArrival() error {
	err := setLink(m.From, m.index, nsFd(m.To), ifName(m.NewName), ifAlias(m.Alias))
	if err == nil {
		return nil
	}
	err = fmt.Errorf("link %q: move to netns %s as %q: %w", m.Name, m.To.name(), m.NewName, err)
	if m.stillIn(m.From) {
		return errors.Join(err, upByName(m.From, m.Name, m.wasUp))
	}
	// The kernel moves first and renames after: a failed rename leaves the link in To
	// under its old name.
	l, lerr := m.To.ByName(m.Name)
	if lerr != nil {
		return errors.Join(err, fmt.Errorf("link %q: lost on the way to %s: %w", m.Name, m.To.name(), lerr))
	}
	if uerr := setLink(m.To, l.Attrs().Index, nsFd(m.From), ifAlias(m.oldAlias)); uerr != nil {
		return errors.Join(err, fmt.Errorf("link %q: move back: %w", m.Name, uerr))
	}
	return errors.Join(err, upByName(m.From, m.Name, m.wasUp))
}

// stillIn reports whether the link is still in n under its old name and index.
func (m *move) stillIn(n *NS) bool {
	l, err := n.h.LinkByIndex(m.index)
	return err == nil && l.Attrs().Name == m.Name
}

// renameBeforeLeaving renames the link inside From, then moves it: To only ever sees
// NewName. When NewName is taken in From it goes through a throw-away namespace.
func (m *move) renameBeforeLeaving() error {
	if err := m.setDown(); err != nil {
		return err
	}
	err := setLink(m.From, m.index, ifName(m.NewName), ifAlias(m.Alias))
	if errors.Is(err, unix.EEXIST) {
		return m.throughTemp()
	}
	if err != nil {
		return errors.Join(fmt.Errorf("link %q: rename to %q: %w", m.Name, m.NewName, err), m.restore(m.From, m.index))
	}
	if err := setLink(m.From, m.index, nsFd(m.To)); err != nil {
		return errors.Join(fmt.Errorf("link %q: move to netns %s: %w", m.NewName, m.To.name(), err), m.restore(m.From, m.index))
	}
	return nil
}

// throughTemp moves the link into a fresh namespace, renames it there and moves it on.
func (m *move) throughTemp() error {
	if err := m.setDown(); err != nil {
		return err
	}
	tmp, err := newTemp()
	if err != nil {
		return errors.Join(err, m.restore(m.From, m.index))
	}
	defer tmp.Close()
	if err := setLink(m.From, m.index, nsFd(tmp)); err != nil {
		return errors.Join(fmt.Errorf("link %q: move to a temporary netns: %w", m.Name, err), m.restore(m.From, m.index))
	}
	// The index may change on the way in; it stays put inside tmp.
	tl, err := tmp.ByName(m.Name)
	if err != nil {
		tl, err = tmp.ByName(m.NewName)
	}
	if err != nil {
		return fmt.Errorf("link %q: lost in the temporary netns: %w", m.Name, err)
	}
	idx := tl.Attrs().Index
	err = setLink(tmp, idx, ifName(m.NewName), ifAlias(m.Alias))
	if err == nil {
		err = setLink(tmp, idx, nsFd(m.To))
	}
	if err != nil {
		err = fmt.Errorf("link %q: move to netns %s as %q: %w", m.Name, m.To.name(), m.NewName, err)
		uerr := setLink(tmp, idx, ifName(m.Name), ifAlias(m.oldAlias))
		if uerr == nil {
			uerr = setLink(tmp, idx, nsFd(m.From))
		}
		if uerr != nil {
			return errors.Join(err, fmt.Errorf("link %q: move back: %w", m.Name, uerr))
		}
		return errors.Join(err, upByName(m.From, m.Name, m.wasUp))
	}
	return nil
}

func (m *move) setDown() error {
	if !m.wasUp {
		return nil
	}
	if err := m.From.h.LinkSetDown(&netlink.Device{LinkAttrs: netlink.LinkAttrs{Index: m.index}}); err != nil {
		return fmt.Errorf("link %q: set down: %w", m.Name, err)
	}
	return nil
}

// restore gives the link, still in n, back its name, alias and up state.
func (m *move) restore(n *NS, index int) error {
	if err := setLink(n, index, ifName(m.Name), ifAlias(m.oldAlias)); err != nil {
		return fmt.Errorf("link %q: restore name and alias: %w", m.Name, err)
	}
	return upByName(n, m.Name, m.wasUp)
}

func upByName(n *NS, name string, up bool) error {
	if !up {
		return nil
	}
	l, err := n.ByName(name)
	if err != nil {
		return err
	}
	if err := n.h.LinkSetUp(l); err != nil {
		return fmt.Errorf("link %q: set up again: %w", name, err)
	}
	return nil
}

// setLink sends one RTM_SETLINK for the link with that index in n. The netlink
// library's setters send one attribute per request; a move and a rename must travel
// together for the kernel to do both under one lock.
func setLink(n *NS, index int, attrs ...*nl.RtAttr) error {
	req := nl.NewNetlinkRequest(unix.RTM_SETLINK, unix.NLM_F_ACK)
	msg := nl.NewIfInfomsg(unix.AF_UNSPEC)
	msg.Index = int32(index)
	req.AddData(msg)
	for _, a := range attrs {
		req.AddData(a)
	}
	_, err := nlconn.Execute(n.fd, req, unix.NETLINK_ROUTE, 0)
	return err
}

func nsFd(n *NS) *nl.RtAttr {
	b := make([]byte, 4)
	nl.NativeEndian().PutUint32(b, uint32(n.Fd()))
	return nl.NewRtAttr(unix.IFLA_NET_NS_FD, b)
}

func ifName(name string) *nl.RtAttr { return nl.NewRtAttr(unix.IFLA_IFNAME, nl.ZeroTerminated(name)) }

// ifAlias sets the alias; an empty one clears it.
func ifAlias(alias string) *nl.RtAttr { return nl.NewRtAttr(unix.IFLA_IFALIAS, []byte(alias)) }

// newTemp opens a fresh namespace that dies with Close.
func newTemp() (*NS, error) {
	fd, err := ns.NewTemp()
	if err != nil {
		return nil, err
	}
	return newNS("(temporary)", fd)
}
