package wire

import (
	"bufio"
	"encoding/gob"
	"errors"
	"fmt"
	"io"
	"net"
	"reflect"
	"runtime/debug"
	"strings"
	"sync"
	"time"
)

// Server answers net/rpc calls on accepted connections. Methods are registered with
// Handle before Serve; a panic in one is logged and answered as an error, so one bad
// request never takes the daemon down.
type Server struct {
	methods map[string]method
	logf    func(format string, a ...any)
	wg      sync.WaitGroup

	// Admit, when set, decides whether a connection's caller is served; a refused
	// caller gets a 403 answer to its CONNECT with the reason, and no call is read.
	Admit func(net.Conn) error

	mu    sync.Mutex
	conns map[net.Conn]struct{}
}

type method struct {
	call func(dec *decoder) (reply any, err error)
}

// NewServer returns a server that logs through logf.
func NewServer(logf func(format string, a ...any)) *Server {
	return &Server{methods: map[string]method{}, logf: logf, conns: map[net.Conn]struct{}{}}
}

// Handle registers fn as name ("DHCP.Allocate"). A is the argument type, R the reply's.
func Handle[A, R any](s *Server, name string, fn func(*A) (*R, error)) {
	s.methods[name] = method{call: func(dec *decoder) (any, error) {
		args := new(A)
		if err := dec.Decode(args); err != nil {
			return nil, &decodeError{err}
		}
		reply, err := fn(args)
		if reply == nil {
			reply = new(R) // gob cannot encode a nil pointer
		}
		return reply, err
	}}
}

type decodeError struct{ err error }

func (e *decodeError) Error() string { return "rpc: decoding arguments: " + e.err.Error() }

// Serve accepts connections until l is closed, then closes the open ones (a client
// may keep one idle) and waits for their goroutines.
func (s *Server) Serve(l net.Listener) error {
	defer s.wg.Wait()
	defer s.closeConns()
	for {
		conn, err := l.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return nil
			}
			if ne, ok := errors.AsType[net.Error](err); ok && ne.Timeout() {
				continue
			}
			return err
		}
		s.mu.Lock()
		s.conns[conn] = struct{}{}
		s.mu.Unlock()
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			s.ServeConn(conn)
			s.mu.Lock()
			delete(s.conns, conn)
			s.mu.Unlock()
		}()
	}
}

func (s *Server) closeConns() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for c := range s.conns {
		c.Close()
	}
}

// ServeConn answers the handshake and then the calls of one connection, one at a time,
// until the client closes it or sends something that is not a call.
func (s *Server) ServeConn(conn net.Conn) {
	defer conn.Close()
	r := bufio.NewReader(conn)
	w := bufio.NewWriter(conn)
	_ = conn.SetReadDeadline(time.Now().Add(readTimeout))
	if err := readConnect(r); err != nil {
		if errors.Is(err, io.EOF) {
			return // a client that only checked the socket is there
		}
		s.logf("rpc: refusing connection: %v", err)
		_ = conn.SetWriteDeadline(time.Now().Add(writeTimeout))
		fmt.Fprintf(w, "HTTP/1.0 405 Method Not Allowed\r\nContent-Type: text/plain; charset=utf-8\r\n\r\n405 must CONNECT to %s\n", RPCPath)
		_ = w.Flush()
		return
	}
	_ = conn.SetWriteDeadline(time.Now().Add(writeTimeout))
	if s.Admit != nil {
		if err := s.Admit(conn); err != nil {
			s.logf("rpc: refusing a caller: %v", err)
			fmt.Fprintf(w, "%s\r\nContent-Type: text/plain; charset=utf-8\r\n\r\n%v\n", forbidden, err)
			_ = w.Flush()
			return
		}
	}
	if _, err := io.WriteString(w, connected+"\n\n"); err != nil || w.Flush() != nil {
		return
	}
	dec := newDecoder(r)
	enc := gob.NewEncoder(w)
	for {
		_ = conn.SetReadDeadline(time.Now().Add(readTimeout))
		var h requestHeader
		if err := dec.Decode(&h); err != nil {
			if !errors.Is(err, io.EOF) {
				s.logf("rpc: reading request: %v", err)
			}
			return
		}
		reply, err := s.dispatch(h.ServiceMethod, dec)
		var de *decodeError
		_ = conn.SetWriteDeadline(time.Now().Add(writeTimeout))
		if werr := writeResponse(w, enc, h, reply, err); werr != nil || errors.As(err, &de) {
			return // a body that does not decode leaves the stream out of step
		}
	}
}

// dispatch finds the method and calls it, with net/rpc's messages for an unknown one.
func (s *Server) dispatch(name string, dec *decoder) (reply any, err error) {
	m, ok := s.methods[name]
	if !ok {
		_ = dec.DecodeValue(reflect.Value{}) // the body is read and dropped, as net/rpc does
		service, _, dot := strings.Cut(name, ".")
		if !dot {
			return nil, fmt.Errorf("rpc: service/method request ill-formed: %s", name)
		}
		if !s.hasService(service) {
			return nil, fmt.Errorf("rpc: can't find service %s", name)
		}
		return nil, fmt.Errorf("rpc: can't find method %s", name)
	}
	defer func() {
		if r := recover(); r != nil {
			s.logf("rpc: %s panicked: %v\n%s", name, r, debug.Stack())
			reply, err = nil, fmt.Errorf("%s: internal error: %v", name, r)
		}
	}()
	return m.call(dec)
}

func (s *Server) hasService(service string) bool {
	for name := range s.methods {
		if strings.HasPrefix(name, service+".") {
			return true
		}
	}
	return false
}

func writeResponse(w *bufio.Writer, enc *gob.Encoder, req requestHeader, reply any, callErr error) error {
	h := responseHeader{ServiceMethod: req.ServiceMethod, Seq: req.Seq}
	if callErr != nil {
		h.Error = errorText(callErr)
		reply = invalidRequest{}
	}
	if err := enc.Encode(&h); err != nil {
		return err
	}
	if err := enc.Encode(reply); err != nil {
		return err
	}
	return w.Flush()
}

// readConnect reads the client's "CONNECT /_goRPC_ HTTP/1.0" request up to its blank
// line.
func readConnect(r *bufio.Reader) error {
	line, err := readLine(r)
	if err != nil {
		return err
	}
	for n := 0; ; n++ {
		h, err := readLine(r)
		if err != nil {
			return err
		}
		if h == "" {
			break
		}
		if n > 32 {
			return errors.New("too many header lines")
		}
	}
	f := strings.Fields(line)
	if len(f) != 3 || f[0] != "CONNECT" || f[1] != RPCPath || !strings.HasPrefix(f[2], "HTTP/1.") {
		return fmt.Errorf("not a CONNECT to %s: %q", RPCPath, line)
	}
	return nil
}
