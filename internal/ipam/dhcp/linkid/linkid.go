// Package linkid names the interface a lease was acquired on, so that the dhcp daemon
// acts only on that interface afterwards. The daemon finds an attachment again by the
// netns path and interface name it was given at ADD, but a path can come to name another
// namespace (a /proc/<pid>/ns/net whose pid was reused, a node that rebooted, a lease
// file edited by hand), and a renewal, an INIT-REBOOT or taking the link down there would
// act on someone else's interface, the host's own included.
//
// An ID is the boot, the namespace (its netns cookie, which the kernel never reuses
// within a boot, and its inode) and the link (ifindex and MAC) as they were when the
// lease was acquired. Target.Enter opens the namespace and the link again and runs work
// there only when they are still the ones the ID names, and never in the daemon's own
// namespace.
package linkid

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"syscall"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/cnikit/cni/internal/host/ns"
)

// ID is where a lease was acquired. Its JSON form is part of a lease file; a file
// written before the identity was kept has only HWAddr.
type ID struct {
	BootID string `json:"bootID,omitempty"`
	// Cookie is the namespace's SO_NETNS_COOKIE (0 on kernels before 5.14); Dev and Ino
	// are its nsfs inode.
	Cookie  uint64 `json:"netnsCookie,omitempty"`
	Dev     uint64 `json:"netnsDev,omitempty"`
	Ino     uint64 `json:"netnsIno,omitempty"`
	IfIndex int    `json:"ifIndex,omitempty"`
	HWAddr  string `json:"hwAddr"`
}

// ErrGone says the namespace or the interface no longer exists, or no longer is the one
// the lease was acquired on: the attachment is gone, and nothing is to be done in what
// the path names now.
var ErrGone = errors.New("attachment gone")

// ErrOwnNetns says the path names the daemon's own namespace, where it never acts: a
// mistake there would take the host's own interface.
var ErrOwnNetns = errors.New("the dhcp daemon's own network namespace")

// Host is what the daemon knows of itself: the boot it runs in and its own namespace.
type Host struct {
	BootID   string
	Dev, Ino uint64
}

// bootIDFile names the current boot; it changes at every boot.
const bootIDFile = "/proc/sys/kernel/random/boot_id"

// Self describes the boot and the calling thread's network namespace: the daemon's, as
// every thread is in it but those ns.Do holds inside another for a while.
func Self() (Host, error) {
	b, err := os.ReadFile(bootIDFile)
	if err != nil {
		return Host{}, fmt.Errorf("boot id: %w", err)
	}
	var st syscall.Stat_t
	if err := syscall.Stat("/proc/thread-self/ns/net", &st); err != nil {
		return Host{}, fmt.Errorf("own netns: %w", err)
	}
	return Host{BootID: strings.TrimSpace(string(b)), Dev: st.Dev, Ino: st.Ino}, nil
}

// Target is an attachment's interface as the daemon finds it: the namespace path (host
// prefix applied) and the interface name.
type Target struct {
	Netns  string
	IfName string
	Host   Host
}

// Enter opens the target's namespace, finds its link and runs fn inside the namespace
// with it. want, when not nil, is the ID the lease was acquired with: a namespace or
// link that is not (or no longer) that one is ErrGone, and fn does not run. The daemon's
// own namespace is ErrOwnNetns, whatever want says. Enter returns the ID it saw, with
// the link's MAC as fn left it.
func (t Target) Enter(want *ID, fn func(netlink.Link) error) (ID, error) {
	h, err := ns.Open(t.Netns)
	if errors.Is(err, ns.ErrNotExist) {
		return ID{}, fmt.Errorf("%w: %v", ErrGone, err)
	}
	if err != nil {
		return ID{}, err
	}
	defer h.Close()
	var st unix.Stat_t
	if err := unix.Fstat(int(h), &st); err != nil {
		return ID{}, fmt.Errorf("netns %s: %w", t.Netns, err)
	}
	if st.Dev == t.Host.Dev && st.Ino == t.Host.Ino {
		return ID{}, fmt.Errorf("netns %s is %w", t.Netns, ErrOwnNetns)
	}
	got := ID{BootID: t.Host.BootID, Dev: st.Dev, Ino: st.Ino}
	err = ns.DoHandle(h, func() error {
		got.Cookie = cookie()
		l, err := netlink.LinkByName(t.IfName)
		if err != nil {
			return fmt.Errorf("%w: %s in %s: %v", ErrGone, t.IfName, t.Netns, err)
		}
		got.IfIndex, got.HWAddr = l.Attrs().Index, l.Attrs().HardwareAddr.String()
		if want != nil {
			if err := want.matches(got); err != nil {
				return fmt.Errorf("%w: %s in %s %v", ErrGone, t.IfName, t.Netns, err)
			}
		}
		if err := fn(l); err != nil {
			return err
		}
		if l, err := netlink.LinkByIndex(got.IfIndex); err == nil {
			got.HWAddr = l.Attrs().HardwareAddr.String()
		}
		return nil
	})
	return got, err
}

// matches says whether got is the interface w was recorded as. A MAC that changed is
// accepted only where the link is proven otherwise (see proven); a record that predates
// the identity is held to its MAC alone.
func (w ID) matches(got ID) error {
	switch {
	case w.BootID != "" && w.BootID != got.BootID:
		return errors.New("was recorded in an earlier boot")
	case w.Cookie != 0 && got.Cookie != 0 && w.Cookie != got.Cookie:
		return errors.New("is another namespace (netns cookie)")
	case w.Ino != 0 && (w.Dev != got.Dev || w.Ino != got.Ino):
		return errors.New("is another namespace (netns inode)")
	case w.IfIndex != 0 && w.IfIndex != got.IfIndex:
		return fmt.Errorf("is another link (ifindex %d, recorded %d)", got.IfIndex, w.IfIndex)
	case w.HWAddr == "":
		return errors.New("has no recorded MAC to prove it")
	case !sameMAC(w.HWAddr, got.HWAddr) && !w.proven(got):
		return fmt.Errorf("is another link (MAC %s, recorded %s)", got.HWAddr, w.HWAddr)
	}
	return nil
}

// proven: cookie and ifindex prove the link, whose MAC a later plugin (tuning) may set.
func (w ID) proven(got ID) bool { return w.Cookie != 0 && got.Cookie == w.Cookie && w.IfIndex != 0 }

func sameMAC(a, b string) bool {
	ma, err1 := net.ParseMAC(a)
	mb, err2 := net.ParseMAC(b)
	return err1 == nil && err2 == nil && bytes.Equal(ma, mb)
}

// cookie is the calling thread's namespace's SO_NETNS_COOKIE, or 0 where the kernel has
// none.
func cookie() uint64 {
	fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return 0
	}
	defer unix.Close(fd)
	c, err := unix.GetsockoptUint64(fd, unix.SOL_SOCKET, unix.SO_NETNS_COOKIE)
	if err != nil {
		return 0
	}
	return c
}
