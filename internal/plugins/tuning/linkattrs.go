package tuning

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"syscall"

	"github.com/vishvananda/netlink"

	"github.com/cnikit/cni/internal/host/nlconn"
)

// linkAttrs is the part of a netlink link tuning reads.
type linkAttrs interface{ Attrs() *netlink.LinkAttrs }

// linkState is a set of link attributes to apply or compare; nil/zero fields are left
// alone.
type linkState struct {
	Mac      net.HardwareAddr
	Mtu      int
	Promisc  *bool
	Allmulti *bool
	TxQLen   *int
}

func (b *Backup) linkState() linkState {
	s := linkState{Mtu: b.Mtu, Promisc: b.Promisc, Allmulti: b.Allmulti, TxQLen: b.TxQLen}
	if b.Mac != "" {
		s.Mac, _ = net.ParseMAC(b.Mac)
	}
	return s
}

// current records the link's present values of the attributes want sets. Promisc and
// allmulti come from the flags the user set (IFF_PROMISC, IFF_ALLMULTI in the reported
// flags), not the kernel's counters, which bridges and sockets also raise.
func current(l linkAttrs, want linkState) *Backup {
	a := l.Attrs()
	b := &Backup{}
	if want.Mac != nil {
		b.Mac = a.HardwareAddr.String()
	}
	if want.Mtu != 0 {
		b.Mtu = a.MTU
	}
	if want.Promisc != nil {
		b.Promisc = new(a.RawFlags&syscall.IFF_PROMISC != 0)
	}
	if want.Allmulti != nil {
		b.Allmulti = new(a.RawFlags&syscall.IFF_ALLMULTI != 0)
	}
	if want.TxQLen != nil {
		b.TxQLen = new(a.TxQLen)
	}
	return b
}

// setLink applies s to the interface called name, in the reference's order.
func setLink(h *nlconn.Handle, name string, s linkState) error {
	l, err := h.LinkByName(name)
	if err != nil {
		return fmt.Errorf("interface %q: %w", name, err)
	}
	if s.Mac != nil {
		if err := setMac(h, l, s.Mac); err != nil {
			return fmt.Errorf("mac: set %s on %q: %w", s.Mac, name, err)
		}
	}
	if s.Promisc != nil {
		if err := setFlag(l, *s.Promisc, h.SetPromiscOn, h.SetPromiscOff); err != nil {
			return fmt.Errorf("promisc: set %t on %q: %w", *s.Promisc, name, err)
		}
	}
	if s.Mtu != 0 {
		if err := h.LinkSetMTU(l, s.Mtu); err != nil {
			return fmt.Errorf("mtu: set %d on %q: %w", s.Mtu, name, err)
		}
	}
	if s.Allmulti != nil {
		if err := setFlag(l, *s.Allmulti, h.LinkSetAllmulticastOn, h.LinkSetAllmulticastOff); err != nil {
			return fmt.Errorf("allmulti: set %t on %q: %w", *s.Allmulti, name, err)
		}
	}
	if s.TxQLen != nil {
		if err := h.LinkSetTxQLen(l, *s.TxQLen); err != nil {
			return fmt.Errorf("txQLen: set %d on %q: %w", *s.TxQLen, name, err)
		}
	}
	return nil
}

// setFlag turns a link flag (promisc, allmulti) on or off with the setter want picks.
func setFlag(l netlink.Link, want bool, on, off func(netlink.Link) error) error {
	if want {
		return on(l)
	}
	return off(l)
}

// setMac changes the address in place; a device that refuses while up (EBUSY) is taken
// down for the change and brought back up only if it was up.
func setMac(h *nlconn.Handle, l netlink.Link, mac net.HardwareAddr) error {
	err := h.LinkSetHardwareAddr(l, mac)
	if !errors.Is(err, syscall.EBUSY) {
		return err
	}
	wasUp := l.Attrs().Flags&net.FlagUp != 0
	if err := h.LinkSetDown(l); err != nil {
		return err
	}
	if err := h.LinkSetHardwareAddr(l, mac); err != nil {
		return err
	}
	if wasUp {
		return h.LinkSetUp(l)
	}
	return nil
}

// verifyLink compares the link with s, naming the first attribute that differs.
func verifyLink(l linkAttrs, s linkState) error {
	a := l.Attrs()
	cur := current(l, s)
	switch {
	case s.Mac != nil && !bytes.Equal(a.HardwareAddr, s.Mac):
		return fmt.Errorf("mac of %q is %s, configured %s", a.Name, a.HardwareAddr, s.Mac)
	case s.Mtu != 0 && a.MTU != s.Mtu:
		return fmt.Errorf("mtu of %q is %d, configured %d", a.Name, a.MTU, s.Mtu)
	case s.Promisc != nil && *cur.Promisc != *s.Promisc:
		return fmt.Errorf("promisc of %q is %t, configured %t", a.Name, *cur.Promisc, *s.Promisc)
	case s.Allmulti != nil && *cur.Allmulti != *s.Allmulti:
		return fmt.Errorf("allmulti of %q is %t, configured %t", a.Name, *cur.Allmulti, *s.Allmulti)
	case s.TxQLen != nil && a.TxQLen != *s.TxQLen:
		return fmt.Errorf("txQLen of %q is %d, configured %d", a.Name, a.TxQLen, *s.TxQLen)
	}
	return nil
}
