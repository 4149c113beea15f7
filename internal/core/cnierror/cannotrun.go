package cnierror

import "errors"

// ErrCannotRun marks the failure of a plugin that cannot run with the config at all:
// its type names no plugin on CNI_PATH, or it does not support the config's
// cniVersion. No ADD with that config can have made anything, so a DEL or GC that
// meets it (the plugin's own version check, an exec'd IPAM delegate, a chain's child,
// flannel's delegate) has nothing to undo: it says why on stderr and succeeds, where
// failing would keep the runtime's teardown of the pod failing for ever. ADD and CHECK
// keep failing with the error's code. A plugin that runs and fails is never marked:
// that is "try again".
var ErrCannotRun = errors.New("the plugin cannot run with this config")

// CannotRun returns e marked with ErrCannotRun; its code, message and details are e's.
func CannotRun(e *Error) error { return cannotRun{e} }

// CannotHaveMade reports whether err, the failure of command, shows that the plugin
// cannot have made anything for the attachment: a DEL or GC that failed with
// ErrCannotRun, which therefore has nothing to undo.
func CannotHaveMade(command string, err error) bool {
	return (command == "DEL" || command == "GC") && errors.Is(err, ErrCannotRun)
}

// cannotRun is an *Error marked with ErrCannotRun: errors.As finds the *Error (its code
// goes to the wire unchanged), errors.Is finds the mark.
type cannotRun struct{ err *Error }

func (c cannotRun) Error() string        { return c.err.Error() }
func (c cannotRun) Unwrap() error        { return c.err }
func (c cannotRun) Is(target error) bool { return target == ErrCannotRun }
