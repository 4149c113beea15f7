package firewall

import (
	"context"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/godbus/dbus/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cnikit/cni/internal/plugins/firewall/firewalldtest"
	"github.com/cnikit/cni/internal/testbed/testns"
)

// testCtx bounds what is expected to succeed, so that a bug fails instead of hanging.
func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func TestConnectGivesUpAtTheDeadlineOfABusThatSaysNothing(t *testing.T) {
	bus := firewalldtest.SilentBus(t)
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := connect(ctx, bus)
	require.Error(t, err)
	assert.ErrorIs(t, err, context.DeadlineExceeded)
	assert.Less(t, time.Since(start), 5*time.Second)
}

// A zone call that firewalld never answers ends at ctx's deadline, and the connection
// still serves the next call: a failed ADD's rollback runs on it after the deadline.
func TestZoneCallEndsAtTheDeadlineAndTheConnectionStaysUsable(t *testing.T) {
	bus := firewalldtest.StartPrivateBus(t)
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	firewalldtest.ServeOnBus(t, bus, firewalldName, firewalldPath, firewalldZoneIface, map[string]any{
		"addSource": func(zone, source string) (string, *dbus.Error) {
			<-release
			return zone, nil
		},
		"removeSource": func(zone, source string) (string, *dbus.Error) {
			return "", dbus.NewError("org.fedoraproject.FirewallD1.Exception", []any{"UNKNOWN_SOURCE: " + source})
		},
	})
	fw, err := dialFirewalld(testCtx(t), bus)
	require.NoError(t, err)
	t.Cleanup(fw.Close)

	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	_, err = fw.call(ctx, "addSource", "trusted", "10.0.0.2/32")
	assert.ErrorIs(t, err, context.DeadlineExceeded)

	_, err = fw.call(testCtx(t), "removeSource", "trusted", "10.0.0.2/32")
	require.Error(t, err)
	assert.True(t, isCode(err, errUnknownSource), "the exception's code is read from its message: %v", err)
	assert.False(t, isCode(err, errZoneAlreadySet))
	assert.NoError(t, fw.removeSource(testCtx(t), "trusted", "10.0.0.2/32"), "UNKNOWN_SOURCE means already removed")
}

func TestCallsToAServiceThatIsNotThereFailWithTheBusError(t *testing.T) {
	bus := firewalldtest.StartPrivateBus(t)
	assert.False(t, firewalldRunning(testCtx(t), bus))
	fw, err := dialFirewalld(testCtx(t), bus)
	require.NoError(t, err)
	t.Cleanup(fw.Close)
	_, err = fw.call(testCtx(t), "getZoneOfSource", "10.0.0.2/32")
	var de dbus.Error
	require.ErrorAs(t, err, &de)
	assert.Equal(t, "org.freedesktop.DBus.Error.ServiceUnknown", de.Name)
	assert.False(t, isCode(err, errUnknownSource))
}

// DBUS_SYSTEM_BUS_ADDRESS may list alternatives (';') and abstract sockets; the first
// that answers is used.
func TestFirewalldIsFoundAtAnAbstractAddressAfterAFailedAlternative(t *testing.T) {
	testns.RequireRoot(t)
	bus := firewalldtest.StartPrivateBus(t)
	path, ok := strings.CutPrefix(strings.Split(bus, ",")[0], "unix:path=")
	require.True(t, ok, "dbus-daemon printed %q", bus)
	firewalldtest.ServeOnBus(t, bus, firewalldName, firewalldPath, firewalldZoneIface, map[string]any{
		"getZoneOfSource": func(source string) (string, *dbus.Error) { return "trusted", nil },
	})

	// Abstract socket names belong to a network namespace: bind and dial in a
	// throwaway one, never the machine's. The forwarder relays to the daemon's socket.
	n := testns.New(t)
	const name = "cni-firewall-dbus-test"
	var running bool
	n.Run(t, func() error {
		ln, err := net.Listen("unix", "@"+name)
		if err != nil {
			return err
		}
		t.Cleanup(func() { ln.Close() })
		go forward(t, ln, path)
		running = firewalldRunning(testCtx(t), "unix:path="+path+".missing;unix:abstract="+name)
		return nil
	})
	assert.True(t, running)
}

// forward relays each connection accepted on ln to the unix socket at path. The bus
// sees the forwarder's credentials, which are ours.
func forward(t *testing.T, ln net.Listener, path string) {
	for {
		in, err := ln.Accept()
		if err != nil {
			return
		}
		out, err := net.Dial("unix", path)
		if err != nil {
			in.Close()
			continue
		}
		t.Cleanup(func() { in.Close(); out.Close() })
		go func() { _, _ = io.Copy(out, in) }()
		go func() { _, _ = io.Copy(in, out) }()
	}
}
