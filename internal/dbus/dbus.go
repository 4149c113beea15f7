// Package dbus is the small D-Bus client behind the firewall plugin's firewalld backend:
// connect to a bus, call a method with string arguments, read a reply of basic types.
// It exists instead of a general-purpose D-Bus library because every package linked
// into the cni binary costs start-up time in every plugin exec: this one needs no
// reflection, runs no background goroutine, and imports only the standard library.
package dbus

import (
	"context"
	"fmt"

	"github.com/cnikit/cni/internal/dbus/internal/wire"
)

// The message bus itself, as a destination.
const (
	BusName      = "org.freedesktop.DBus"
	BusPath      = "/org/freedesktop/DBus"
	BusInterface = "org.freedesktop.DBus"
)

// ObjectPath and Signature are how reply values of types 'o' and 'g' arrive.
type (
	ObjectPath = wire.ObjectPath
	Signature  = wire.Signature
)

// Conn is a connection to a bus. Calls on one Conn are serialised.
type Conn struct {
	wc *wire.Conn
}

// Dial connects to a bus at a D-Bus address such as
// "unix:path=/run/dbus/system_bus_socket" (alternatives separated by ';' are tried in
// order), authenticates, and registers with the bus by calling Hello, which a bus
// requires before anything else. ctx bounds all of it.
func Dial(ctx context.Context, address string) (*Conn, error) {
	wc, err := wire.Dial(ctx, address)
	if err != nil {
		return nil, err
	}
	c := &Conn{wc: wc}
	if _, err := Single[string](c.Call(ctx, BusName, BusPath, BusInterface, "Hello")); err != nil {
		wc.Close()
		return nil, fmt.Errorf("register with bus %s: %w", address, err)
	}
	return c, nil
}

// Close closes the connection.
func (c *Conn) Close() error { return c.wc.Close() }

// Call calls a method and returns its reply's values: string, bool, byte, int16,
// uint16, int32, uint32, int64, uint64, float64, ObjectPath or Signature; a reply
// holding a container type is an error. An ERROR reply is returned as an *Error. When
// ctx ends first, Call returns ctx's error and the connection is no longer usable.
func (c *Conn) Call(ctx context.Context, destination, path, iface, member string, args ...string) ([]any, error) {
	call := &wire.Message{
		Type:        wire.TypeMethodCall,
		Path:        ObjectPath(path),
		Interface:   iface,
		Member:      member,
		Destination: destination,
	}
	vals := make([]any, len(args))
	for i, a := range args {
		vals[i] = a
	}
	if err := call.SetArgs(vals...); err != nil {
		return nil, fmt.Errorf("call %s.%s: %w", iface, member, err)
	}
	reply, err := c.wc.RoundTrip(ctx, call)
	if err != nil {
		return nil, fmt.Errorf("call %s.%s: %w", iface, member, err)
	}
	body, err := reply.Args()
	if reply.Type == wire.TypeError {
		return nil, fmt.Errorf("call %s.%s: %w", iface, member, newError(reply.ErrorName, body))
	}
	if err != nil {
		return nil, fmt.Errorf("call %s.%s: reply: %w", iface, member, err)
	}
	return body, nil
}

// NameHasOwner asks the bus whether a connection owns name.
func (c *Conn) NameHasOwner(ctx context.Context, name string) (bool, error) {
	return Single[bool](c.Call(ctx, BusName, BusPath, BusInterface, "NameHasOwner", name))
}

// Single unpacks a reply that must hold exactly one value of type T; it takes Call's
// results as they are, as in Single[string](conn.Call(...)).
func Single[T any](body []any, err error) (T, error) {
	var zero T
	if err != nil {
		return zero, err
	}
	if len(body) == 1 {
		if v, ok := body[0].(T); ok {
			return v, nil
		}
	}
	return zero, fmt.Errorf("reply %v is not one %T", body, zero)
}
