// Package ns runs code inside a network namespace. Go schedules goroutines over OS
// threads and setns(2) changes only the calling thread, so the work runs on a locked
// thread that is switched in and, only if switching back succeeds, returned to the pool.
package ns

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"syscall"

	"github.com/vishvananda/netns"

	"github.com/cnikit/cni/internal/core/panics"
)

// ErrNotExist reports a namespace path that does not exist (any more).
var ErrNotExist = errors.New("network namespace does not exist")

// nsfsMagic is the file system type of namespace files (NSFS_MAGIC).
const nsfsMagic = 0x6e736673

// Open opens the network namespace at path. A path that does not exist, or that no
// longer is a namespace (a runtime's leftover mount point, now a plain file), gives an
// error matching ErrNotExist: for DEL both mean there is nothing left to undo. The open
// never blocks: a FIFO at the path (opened for reading, it would wait for a writer
// forever) is just another file that is no namespace.
func Open(path string) (netns.NsHandle, error) {
	fd, err := syscall.Open(path, syscall.O_RDONLY|syscall.O_CLOEXEC|syscall.O_NONBLOCK, 0)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return netns.None(), fmt.Errorf("netns %q: %w", path, ErrNotExist)
		}
		return netns.None(), fmt.Errorf("netns %q: open: %w", path, err)
	}
	h := netns.NsHandle(fd)
	var fs syscall.Statfs_t
	if err := syscall.Fstatfs(int(h), &fs); err != nil {
		h.Close()
		return h, fmt.Errorf("netns %q: statfs: %w", path, err)
	}
	if fs.Type != nsfsMagic {
		h.Close()
		return h, fmt.Errorf("netns %q is not a namespace file: %w", path, ErrNotExist)
	}
	return h, nil
}

// DoHandle is Do for an already opened namespace.
func DoHandle(target netns.NsHandle, fn func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		orig, err := netns.Get()
		if err != nil {
			runtime.UnlockOSThread()
			errc <- fmt.Errorf("netns: get current: %w", err)
			return
		}
		defer orig.Close()
		if err := netns.Set(target); err != nil {
			runtime.UnlockOSThread()
			errc <- fmt.Errorf("netns: enter: %w", err)
			return
		}
		// A panic in fn becomes its error: the thread must still go back (or die), and
		// a panic on this goroutine would be out of reach of the caller's recover.
		ferr := panics.Call(fn)
		if err := netns.Set(orig); err != nil {
			// The thread stays locked and dies with this goroutine, so no other
			// goroutine ever runs in the wrong namespace.
			errc <- errors.Join(ferr, fmt.Errorf("netns: return to original: %w", err))
			return
		}
		runtime.UnlockOSThread()
		errc <- ferr
	}()
	return <-errc
}

// IsCurrent reports whether path is the network namespace of the calling thread (the
// one a plugin runs in; exec'd children inherit it). A path that cannot be looked at is
// not.
func IsCurrent(path string) bool {
	var target, own syscall.Stat_t
	if syscall.Stat(path, &target) != nil || syscall.Stat("/proc/thread-self/ns/net", &own) != nil {
		return false
	}
	return target.Dev == own.Dev && target.Ino == own.Ino
}
