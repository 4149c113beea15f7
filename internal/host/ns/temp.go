package ns

import (
	"fmt"
	"runtime"

	"github.com/vishvananda/netns"

	"github.com/cnikit/cni/internal/core/panics"
)

// NewTemp creates a network namespace held only by the returned handle: once the handle
// is closed and nothing else (a device, a process) keeps it alive, the kernel destroys
// it. Nothing is mounted and the calling thread's namespace does not change; the
// namespace is made on a thread of its own that is switched back before it is reused.
func NewTemp() (netns.NsHandle, error) {
	made := netns.None()
	err := <-panics.Go(func() error {
		runtime.LockOSThread()
		orig, err := netns.Get()
		if err != nil {
			runtime.UnlockOSThread()
			return fmt.Errorf("netns: get current: %w", err)
		}
		defer orig.Close()
		h, err := netns.New()
		if err != nil {
			runtime.UnlockOSThread()
			return fmt.Errorf("netns: create: %w", err)
		}
		if err := netns.Set(orig); err != nil {
			h.Close()
			// The thread stays locked and dies with this goroutine.
			return fmt.Errorf("netns: return to original: %w", err)
		}
		runtime.UnlockOSThread()
		made = h
		return nil
	})
	return made, err
}
