// Package ns runs code inside a network namespace. Go schedules goroutines over OS
// threads and setns(2) changes only the calling thread, so the work runs on a locked
// thread that is switched in and, only if switching back succeeds, returned to the pool.
package ns

import (
	"errors"
	"fmt"
	"os"
	"runtime"

	"github.com/vishvananda/netns"
)

// ErrNotExist reports a namespace path that does not exist (any more).
var ErrNotExist = errors.New("network namespace does not exist")

// Do runs fn with the calling goroutine's work moved into the namespace at path. fn runs
// on a dedicated locked OS thread; it must not start goroutines that expect to stay in
// the namespace.
func Do(path string, fn func() error) error {
	target, err := netns.GetFromPath(path)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("netns %q: %w", path, ErrNotExist)
		}
		return fmt.Errorf("netns %q: open: %w", path, err)
	}
	defer target.Close()
	return DoHandle(target, fn)
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
		ferr := fn()
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

// Exists reports whether path names a network namespace that can be opened.
func Exists(path string) bool {
	h, err := netns.GetFromPath(path)
	if err != nil {
		return false
	}
	h.Close()
	return true
}
