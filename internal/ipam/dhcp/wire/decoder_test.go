package wire_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/gob"
	"io"
	"net"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cnikit/cni/internal/ipam/dhcp/wire"
)

// netrpcHeader has the field names of net/rpc's Request and Response headers.
type netrpcHeader struct {
	ServiceMethod string
	Seq           uint64
	Error         string
}

type written struct {
	n   int
	err error
}

// A call whose arguments exceed MaxMessage is answered with an error and the connection
// is closed after at most MaxMessage bytes of them: the daemon never buffers the rest.
func TestServerRefusesAnOversizedCallWithoutReadingIt(t *testing.T) {
	srv := wire.NewServer(t.Logf)
	wire.Handle(srv, "DHCP.Allocate", func(*wire.CmdArgs) (*wire.Result, error) { return &wire.Result{}, nil })
	a, b := net.Pipe()
	t.Cleanup(func() { b.Close() })
	done := make(chan struct{})
	go func() { srv.ServeConn(a); close(done) }()

	_, err := io.WriteString(b, "CONNECT /_goRPC_ HTTP/1.0\n\n")
	require.NoError(t, err)
	r := bufio.NewReader(b)
	for line := "x"; line != "\n"; {
		line, err = r.ReadString('\n')
		require.NoError(t, err)
	}

	var call bytes.Buffer
	enc := gob.NewEncoder(&call)
	require.NoError(t, enc.Encode(&netrpcHeader{ServiceMethod: "DHCP.Allocate", Seq: 1}))
	require.NoError(t, enc.Encode(&wire.CmdArgs{ContainerID: "c", StdinData: make([]byte, 4*wire.MaxMessage)}))
	sent := make(chan written, 1)
	go func() { n, err := b.Write(call.Bytes()); sent <- written{n, err} }()

	dec := gob.NewDecoder(r)
	var h netrpcHeader
	require.NoError(t, dec.Decode(&h))
	assert.Contains(t, h.Error, "larger than")
	var body struct{}
	require.NoError(t, dec.Decode(&body))
	assert.ErrorIs(t, dec.Decode(&h), io.EOF, "the connection is closed after the refusal")
	<-done

	w := <-sent
	assert.Error(t, w.err, "the server stopped reading")
	assert.Less(t, w.n, 2*wire.MaxMessage, "wrote %d of %d bytes", w.n, call.Len())
}

// An answer larger than MaxMessage fails the call instead of being buffered whole.
func TestClientRefusesAnOversizedAnswer(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "big.sock")
	l, err := net.Listen("unix", sock)
	require.NoError(t, err)
	t.Cleanup(func() { l.Close() })
	var answer bytes.Buffer
	require.NoError(t, gob.NewEncoder(&answer).Encode(&netrpcHeader{ServiceMethod: strings.Repeat("x", 4*wire.MaxMessage)}))
	sent := make(chan written, 1)
	go func() {
		conn, err := l.Accept()
		if err != nil {
			sent <- written{err: err}
			return
		}
		defer conn.Close()
		go func() { _, _ = io.Copy(io.Discard, conn) }()
		if _, err := io.WriteString(conn, "HTTP/1.0 200 Connected to Go RPC\n\n"); err != nil {
			sent <- written{err: err}
			return
		}
		n, err := conn.Write(answer.Bytes())
		sent <- written{n, err}
	}()

	err = wire.Call(context.Background(), sock, "DHCP.Allocate", &wire.CmdArgs{}, &wire.Result{})
	require.ErrorIs(t, err, wire.ErrMessageTooLarge)
	w := <-sent
	assert.Error(t, w.err, "the client closed the connection without reading the rest")
	assert.Less(t, w.n, answer.Len())
}

// TestMessageTooLargeNamesTheLimit: the error's text is a constant (so that nothing runs
// for it at start-up) and must say the limit MaxMessage really is.
func TestMessageTooLargeNamesTheLimit(t *testing.T) {
	assert.Equal(t, "message larger than "+strconv.Itoa(wire.MaxMessage)+" bytes", wire.ErrMessageTooLarge.Error())
}
