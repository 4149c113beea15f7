package wire_test

import (
	"bytes"
	"encoding/gob"
	"io"
	"net"
	"testing"
	"time"

	"github.com/cnikit/cni/internal/ipam/dhcp/wire"
)

// FuzzServeConn feeds the daemon's socket arbitrary bytes after (or instead of) the
// handshake: the server must neither panic nor hang, whatever a client sends.
func FuzzServeConn(f *testing.F) {
	var call bytes.Buffer
	call.WriteString("CONNECT /_goRPC_ HTTP/1.0\n\n")
	enc := gob.NewEncoder(&call)
	_ = enc.Encode(&struct {
		ServiceMethod string
		Seq           uint64
	}{"DHCP.Allocate", 1})
	_ = enc.Encode(&wire.CmdArgs{ContainerID: "c", IfName: "eth0", StdinData: []byte(`{"name":"n"}`)})
	f.Add(call.Bytes())
	f.Add([]byte("CONNECT /_goRPC_ HTTP/1.0\n\n"))
	f.Add([]byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n"))
	f.Add(append([]byte("CONNECT /_goRPC_ HTTP/1.0\n\n"), 0xff, 0xff, 0xff, 0xff, 0x7f))
	f.Fuzz(func(t *testing.T, in []byte) {
		srv := wire.NewServer(func(string, ...any) {})
		wire.Handle(srv, "DHCP.Allocate", func(a *wire.CmdArgs) (*wire.Result, error) { return &wire.Result{CNIVersion: a.ContainerID}, nil })
		a, b := net.Pipe()
		done := make(chan struct{})
		go func() { srv.ServeConn(a); close(done) }()
		go func() { _, _ = io.Copy(io.Discard, b) }()
		_, _ = b.Write(in)
		b.Close()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Fatal("ServeConn did not return after the client closed")
		}
	})
}
