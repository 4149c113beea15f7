// Package rollback undoes a half-finished ADD. Each step that changes the system pushes
// its undo; on failure the undos run newest first, and on success they are dropped. Every
// plugin uses this one mechanism instead of ad-hoc deferred cleanups.
package rollback

import (
	"errors"
	"fmt"
)

// Stack holds the undo steps of one operation. The zero value is ready to use.
type Stack struct {
	steps []step
	done  bool
}

type step struct {
	what string
	undo func() error
}

// Push records how to undo something that was just done.
func (s *Stack) Push(what string, undo func() error) {
	s.steps = append(s.steps, step{what: what, undo: undo})
}

// Commit marks the operation as successful: Undo becomes a no-op.
func (s *Stack) Commit() { s.done = true }

// Undo runs every recorded undo, newest first, unless the operation was committed. It
// keeps going after a failing step and returns all failures joined.
func (s *Stack) Undo() error {
	if s.done {
		return nil
	}
	s.done = true
	var errs []error
	for i := len(s.steps) - 1; i >= 0; i-- {
		if err := s.steps[i].undo(); err != nil {
			errs = append(errs, fmt.Errorf("undo %s: %w", s.steps[i].what, err))
		}
	}
	return errors.Join(errs...)
}

// OnError is meant for a deferred call with the operation's named error: it undoes the
// steps when *err is non-nil and attaches undo failures to it, so nothing is lost.
func (s *Stack) OnError(err *error) {
	if *err == nil {
		s.Commit()
		return
	}
	if uerr := s.Undo(); uerr != nil {
		*err = fmt.Errorf("%w (rollback also failed: %v)", *err, uerr)
	}
}
