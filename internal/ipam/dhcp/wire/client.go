package wire

import (
	"bufio"
	"context"
	"encoding/gob"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"reflect"
	"strings"
)

// ServerError is an error the daemon returned for a call (net/rpc's ServerError): the
// daemon was reached and answered.
type ServerError string

func (e ServerError) Error() string { return string(e) }

// ErrRefused says the daemon does not serve this caller (its uid).
var ErrRefused = errors.New("the dhcp daemon refused this caller")

// ErrNotSocket says the socket path names something else.
var ErrNotSocket = errors.New("not a unix socket")

// UnreachableError says the daemon could not be reached at all: no socket, nobody
// listening, or a path that is not a socket.
type UnreachableError struct {
	Socket string
	Err    error
}

func (e *UnreachableError) Error() string {
	return fmt.Sprintf("dhcp daemon at %s: %v", e.Socket, e.Err)
}

func (e *UnreachableError) Unwrap() error { return e.Err }

// IsUnknownMethod reports whether err is the daemon's answer to a method it does not
// have: the reference daemon has only Allocate and Release.
func IsUnknownMethod(err error) bool {
	se, ok := errors.AsType[ServerError](err)
	return ok && strings.HasPrefix(string(se), "rpc: can't find ")
}

// Call makes one call on the daemon listening at socket and decodes its reply into
// reply. The context bounds the whole call, dial included.
func Call(ctx context.Context, socket, method string, args, reply any) error {
	conn, err := dial(ctx, socket)
	if err != nil {
		return err
	}
	defer conn.Close()
	if d, ok := ctx.Deadline(); ok {
		if err := conn.SetDeadline(d); err != nil {
			return err
		}
	}
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	defer stop()
	err = call(conn, method, args, reply)
	if err != nil && ctx.Err() != nil {
		return fmt.Errorf("calling %s: %w", method, ctx.Err())
	}
	return err
}

// dial connects and does the CONNECT handshake. A path that exists but is no socket
// gets its own message: connecting to it would only say "connection refused".
func dial(ctx context.Context, socket string) (net.Conn, error) {
	st, err := os.Stat(socket)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, &UnreachableError{socket, fmt.Errorf("no socket (is the daemon running? start it with \"dhcp daemon\"): %w", err)}
		}
		return nil, &UnreachableError{socket, err}
	}
	if st.Mode().Type() != fs.ModeSocket {
		return nil, &UnreachableError{socket, fmt.Errorf("%w (mode %s)", ErrNotSocket, st.Mode())}
	}
	var d net.Dialer
	conn, err := d.DialContext(ctx, "unix", socket)
	if err != nil {
		return nil, &UnreachableError{socket, err}
	}
	return conn, nil
}

func call(conn net.Conn, method string, args, reply any) error {
	if _, err := io.WriteString(conn, "CONNECT "+RPCPath+" HTTP/1.0\n\n"); err != nil {
		return fmt.Errorf("dhcp daemon handshake: %w", err)
	}
	r := bufio.NewReader(conn)
	if err := readConnectAnswer(r); err != nil {
		return err
	}
	w := bufio.NewWriter(conn)
	enc := gob.NewEncoder(w)
	if err := enc.Encode(&requestHeader{ServiceMethod: method}); err != nil {
		return fmt.Errorf("calling %s: %w", method, err)
	}
	if err := enc.Encode(args); err != nil {
		return fmt.Errorf("calling %s: encoding arguments: %w", method, err)
	}
	if err := w.Flush(); err != nil {
		return fmt.Errorf("calling %s: %w", method, err)
	}
	dec := newDecoder(r)
	var h responseHeader
	if err := dec.Decode(&h); err != nil {
		return fmt.Errorf("calling %s: reading the answer: %w", method, err)
	}
	if h.Error != "" {
		_ = dec.DecodeValue(reflect.Value{}) // the invalidRequest body, discarded
		return ServerError(h.Error)
	}
	if err := dec.Decode(reply); err != nil {
		return fmt.Errorf("calling %s: decoding the reply: %w", method, err)
	}
	return nil
}

// readConnectAnswer reads the HTTP answer to CONNECT up to its blank line. A daemon
// that refuses the caller says why in the body, which the error carries.
func readConnectAnswer(r *bufio.Reader) error {
	status, err := readLine(r)
	if err != nil {
		return fmt.Errorf("dhcp daemon handshake: %w", err)
	}
	for {
		line, err := readLine(r)
		if err != nil {
			return fmt.Errorf("dhcp daemon handshake: %w", err)
		}
		if line == "" {
			break
		}
	}
	switch status {
	case connected:
		return nil
	case forbidden:
		reason, _ := readLine(r)
		return fmt.Errorf("%w: %s", ErrRefused, reason)
	}
	return fmt.Errorf("dhcp daemon handshake: unexpected answer %q", status)
}

// maxLine bounds a handshake line; net/rpc's are a few dozen bytes.
const maxLine = 1024

func readLine(r *bufio.Reader) (string, error) {
	var b []byte
	for {
		chunk, isPrefix, err := r.ReadLine()
		if err != nil {
			return "", err
		}
		b = append(b, chunk...)
		if len(b) > maxLine {
			return "", errors.New("handshake line too long")
		}
		if !isPrefix {
			return strings.TrimRight(string(b), "\r"), nil
		}
	}
}
