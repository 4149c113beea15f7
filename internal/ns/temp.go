package ns

import (
	"fmt"
	"runtime"

	"github.com/vishvananda/netns"
)

// NewTemp creates a network namespace held only by the returned handle: once the handle
// is closed and nothing else (a device, a process) keeps it alive, the kernel destroys
// it. Nothing is mounted and the calling thread's namespace does not change; the
// namespace is made on a thread of its own that is switched back before it is reused.
func NewTemp() (netns.NsHandle, error) {
	type made struct {
		h   netns.NsHandle
		err error
	}
	c := make(chan made, 1)
	go func() {
		runtime.LockOSThread()
		orig, err := netns.Get()
		if err != nil {
			runtime.UnlockOSThread()
			c <- made{h: netns.None(), err: fmt.Errorf("netns: get current: %w", err)}
			return
		}
		defer orig.Close()
		h, err := netns.New()
		if err != nil {
			runtime.UnlockOSThread()
			c <- made{h: netns.None(), err: fmt.Errorf("netns: create: %w", err)}
			return
		}
		if err := netns.Set(orig); err != nil {
			h.Close()
			// The thread stays locked and dies with this goroutine.
			c <- made{h: netns.None(), err: fmt.Errorf("netns: return to original: %w", err)}
			return
		}
		runtime.UnlockOSThread()
		c <- made{h: h}
	}()
	m := <-c
	return m.h, m.err
}
