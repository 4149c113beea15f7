package dbustest

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cnikit/cni/internal/dbus"
	"github.com/cnikit/cni/internal/dbus/internal/wire"
)

// Call is one method call the server received.
type Call struct {
	Sender    string // the caller's unique name, where a signal to it can be sent
	Path      string
	Interface string
	Member    string
	Args      []any
}

// Handler answers a call with the reply's values, or with an error: a *dbus.Error is
// sent as that error name and message, any other error as
// org.freedesktop.DBus.Error.Failed.
type Handler func(Call) ([]any, error)

// Server is a connection to a bus that serves calls to a name it owns.
type Server struct {
	t       testing.TB
	conn    *wire.Conn
	served  chan struct{}
	closing atomic.Bool
	err     error // why serving stopped, read after served is closed
}

const (
	errFailed      = "org.freedesktop.DBus.Error.Failed"
	errInvalidArgs = "org.freedesktop.DBus.Error.InvalidArgs"
	// setupTimeout bounds each call the server itself makes to the bus.
	setupTimeout = 10 * time.Second
)

// Connect connects to the bus at address; the connection closes when the test ends,
// after the handler that may be running has returned.
func Connect(t testing.TB, address string) *Server {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), setupTimeout)
	defer cancel()
	conn, err := wire.Dial(ctx, address)
	if err != nil {
		t.Fatalf("dbustest: %v", err)
	}
	s := &Server{t: t, conn: conn}
	t.Cleanup(s.close)
	if _, err := s.call(ctx, "Hello"); err != nil {
		t.Fatalf("dbustest: %v", err)
	}
	return s
}

func (s *Server) close() {
	s.closing.Store(true)
	s.conn.Close()
	if s.served != nil {
		<-s.served
		if s.err != nil {
			s.t.Errorf("dbustest: serving stopped: %v", s.err)
		}
	}
}

// call calls a method of the bus itself.
func (s *Server) call(ctx context.Context, member string, args ...any) ([]any, error) {
	m := &wire.Message{Type: wire.TypeMethodCall, Path: dbus.BusPath, Interface: dbus.BusInterface, Member: member, Destination: dbus.BusName}
	if err := m.SetArgs(args...); err != nil {
		return nil, err
	}
	reply, err := s.conn.RoundTrip(ctx, m)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", member, err)
	}
	body, err := reply.Args()
	if reply.Type == wire.TypeError {
		return nil, fmt.Errorf("%s: %s %v", member, reply.ErrorName, body)
	}
	return body, err
}

// Serve takes name on the bus (failing the test if someone else has it) and answers
// the method calls that arrive, one at a time, with h, until the test ends.
func (s *Server) Serve(name string, h Handler) {
	s.t.Helper()
	if s.served != nil {
		s.t.Fatal("dbustest: Serve called twice")
	}
	ctx, cancel := context.WithTimeout(context.Background(), setupTimeout)
	defer cancel()
	const doNotQueue, primaryOwner = uint32(4), uint32(1)
	reply, err := s.call(ctx, "RequestName", name, doNotQueue)
	if err != nil {
		s.t.Fatalf("dbustest: %v", err)
	}
	if len(reply) != 1 || reply[0] != primaryOwner {
		s.t.Fatalf("dbustest: RequestName %s: reply %v, want primary ownership", name, reply)
	}
	s.served = make(chan struct{})
	go s.serve(h)
}

func (s *Server) serve(h Handler) {
	defer close(s.served)
	for {
		m, err := s.conn.Read(context.Background())
		if err != nil {
			if !s.closing.Load() {
				s.err = err
			}
			return
		}
		if m.Type != wire.TypeMethodCall {
			continue
		}
		if err := s.answer(m, h); err != nil && !s.closing.Load() {
			s.err = err
			return
		}
	}
}

// answer runs the handler for one call and sends its reply.
func (s *Server) answer(m *wire.Message, h Handler) error {
	reply := &wire.Message{Type: wire.TypeMethodReturn, ReplySerial: m.Serial, Destination: m.Sender}
	args, err := m.Args()
	if err != nil {
		err = &dbus.Error{Name: errInvalidArgs, Message: err.Error()}
	} else {
		var body []any
		body, err = h(Call{Sender: m.Sender, Path: string(m.Path), Interface: m.Interface, Member: m.Member, Args: args})
		if err == nil {
			err = reply.SetArgs(body...)
		}
	}
	if err != nil {
		de := &dbus.Error{Name: errFailed, Message: err.Error()}
		errors.As(err, &de)
		reply = &wire.Message{Type: wire.TypeError, ReplySerial: m.Serial, Destination: m.Sender, ErrorName: de.Name}
		if err := reply.SetArgs(de.Message); err != nil {
			return err
		}
	}
	if m.Flags&wire.FlagNoReplyExpected != 0 {
		return nil
	}
	return s.conn.Write(context.Background(), reply)
}

// Signal sends a signal to one connection (destination) or, with destination "", to
// whoever listens for it. A handler may call it before returning, to have a signal
// arrive ahead of its reply.
func (s *Server) Signal(destination, path, iface, member string, args ...any) error {
	m := &wire.Message{Type: wire.TypeSignal, Path: wire.ObjectPath(path), Interface: iface, Member: member, Destination: destination}
	if err := m.SetArgs(args...); err != nil {
		return err
	}
	return s.conn.Write(context.Background(), m)
}
