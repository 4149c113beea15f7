// Package link holds the interface plumbing every interface plugin shares: opening a
// network namespace with a netlink handle bound to it, creating a veth pair whose
// container end is born inside the container, configuring a result's addresses and
// routes on an interface, checking them again for CHECK, finding a container
// interface's host-side peer, waiting for a link to come up, and deleting links for
// DEL in the background of the process (DeleteInBackground), so that the kernel's waits
// for the deletions of one DEL overlap.
//
// Netlink work goes through handles bound to a namespace (nlconn.Handle, whose every
// request has a deadline and whose dumps retry an interrupted answer), so the calling thread rarely switches namespaces; only
// sysctls, which the kernel resolves through the opening thread's namespace, run
// inside ns.DoHandle. An NS opens its handle
// with its fd, so plugins open only the namespaces they use.
package link

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"syscall"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/cnikit/cni/internal/core/background"
	"github.com/cnikit/cni/internal/core/cnierror"
	"github.com/cnikit/cni/internal/core/statedir"
	"github.com/cnikit/cni/internal/core/steps"
	"github.com/cnikit/cni/internal/host/nlconn"
	"github.com/cnikit/cni/internal/host/ns"
)

// NS is an open network namespace: a file descriptor that keeps it alive and a netlink
// handle (route family only) bound to it, both opened together so that Handle cannot
// fail.
type NS struct {
	// Path is the namespace's path as given ("" for the caller's own namespace).
	Path string
	fd   netns.NsHandle
	h    nlconn.Handle
	// steps records the work done through this NS for the invocation log: the
	// recorder of the context it was opened for, nil when the log is off.
	steps *steps.Recorder
}

// Open opens the namespace at path. A path that does not exist gives an error that
// matches ns.ErrNotExist, which DEL treats as "nothing left to do".
func Open(path string) (*NS, error) {
	fd, err := ns.Open(path)
	if err != nil {
		return nil, err
	}
	return newNS(path, fd)
}

// newNS binds a netlink handle to the namespace fd, which it takes over.
func newNS(path string, fd netns.NsHandle) (*NS, error) {
	n := &NS{Path: path, fd: fd}
	h, err := nlconn.Open(fd, syscall.NETLINK_ROUTE)
	if err != nil {
		fd.Close()
		return nil, fmt.Errorf("netns %s: netlink handle: %w", n.name(), err)
	}
	n.h = h
	return n, nil
}

// OpenPair opens the container's namespace at path and the caller's own (the host's)
// for an ADD or CHECK. A container namespace that does not exist is MissingContainer's
// error; the caller closes both. What is done through them (links created and
// moved, addresses, routes, waits) is recorded as steps of ctx's invocation.
func OpenPair(ctx context.Context, path string) (host, cont *NS, err error) {
	cont, err = OpenContainer(ctx, path)
	if err != nil {
		return nil, nil, err
	}
	host, err = Current()
	if err != nil {
		cont.Close()
		return nil, nil, err
	}
	host.steps = cont.steps
	return host, cont, nil
}

// OpenContainer opens the container's namespace at path for an ADD or CHECK, where a
// namespace that does not exist is MissingContainer's error. What is done through it is
// recorded as steps of ctx's invocation.
func OpenContainer(ctx context.Context, path string) (*NS, error) {
	n, err := Open(path)
	if errors.Is(err, ns.ErrNotExist) {
		return nil, MissingContainer(path)
	}
	if n != nil {
		n.steps = steps.Of(ctx)
	}
	return n, err
}

// MissingContainer is the one error of every plugin whose ADD or CHECK finds no
// namespace at CNI_NETNS: the spec's code 3, "container unknown or does not exist"
// (code 8 is the reference library's, for a CNI_NETNS that is the plugin's own
// namespace, which skel refuses before any plugin runs).
func MissingContainer(path string) *cnierror.Error {
	return cnierror.Newf(cnierror.CodeUnknownContainer, "CNI_NETNS: netns %q does not exist: the container is unknown or gone", path)
}

// OpenIfPresent opens the namespace at path for DEL: nil, and no error, when path is
// empty or names no namespace (any more), for then there is nothing to undo in it.
func OpenIfPresent(path string) (*NS, error) {
	if path == "" {
		return nil, nil
	}
	n, err := Open(path)
	if errors.Is(err, ns.ErrNotExist) {
		return nil, nil
	}
	return n, err
}

