package dbus_test

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cnikit/cni/internal/dbus"
	"github.com/cnikit/cni/internal/dbus/dbustest"
	"github.com/cnikit/cni/internal/testns"
)

const (
	echoName  = "org.example.Echo"
	echoPath  = "/org/example/Echo"
	echoIface = "org.example.Echo"
)

// callTimeout bounds calls that are expected to succeed, so a bug fails instead of hanging.
const callTimeout = 10 * time.Second

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), callTimeout)
	t.Cleanup(cancel)
	return c
}

func dial(t *testing.T, bus string) *dbus.Conn {
	t.Helper()
	conn, err := dbus.Dial(ctx(t), bus)
	require.NoError(t, err)
	t.Cleanup(func() { conn.Close() })
	return conn
}

// serve starts a service on bus whose handler is h.
func serve(t *testing.T, bus string, h func(*dbustest.Server, dbustest.Call) ([]any, error)) {
	t.Helper()
	srv := dbustest.Connect(t, bus)
	srv.Serve(echoName, func(c dbustest.Call) ([]any, error) { return h(srv, c) })
}

func TestCallSendsStringsAndReturnsTheReply(t *testing.T) {
	bus := dbustest.StartBus(t)
	var mu sync.Mutex
	var got []dbustest.Call
	serve(t, bus, func(_ *dbustest.Server, c dbustest.Call) ([]any, error) {
		mu.Lock()
		defer mu.Unlock()
		got = append(got, c)
		parts := make([]string, len(c.Args))
		for i, a := range c.Args {
			parts[i] = a.(string)
		}
		return []any{strings.Join(parts, "+")}, nil
	})
	conn := dial(t, bus)

	reply, err := conn.Call(ctx(t), echoName, echoPath, echoIface, "Join", "trusted", "10.0.0.2/32", "")
	require.NoError(t, err)
	assert.Equal(t, []any{"trusted+10.0.0.2/32+"}, reply)

	zone, err := dbus.Single[string](conn.Call(ctx(t), echoName, echoPath, echoIface, "Join", "ünï"))
	require.NoError(t, err)
	assert.Equal(t, "ünï", zone)

	mu.Lock()
	defer mu.Unlock()
	require.Len(t, got, 2)
	assert.Equal(t, echoPath, got[0].Path)
	assert.Equal(t, echoIface, got[0].Interface)
	assert.Equal(t, "Join", got[0].Member)
	assert.Equal(t, []any{"trusted", "10.0.0.2/32", ""}, got[0].Args)
	assert.True(t, strings.HasPrefix(got[0].Sender, ":"), "the bus names the caller by its unique name: %q", got[0].Sender)
}

func TestNameHasOwnerReturnsTheBusAnswer(t *testing.T) {
	bus := dbustest.StartBus(t)
	conn := dial(t, bus)

	owned, err := conn.NameHasOwner(ctx(t), echoName)
	require.NoError(t, err)
	assert.False(t, owned)

	serve(t, bus, func(*dbustest.Server, dbustest.Call) ([]any, error) { return nil, nil })
	owned, err = conn.NameHasOwner(ctx(t), echoName)
	require.NoError(t, err)
	assert.True(t, owned)
}

func TestCallDecodesBasicReplyTypesFromTheBus(t *testing.T) {
	bus := dbustest.StartBus(t)
	conn := dial(t, bus)
	uid, err := dbus.Single[uint32](conn.Call(ctx(t), dbus.BusName, dbus.BusPath, dbus.BusInterface, "GetConnectionUnixUser", dbus.BusName))
	require.NoError(t, err)
	assert.Equal(t, uint32(os.Getuid()), uid)

	_, err = conn.Call(ctx(t), dbus.BusName, dbus.BusPath, dbus.BusInterface, "ListNames")
	require.Error(t, err, "an array reply is refused, not misread")
	assert.Contains(t, err.Error(), `type "as" is not supported`)
}

func TestErrorReplyCarriesNameAndMessage(t *testing.T) {
	bus := dbustest.StartBus(t)
	serve(t, bus, func(_ *dbustest.Server, c dbustest.Call) ([]any, error) {
		return nil, &dbus.Error{Name: "org.example.Echo.Exception", Message: "ZONE_ALREADY_SET: " + c.Args[0].(string)}
	})
	conn := dial(t, bus)

	_, err := conn.Call(ctx(t), echoName, echoPath, echoIface, "Add", "10.0.0.2/32")
	var de *dbus.Error
	require.ErrorAs(t, err, &de)
	assert.Equal(t, "org.example.Echo.Exception", de.Name)
	assert.Equal(t, "ZONE_ALREADY_SET: 10.0.0.2/32", de.Message)

	_, err = conn.Call(ctx(t), "org.example.Nobody", "/", "org.example.Nobody", "Add")
	require.ErrorAs(t, err, &de, "the bus's own errors arrive the same way")
	assert.Equal(t, "org.freedesktop.DBus.Error.ServiceUnknown", de.Name)
	assert.NotEmpty(t, de.Message)

	_, err = conn.Call(ctx(t), echoName, echoPath, echoIface, "Add", "10.0.0.3/32")
	require.ErrorAs(t, err, &de, "the connection is still usable after an error reply")
	assert.Equal(t, "ZONE_ALREADY_SET: 10.0.0.3/32", de.Message)
}

