package firewall

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"time"

	"github.com/godbus/dbus/v5"
)

// firewalld's D-Bus API, as the reference plugin calls it.
const (
	firewalldName      = "org.fedoraproject.FirewallD1"
	firewalldPath      = "/org/fedoraproject/FirewallD1"
	firewalldZoneIface = "org.fedoraproject.FirewallD1.zone"

	// DefaultSystemBus is the system bus address when DBUS_SYSTEM_BUS_ADDRESS is unset.
	DefaultSystemBus = "unix:path=/run/dbus/system_bus_socket"

	// detectTimeout bounds the whole "does firewalld own its name" question, so that a
	// wedged bus delays an ADD by at most this much before iptables is chosen.
	detectTimeout = 2 * time.Second
)

// firewalld error codes (the start of the exception's message) that mean the wanted
// state is already there.
const (
	errZoneAlreadySet = "ZONE_ALREADY_SET"
	errUnknownSource  = "UNKNOWN_SOURCE"
)

// firewalldRunning reports whether firewalld owns its name on the bus. Any failure to
// ask means no: the plugin then falls back to iptables, as the reference does. A bus
// socket that does not exist fails the dial at once.
func firewalldRunning(ctx context.Context, addr string) bool {
	ctx, cancel := context.WithTimeout(ctx, detectTimeout)
	defer cancel()
	conn, err := connect(ctx, addr)
	if err != nil {
		return false
	}
	defer conn.Close()
	var owned bool
	err = conn.BusObject().CallWithContext(ctx, "org.freedesktop.DBus.NameHasOwner", 0, firewalldName).Store(&owned)
	return err == nil && owned
}

// connect dials the bus at addr, authenticates and registers with it (Hello), all of
// it bounded by ctx. The connection then outlives ctx, so that a failed ADD's rollback
// can still use it.
func connect(ctx context.Context, addr string) (*dbus.Conn, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	conn, err := dbus.Dial(addr)
	if err != nil {
		return nil, err
	}
	// Closing the connection is what interrupts a bus that does not answer.
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	err = conn.Auth(nil)
	if err == nil {
		err = conn.Hello()
	}
	if !stop() {
		err = ctx.Err()
	}
	if err != nil {
		conn.Close()
		return nil, fmt.Errorf("bus %s: %w", addr, err)
	}
	return conn, nil
}

// firewalld is one connection to firewalld's zone interface.
type firewalld struct {
	conn *dbus.Conn
}

func dialFirewalld(ctx context.Context, addr string) (*firewalld, error) {
	conn, err := connect(ctx, addr)
	if err != nil {
		return nil, fmt.Errorf("system bus: %w", err)
	}
	return &firewalld{conn: conn}, nil
}

func (f *firewalld) Close() { f.conn.Close() }

// call calls a zone method, all of which answer with one string.
func (f *firewalld) call(ctx context.Context, method string, args ...any) (string, error) {
	var reply string
	err := f.conn.Object(firewalldName, firewalldPath).
		CallWithContext(ctx, firewalldZoneIface+"."+method, 0, args...).Store(&reply)
	return reply, err
}

// isCode reports whether err is a firewalld exception with the given code: firewalld
// starts the exception's message with it ("ZONE_ALREADY_SET: 10.0.0.2/32").
func isCode(err error, code string) bool {
	var de dbus.Error
	if !errors.As(err, &de) || len(de.Body) == 0 {
		return false
	}
	msg, _ := de.Body[0].(string)
	return strings.HasPrefix(msg, code)
}

// addSources binds each address to zone; one already bound to it is fine.
func (f *firewalld) addSources(ctx context.Context, zone string, ips []netip.Addr, push func(string, func() error)) error {
	for _, ip := range ips {
		src := hostPrefix(ip)
		if _, err := f.call(ctx, "addSource", zone, src); err != nil && !isCode(err, errZoneAlreadySet) {
			return fmt.Errorf("firewalld: add source %s to zone %s: %w", src, zone, err)
		}
		push("firewalld source "+src, func() error { return f.removeSource(context.WithoutCancel(ctx), zone, src) })
	}
	return nil
}

// removeSource unbinds a source; one firewalld does not know is already gone.
func (f *firewalld) removeSource(ctx context.Context, zone, src string) error {
	if _, err := f.call(ctx, "removeSource", zone, src); err != nil && !isCode(err, errUnknownSource) {
		return fmt.Errorf("firewalld: remove source %s from zone %s: %w", src, zone, err)
	}
	return nil
}

// checkSources verifies that each address is bound to zone.
func (f *firewalld) checkSources(ctx context.Context, zone string, ips []netip.Addr) error {
	for _, ip := range ips {
		src := hostPrefix(ip)
		got, err := f.call(ctx, "getZoneOfSource", src)
		if err != nil {
			return fmt.Errorf("firewalld: zone of source %s: %w", src, err)
		}
		if got != zone {
			return fmt.Errorf("firewalld: source %s is in zone %q, want %q", src, got, zone)
		}
	}
	return nil
}
