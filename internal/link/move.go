package link

import (
	"errors"
	"fmt"
	"net"

	"github.com/vishvananda/netlink"

	"github.com/cnikit/cni/internal/ns"
)

// Relocation describes moving an existing link to another namespace under a new name.
type Relocation struct {
	From, To *NS
	// Name is the link's name in From.
	Name string
	// NewName is its name in To.
	NewName string
	// Alias is the ifalias it carries in To; "" clears it.
	Alias string
}

// Relocate moves a link as r says, through a throw-away namespace: the rename happens
// where no other link lives, so the new name cannot clash with a link in From, and the
// source namespace never sees the link under a second name (udev or NetworkManager
// there would race with a quick double rename). From and To may be the same namespace:
// that renames the link in place without it ever carrying both names there.
//
// The link is set down first, as a running link cannot be renamed, and arrives down in
// To. When a step fails the link is put back in From under its old name and alias, up
// again if it was up, and the error says what failed.
func Relocate(r Relocation) (netlink.Link, error) {
	fh, err := r.From.Handle()
	if err != nil {
		return nil, err
	}
	l, err := r.From.ByName(r.Name)
	if err != nil {
		return nil, err
	}
	wasUp := l.Attrs().Flags&net.FlagUp != 0
	oldAlias := l.Attrs().Alias
	if err := fh.LinkSetDown(l); err != nil {
		return nil, fmt.Errorf("link %q: set down: %w", r.Name, err)
	}
	restoreUp := func() error {
		if !wasUp {
			return nil
		}
		if err := fh.LinkSetUp(l); err != nil {
			return fmt.Errorf("link %q: set up again: %w", r.Name, err)
		}
		return nil
	}
	tmp, err := newTemp()
	if err != nil {
		return nil, errors.Join(err, restoreUp())
	}
	defer tmp.Close()
	if err := fh.LinkSetNsFd(l, tmp.Fd()); err != nil {
		return nil, errors.Join(fmt.Errorf("link %q: move to a temporary netns: %w", r.Name, err), restoreUp())
	}
	tl, err := tmp.ByName(r.Name)
	if err != nil {
		return nil, fmt.Errorf("link %q: lost in the temporary netns: %w", r.Name, err)
	}
	if err := relabel(tmp, tl, r.NewName, r.Alias, r.To); err != nil {
		undo := relabel(tmp, tl, r.Name, oldAlias, r.From)
		if undo == nil {
			undo = upByName(r.From, r.Name, wasUp)
		}
		return nil, errors.Join(err, undo)
	}
	return r.To.ByName(r.NewName)
}

// relabel names and aliases l, which sits in tmp, and moves it on to dst. The link's
// index stays the same inside tmp, so the undo can use the same l whatever name the
// failed attempt left it with.
func relabel(tmp *NS, l netlink.Link, name, alias string, dst *NS) error {
	h, err := tmp.Handle()
	if err != nil {
		return err
	}
	if err := h.LinkSetAlias(l, alias); err != nil {
		return fmt.Errorf("link %q: set alias %q: %w", l.Attrs().Name, alias, err)
	}
	if err := h.LinkSetName(l, name); err != nil {
		return fmt.Errorf("link %q: rename to %q: %w", l.Attrs().Name, name, err)
	}
	if err := h.LinkSetNsFd(l, dst.Fd()); err != nil {
		return fmt.Errorf("link %q: move to netns %s: %w", name, dst.name(), err)
	}
	return nil
}

func upByName(n *NS, name string, up bool) error {
	if !up {
		return nil
	}
	l, err := n.ByName(name)
	if err != nil {
		return err
	}
	h, _ := n.Handle()
	if err := h.LinkSetUp(l); err != nil {
		return fmt.Errorf("link %q: set up again: %w", name, err)
	}
	return nil
}

// newTemp opens a fresh namespace that dies with Close.
func newTemp() (*NS, error) {
	fd, err := ns.NewTemp()
	if err != nil {
		return nil, err
	}
	return &NS{Path: "(temporary)", fd: fd}, nil
}