// DeleteInBackground is Delete for DEL, run concurrently with the rest of the process's
// work (background.Start): deleting a veth or an ifb makes the kernel wait out RCU grace
// periods (tens of milliseconds here) while needing nothing from the caller, so the
// deletions every plugin of one process starts, and its other DEL work (rules, IPAM),
// overlap. The process (skel.Run, skel.Invoke, the chain runner) answers only once the
// deletion is done, and a failed deletion is its command's error. Without a process
// around ctx it deletes at once and returns the error. The deletion holds the namespace
// by a descriptor of its own, so the caller may Close n at once.
func (n *NS) DeleteInBackground(ctx context.Context, name string) error {
	own, err := n.dup()
	if err != nil {
		return err
	}
	step := steps.Begin(ctx, steps.LinkDelete)
	return background.Start(ctx, func() error {
		defer own.Close()
		return step.Done(own.Delete(name))
	})
}

// dup opens the same namespace again under a descriptor of its own, for work that
// outlives the caller's use of n.
func (n *NS) dup() (*NS, error) {
	fd, err := unix.FcntlInt(uintptr(n.fd), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("netns %s: dup: %w", n.name(), err)
	}
	return newNS(n.Path, netns.NsHandle(fd))
}

// Current opens the calling thread's own namespace: the host side for a plugin. In
// tests that play "host" inside ns.Do this is that namespace, as the thread is locked.
func Current() (*NS, error) {
	fd, err := netns.Get()
	if err != nil {
		return nil, fmt.Errorf("netns: open current: %w", err)
	}
	return newNS("", fd)
}

// Handle returns the netlink handle bound to the namespace.
func (n *NS) Handle() *nlconn.Handle { return &n.h }

// Fd is the namespace's file descriptor, for attributes such as a veth peer's
// IFLA_NET_NS_FD. It stays valid until Close.
func (n *NS) Fd() int { return int(n.fd) }

// Do runs fn inside the namespace on a locked OS thread (for sysctls).
func (n *NS) Do(fn func() error) error { return ns.DoHandle(n.fd, fn) }

// Close releases the handle and the descriptor. Closing twice is harmless.
func (n *NS) Close() {
	if n == nil {
		return
	}
	if n.h.Handle != nil {
		n.h.Close()
		n.h.Handle = nil
	}
	if n.fd.IsOpen() {
		n.fd.Close()
		n.fd = netns.None()
	}
}

func (n *NS) name() string { return cmp.Or(n.Path, "(current)") }

// IsNotFound reports whether err says a link does not exist.
func IsNotFound(err error) bool {
	var nf netlink.LinkNotFoundError
	return errors.As(err, &nf) || errors.Is(err, syscall.ENODEV)
}

// isLoopback reports whether l is a namespace's loopback interface.
func isLoopback(l netlink.Link) bool { return l.Attrs().Flags&net.FlagLoopback != 0 }

// ByName returns the link called name in the namespace.
func (n *NS) ByName(name string) (netlink.Link, error) {
	l, err := n.h.LinkByName(name)
	if err != nil {
		return nil, fmt.Errorf("link %q: %w", name, err)
	}
	return l, nil
}

// Delete removes the link called name; a link that is already gone is not an error,
// and neither is the loopback interface: every namespace has one from its birth, no
// ADD made it (NameFree refuses its name) and the kernel refuses to delete it, so a
// DEL of CNI_IFNAME "lo" has nothing to remove and must not fail for ever.
func (n *NS) Delete(name string) (err error) {
	defer n.steps.Begin(steps.LinkDelete).End(&err)
	l, err := n.ByName(name)
	if IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if isLoopback(l) {
		return nil
	}
	if err := n.h.LinkDel(l); err != nil && !IsNotFound(err) {
		return fmt.Errorf("link %q: delete: %w", name, err)
	}
	return nil
}

// Lock takes an exclusive flock on the namespace file itself and returns its release.
// Plugins that pick a free id inside a namespace (a routing table) hold it from the
// choice until the id is in use, so that two concurrent ADDs into one namespace cannot
// pick the same one. The lock is on the namespace's inode, so every path naming the
// namespace (/run/netns/x, /proc/<pid>/ns/net) takes the same lock, and it excludes
// the reference sbr too, which flocks the path it was given.
func (n *NS) Lock() (func(), error) {
	// A descriptor of its own: flock belongs to the open file description, and the
	// namespace's descriptor may be shared with another goroutine of the same process.
	f, err := os.Open(fmt.Sprintf("/proc/self/fd/%d", n.Fd()))
	if err != nil {
		return nil, fmt.Errorf("netns %s: lock: %w", n.name(), err)
	}
	if err := statedir.Flock(f, unix.LOCK_EX); err != nil {
		f.Close()
		return nil, fmt.Errorf("netns %s: lock: %w", n.name(), err)
	}
	return func() { f.Close() }, nil // closing the only descriptor releases the flock
}
