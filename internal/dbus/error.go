package dbus

// Error is an ERROR reply. Services put a human-readable text first in the body, and
// some put a code at its start (firewalld: "ZONE_ALREADY_SET: 10.0.0.2/32"), which is
// what callers match on.
type Error struct {
	Name    string // the error name, such as org.freedesktop.DBus.Error.ServiceUnknown
	Message string // the body's first value when it is a string
}

func newError(name string, body []any) *Error {
	e := &Error{Name: name}
	if len(body) > 0 {
		e.Message, _ = body[0].(string)
	}
	return e
}

func (e *Error) Error() string {
	if e.Message == "" {
		return e.Name
	}
	return e.Name + ": " + e.Message
}
