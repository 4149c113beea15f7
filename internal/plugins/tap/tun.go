package tap

import (
	"errors"
	"fmt"
	"strconv"

	"golang.org/x/sys/unix"
)

// tunDevice is the clone device: a tap belongs to the netns of the thread that opened it.
const tunDevice = "/dev/net/tun"

// tapSpec is what the kernel is asked for: a persistent tap device.
type tapSpec struct {
	Name       string
	MultiQueue bool
	Owner      *uint32
	Group      *uint32
}

// flags are the TUNSETIFF flags: a tap (Ethernet frames) without the packet-info
// prefix, with the virtio-net header VMs use, and never attaching to an existing device
// of the same name. Whoever opens the tap later sets NO_PI and VNET_HDR for itself; only
// MULTI_QUEUE must match between creator and user.
func (s tapSpec) flags() uint16 {
	f := uint16(unix.IFF_TAP | unix.IFF_NO_PI | unix.IFF_VNET_HDR | unix.IFF_TUN_EXCL)
	if s.MultiQueue {
		f |= unix.IFF_MULTI_QUEUE
	}
	return f
}

// create makes the tap in the calling thread's network namespace with ioctls on the
// clone device: TUNSETIFF names it, TUNSETOWNER and TUNSETGROUP (only when configured;
// unset means any user with CAP_NET_ADMIN) say who may attach, TUNSETPERSIST keeps it
// once the descriptor is closed. A failure before TUNSETPERSIST leaves nothing: closing
// the descriptor destroys the device.
func (s tapSpec) create() error {
	fd, err := unix.Open(tunDevice, unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("open %s: %w", tunDevice, err)
	}
	defer unix.Close(fd)
	ifr, err := unix.NewIfreq(s.Name)
	if err != nil {
		return fmt.Errorf("tap %q: %w", s.Name, err)
	}
	ifr.SetUint16(s.flags())
	if err := unix.IoctlIfreq(fd, unix.TUNSETIFF, ifr); err != nil {
		return fmt.Errorf("tap %q: TUNSETIFF: %w", s.Name, err)
	}
	if s.Owner != nil {
		if err := unix.IoctlSetInt(fd, unix.TUNSETOWNER, int(*s.Owner)); err != nil {
			return fmt.Errorf("tap %q: TUNSETOWNER %d: %w", s.Name, *s.Owner, err)
		}
	}
	if s.Group != nil {
		if err := unix.IoctlSetInt(fd, unix.TUNSETGROUP, int(*s.Group)); err != nil {
			return fmt.Errorf("tap %q: TUNSETGROUP %d: %w", s.Name, *s.Group, err)
		}
	}
	if err := unix.IoctlSetInt(fd, unix.TUNSETPERSIST, 1); err != nil {
		return fmt.Errorf("tap %q: TUNSETPERSIST: %w", s.Name, err)
	}
	return nil
}

// args encodes the spec for the creator process (see RunCreator).
func (s tapSpec) args() []string {
	id := func(p *uint32) string {
		if p == nil {
			return "-"
		}
		return strconv.FormatUint(uint64(*p), 10)
	}
	return []string{s.Name, strconv.FormatBool(s.MultiQueue), id(s.Owner), id(s.Group)}
}

// parseSpec is args' inverse.
func parseSpec(args []string) (tapSpec, error) {
	if len(args) != 4 {
		return tapSpec{}, errors.New("usage: NAME MULTIQUEUE OWNER|- GROUP|-")
	}
	mq, err := strconv.ParseBool(args[1])
	if err != nil {
		return tapSpec{}, fmt.Errorf("multiqueue: %w", err)
	}
	s := tapSpec{Name: args[0], MultiQueue: mq}
	for _, f := range []struct {
		v   string
		dst **uint32
	}{{args[2], &s.Owner}, {args[3], &s.Group}} {
		if f.v == "-" {
			continue
		}
		n, err := strconv.ParseUint(f.v, 10, 32)
		if err != nil {
			return tapSpec{}, fmt.Errorf("owner/group %q: %w", f.v, err)
		}
		*f.dst = new(uint32(n))
	}
	return s, nil
}
