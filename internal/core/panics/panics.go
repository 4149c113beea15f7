// Package panics turns a panic into an error in the goroutine where it happens. A plugin
// runs in-process inside the chain runner (and so inside any program embedding it), and
// its namespace work runs on goroutines of its own: a panic there would kill the whole
// process, which for an in-process runner is the runtime itself, and an exec'd plugin
// would print a stack trace where the runtime expects error JSON. Every goroutine a
// plugin starts recovers with Recover (or is started by Go), and skel reports the
// resulting *Error as the spec's internal error, code 999.
package panics

import (
	"fmt"
	"runtime/debug"
)

// Error is a recovered panic: its value and the stack of the goroutine that panicked.
type Error struct {
	Value any
	Stack []byte
}

func (e *Error) Error() string { return fmt.Sprintf("panic: %v", e.Value) }

// Recover, deferred directly, turns a panic of the calling goroutine into an *Error
// stored in *errp. Without a panic it leaves *errp alone.
func Recover(errp *error) {
	if r := recover(); r != nil {
		*errp = &Error{Value: r, Stack: debug.Stack()}
	}
}

// Call runs fn and returns its error, or its panic as an *Error.
func Call(fn func() error) (err error) {
	defer Recover(&err)
	return fn()
}

// Go runs fn on a new goroutine and returns where its error (or its panic, as an
// *Error) arrives; the channel is buffered, so the goroutine never blocks on it.
func Go(fn func() error) <-chan error {
	done := make(chan error, 1)
	go func() { done <- Call(fn) }()
	return done
}
