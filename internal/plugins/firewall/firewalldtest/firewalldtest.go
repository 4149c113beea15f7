// Package firewalldtest gives tests a D-Bus daemon of their own and a fake firewalld
// on it, so that the firewall plugin's firewalld backend (ours, and the reference
// plugin's in the upgrade tests) talks D-Bus for real without the machine's system
// bus. dbus-daemon must be installed: the tests that need it fail rather than skip.
package firewalldtest

import (
	"bufio"
	"fmt"
	"maps"
	"net"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/godbus/dbus/v5"
	"github.com/stretchr/testify/require"
)

// firewalld's name, object and zone interface on the bus.
const (
	Name      = "org.fedoraproject.FirewallD1"
	Path      = dbus.ObjectPath("/org/fedoraproject/FirewallD1")
	ZoneIface = "org.fedoraproject.FirewallD1.zone"
)

// StartPrivateBus starts a dbus-daemon of the test's own on a socket in a temp dir
// (never the system bus), stopped when the test ends, and returns its address.
func StartPrivateBus(t testing.TB) string {
	t.Helper()
	if _, err := exec.LookPath("dbus-daemon"); err != nil {
		t.Fatalf("dbus-daemon is needed for this test (apt-get install dbus): %v", err)
	}
	sock := filepath.Join(t.TempDir(), "bus")
	cmd := exec.Command("dbus-daemon", "--session", "--nofork", "--nopidfile", "--print-address", "--address=unix:path="+sock)
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start(), "start dbus-daemon")
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	line, err := bufio.NewReader(out).ReadString('\n')
	require.NoError(t, err, "dbus-daemon printed no address")
	return strings.TrimSpace(line)
}

// SilentBus listens on a unix socket in a temp dir, accepts every connection, holds it
// open until the test ends and never answers: a wedged bus. It returns its address.
func SilentBus(t testing.TB) string {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "silent")
	ln, err := net.Listen("unix", sock)
	require.NoError(t, err)
	t.Cleanup(func() { ln.Close() })
	go func() {
		var held []net.Conn
		defer func() {
			for _, c := range held {
				c.Close()
			}
		}()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			held = append(held, c)
		}
	}()
	return "unix:path=" + sock
}

// ServeOnBus connects to the bus at addr, exports methods (D-Bus name -> Go func, as
// godbus's ExportMethodTable takes them) at path and iface, and takes name, failing the
// test if someone else has it. The connection, returned, closes when the test ends.
func ServeOnBus(t testing.TB, addr, name string, path dbus.ObjectPath, iface string, methods map[string]any) *dbus.Conn {
	t.Helper()
	conn, err := dbus.Connect(addr)
	require.NoError(t, err)
	t.Cleanup(func() { conn.Close() })
	require.NoError(t, conn.ExportMethodTable(methods, path, iface))
	reply, err := conn.RequestName(name, dbus.NameFlagDoNotQueue)
	require.NoError(t, err)
	require.Equal(t, dbus.RequestNameReplyPrimaryOwner, reply, "RequestName %s", name)
	return conn
}

// Firewalld plays firewalld's zone interface (addSource, removeSource, querySource,
// getZoneOfSource) and records the calls it gets.
type Firewalld struct {
	conn    *dbus.Conn
	mu      sync.Mutex
	calls   []string
	sources map[string]string // source -> zone
}

// Error is a firewalld exception: its message starts with the error code.
func Error(code, source string) *dbus.Error {
	return dbus.NewError("org.fedoraproject.FirewallD1.Exception", []any{code + ": " + source})
}

// record notes a call and locks f until the returned function runs.
func (f *Firewalld) record(format string, a ...any) (unlock func()) {
	f.mu.Lock()
	f.calls = append(f.calls, fmt.Sprintf(format, a...))
	return f.mu.Unlock
}

func (f *Firewalld) addSource(zone, source string) (string, *dbus.Error) {
	defer f.record("addSource %s %s", zone, source)()
	if f.sources[source] == zone {
		return "", Error("ZONE_ALREADY_SET", source)
	}
	if f.sources[source] != "" {
		return "", Error("ZONE_CONFLICT", source)
	}
	f.sources[source] = zone
	return zone, nil
}

func (f *Firewalld) removeSource(zone, source string) (string, *dbus.Error) {
	defer f.record("removeSource %s %s", zone, source)()
	if f.sources[source] != zone {
		return "", Error("UNKNOWN_SOURCE", source)
	}
	delete(f.sources, source)
	return zone, nil
}

func (f *Firewalld) querySource(zone, source string) (bool, *dbus.Error) {
	defer f.record("querySource %s %s", zone, source)()
	return f.sources[source] == zone, nil
}

func (f *Firewalld) getZoneOfSource(source string) (string, *dbus.Error) {
	defer f.record("getZoneOfSource %s", source)()
	return f.sources[source], nil
}

// Calls returns the calls so far, one "method arg..." line each.
func (f *Firewalld) Calls() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.calls)
}

// Sources returns the sources bound to zones, source -> zone.
func (f *Firewalld) Sources() map[string]string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return maps.Clone(f.sources)
}

// Bind binds source to zone as someone else did (a conflict for the next addSource).
func (f *Firewalld) Bind(source, zone string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.sources[source] = zone
}

// Reload does what `firewall-cmd --reload` does to the runtime state a plugin made:
// every source bound at runtime is gone. Then firewalld's Reloaded signal goes out on
// the bus, as firewalld sends it once a reload is done.
func (f *Firewalld) Reload() error {
	f.mu.Lock()
	clear(f.sources)
	f.mu.Unlock()
	return f.conn.Emit(Path, Name+".Reloaded")
}

// Start serves a fake under firewalld's name, path and zone interface on the bus at
// addr: a call anywhere else gets the bus's or godbus's own error, and arguments that
// are not strings an InvalidArgs error.
func Start(t testing.TB, addr string) *Firewalld {
	t.Helper()
	f := &Firewalld{sources: map[string]string{}}
	f.conn = ServeOnBus(t, addr, Name, Path, ZoneIface, map[string]any{
		"addSource":       f.addSource,
		"removeSource":    f.removeSource,
		"querySource":     f.querySource,
		"getZoneOfSource": f.getZoneOfSource,
	})
	return f
}
