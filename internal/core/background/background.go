// Package background holds the work a plugin process starts and leaves running while it
// goes on (link deletions, conntrack flushes), and makes whoever answers for the process
// wait for it before answering. It sits below the spec layer so that the host helpers
// that start such work (link.NS.DeleteInBackground) need not import skel, which waits
// for it.
package background

import (
	"context"
	"errors"
	"sync"

	"github.com/cnikit/cni/internal/core/panics"
)

// Pending is the work the plugins of one process have started and left running: link
// deletions, for which the kernel waits out RCU grace periods (tens of milliseconds)
// while needing nothing more from the plugin. Run several of them at once and the waits
// overlap; a DEL of the standard chain waits for the kernel once instead of once per
// link.
//
// Whoever answers for the process waits for it before answering: skel.Run (an exec'd
// plugin) and skel.Invoke called without one, the chain runner and the chain plugin
// after each operation. Never earlier: the runtime deletes the netns next. The work's
// errors are the command's errors. A Pending travels in the request's context
// (WithPending), so delegates (IPAM, flannel's) started in-process add to their
// caller's.
type Pending struct {
	wg      sync.WaitGroup
	mu      sync.Mutex
	errs    []error
	started bool
}

// Go runs fn on a goroutine of its own; its error, or its panic as a *panics.Error,
// comes back from Wait.
func (p *Pending) Go(fn func() error) {
	p.mu.Lock()
	p.started = true
	p.mu.Unlock()
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		if err := panics.Call(fn); err != nil {
			p.mu.Lock()
			p.errs = append(p.errs, err)
			p.mu.Unlock()
		}
	}()
}

// Busy reports whether any work was started, so that a caller times its wait only
// when there is something to wait for.
func (p *Pending) Busy() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.started
}

// Wait returns once all the work started so far has finished, with its errors joined
// (nil when all of it succeeded).
func (p *Pending) Wait() error {
	p.wg.Wait()
	p.mu.Lock()
	defer p.mu.Unlock()
	return errors.Join(p.errs...)
}

type pendingKey struct{}

// WithPending returns ctx carrying p: work started under the returned context (Start)
// joins p, and whoever created p waits for it. A nil p hides any Pending of ctx, so that
// a skel.Invoke under the returned context waits for its plugin's work itself.
func WithPending(ctx context.Context, p *Pending) context.Context {
	return context.WithValue(ctx, pendingKey{}, p)
}

// PendingOf returns the Pending ctx carries, or nil.
func PendingOf(ctx context.Context) *Pending {
	p, _ := ctx.Value(pendingKey{}).(*Pending)
	return p
}

// Start runs fn concurrently with the rest of the process's work and returns nil when
// ctx carries a Pending, as every skel Request.Context does: the process waits for fn
// and reports its error. Without one (a helper called outside any request) it runs fn
// at once and returns its error.
func Start(ctx context.Context, fn func() error) error {
	if p := PendingOf(ctx); p != nil {
		p.Go(fn)
		return nil
	}
	return panics.Call(fn)
}

// Own gives ctx a Pending of its own unless it carries one already. wait waits for it
// (a no-op when ctx brought its own: its creator waits); owned says which.
func Own(ctx context.Context) (_ context.Context, wait func() error, owned bool) {
	if PendingOf(ctx) != nil {
		return ctx, func() error { return nil }, false
	}
	p := new(Pending)
	return WithPending(ctx, p), p.Wait, true
}
