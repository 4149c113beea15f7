package cnierror

import (
	"errors"
	"io/fs"
	"strings"
)

// privilegeHint is what a failure for want of privilege adds to its message: run as a
// user without them (by hand, in a test, a runtime's helper), every plugin and the CLI
// fail at the first netns they open, netlink request, state dir or iptables call they
// make, in words (EPERM, EACCES) that do not say what is missing.
const privilegeHint = " (are you root? this needs root, or CAP_NET_ADMIN and CAP_SYS_ADMIN)"

// WithPrivilegeHint returns err, saying once at its end that it may be for want of
// privilege when it is a permission error (EPERM or EACCES anywhere in its chain, or in
// the text of an error flattened on its way, such as a tool's stderr). Other errors,
// and nil, are returned as they are; the chain stays intact for errors.Is and As.
func WithPrivilegeHint(err error) error {
	if err == nil || !permissionDenied(err) || strings.Contains(err.Error(), privilegeHint) {
		return err
	}
	return hinted{err}
}

func permissionDenied(err error) bool {
	if errors.Is(err, fs.ErrPermission) {
		return true
	}
	msg := err.Error()
	return strings.Contains(msg, "operation not permitted") || strings.Contains(msg, "permission denied") ||
		strings.Contains(msg, "Permission denied")
}

// hinted is an error with privilegeHint after its message.
type hinted struct{ err error }

func (h hinted) Error() string { return h.err.Error() + privilegeHint }
func (h hinted) Unwrap() error { return h.err }