func TestSignalsBeforeTheReplyAreSkipped(t *testing.T) {
	bus := dbustest.StartBus(t)
	serve(t, bus, func(srv *dbustest.Server, c dbustest.Call) ([]any, error) {
		for _, s := range []string{"noise", "more noise"} {
			if err := srv.Signal(c.Sender, echoPath, echoIface, "Changed", s, uint32(7)); err != nil {
				return nil, err
			}
		}
		return []any{"reply to " + c.Args[0].(string)}, nil
	})
	conn := dial(t, bus)
	for _, arg := range []string{"first", "second"} {
		got, err := dbus.Single[string](conn.Call(ctx(t), echoName, echoPath, echoIface, "Ping", arg))
		require.NoError(t, err)
		assert.Equal(t, "reply to "+arg, got)
	}
}

func TestCallReturnsAtTheDeadlineOfAServiceThatNeverAnswers(t *testing.T) {
	bus := dbustest.StartBus(t)
	release := make(chan struct{})
	serve(t, bus, func(*dbustest.Server, dbustest.Call) ([]any, error) {
		<-release
		return nil, nil
	})
	t.Cleanup(func() { close(release) }) // before the server's cleanup, which waits for the handler

	for _, tc := range []struct {
		name string
		cut  func(context.Context) (context.Context, context.CancelFunc)
		want error
	}{
		{"deadline", func(c context.Context) (context.Context, context.CancelFunc) {
			return context.WithTimeout(c, 200*time.Millisecond)
		}, context.DeadlineExceeded},
		{"cancel", func(c context.Context) (context.Context, context.CancelFunc) {
			c, cancel := context.WithCancel(c)
			time.AfterFunc(200*time.Millisecond, cancel)
			return c, cancel
		}, context.Canceled},
	} {
		t.Run(tc.name, func(t *testing.T) {
			conn := dial(t, bus)
			c, cancel := tc.cut(context.Background())
			defer cancel()
			_, err := conn.Call(c, echoName, echoPath, echoIface, "Hang")
			require.Error(t, err)
			assert.ErrorIs(t, err, tc.want)

			_, err = conn.NameHasOwner(ctx(t), echoName)
			assert.ErrorContains(t, err, "unusable", "an interrupted exchange leaves the stream out of step")
		})
	}
}

func TestDialReturnsAtTheDeadlineOfABusThatSaysNothing(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "silent")
	ln, err := net.Listen("unix", sock)
	require.NoError(t, err)
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			t.Cleanup(func() { c.Close() })
		}
	}()

	c, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	_, err = dbus.Dial(c, "unix:path="+sock)
	require.Error(t, err)
	assert.ErrorIs(t, err, context.DeadlineExceeded)
	assert.Contains(t, err.Error(), "authenticate")
}

func TestDialRejectsBadAddresses(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "no-such-socket")
	for _, tc := range []struct {
		addr, want string
		is         error
	}{
		{addr: "unix:path=" + missing, want: "no-such-socket", is: os.ErrNotExist},
		{addr: "tcp:host=localhost,port=1", want: `transport "tcp" is not supported`},
		{addr: "unix:runtime=yes", want: "without path= or abstract="},
		{addr: "/run/dbus/system_bus_socket", want: "no transport prefix"},
		{addr: "", want: "names no transport"},
	} {
		t.Run(tc.addr, func(t *testing.T) {
			_, err := dbus.Dial(ctx(t), tc.addr)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
			if tc.is != nil {
				assert.True(t, errors.Is(err, tc.is), "%v is not %v", err, tc.is)
			}
		})
	}
}

func TestDialFindsABusAtAnAbstractAddressAfterAFailedAlternative(t *testing.T) {
	testns.RequireRoot(t)
	bus := dbustest.StartBus(t)
	path, ok := strings.CutPrefix(strings.Split(bus, ",")[0], "unix:path=")
	require.True(t, ok, "dbus-daemon printed %q", bus)

	// Abstract socket names belong to a network namespace: bind and dial in a
	// throwaway one, never the machine's. The forwarder relays to the daemon's socket.
	n := testns.New(t)
	const name = "cni-dbus-test"
	var conn *dbus.Conn
	n.Run(t, func() error {
		ln, err := net.Listen("unix", "@"+name)
		if err != nil {
			return err
		}
		t.Cleanup(func() { ln.Close() })
		go forward(t, ln, path)
		conn, err = dbus.Dial(ctx(t), "unix:path="+path+".missing;unix:abstract="+name)
		return err
	})
	t.Cleanup(func() { conn.Close() })
	owned, err := conn.NameHasOwner(ctx(t), dbus.BusName)
	require.NoError(t, err)
	assert.True(t, owned)
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
		go func() { _, _ = copyAll(out, in) }()
		go func() { _, _ = copyAll(in, out) }()
	}
}

func copyAll(dst, src net.Conn) (int64, error) {
	defer dst.Close()
	buf := make([]byte, 4096)
	var n int64
	for {
		k, err := src.Read(buf)
		if k > 0 {
			if _, werr := dst.Write(buf[:k]); werr != nil {
				return n, werr
			}
			n += int64(k)
		}
		if err != nil {
			return n, err
		}
	}
}
