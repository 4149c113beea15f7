package firewall

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"time"

	"github.com/cnikit/cni/internal/dbus"
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
	conn, err := dbus.Dial(ctx, addr)
	if err != nil {
		return false
	}
	defer conn.Close()
	owned, err := conn.NameHasOwner(ctx, firewalldName)
	return err == nil && owned
}

// firewalld is one connection to firewalld's zone interface.
type firewalld struct {
	conn *dbus.Conn
}

func dialFirewalld(ctx context.Context, addr string) (*firewalld, error) {
	conn, err := dbus.Dial(ctx, addr)
	if err != nil {
		return nil, fmt.Errorf("system bus: %w", err)
	}
	return &firewalld{conn: conn}, nil
}

func (f *firewalld) Close() { f.conn.Close() }

// call calls a zone method, all of which answer with one string.
func (f *firewalld) call(ctx context.Context, method string, args ...string) (string, error) {
	return dbus.Single[string](f.conn.Call(ctx, firewalldName, firewalldPath, firewalldZoneIface, method, args...))
}

// isCode reports whether err is a firewalld exception with the given code.
func isCode(err error, code string) bool {
	var de *dbus.Error
	return errors.As(err, &de) && strings.HasPrefix(de.Message, code)
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

func (f *firewalld) removeSources(ctx context.Context, zone string, ips []netip.Addr) error {
	var errs []error
	for _, ip := range ips {
		errs = append(errs, f.removeSource(ctx, zone, hostPrefix(ip)))
	}
	return errors.Join(errs...)
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
