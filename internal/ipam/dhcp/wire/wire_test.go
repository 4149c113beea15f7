package wire_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/rpc"
	"os"
	"path/filepath"
	"testing"
	"time"

	cniskel "github.com/containernetworking/cni/pkg/skel"
	"github.com/containernetworking/cni/pkg/types"
	types100 "github.com/containernetworking/cni/pkg/types/100"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cnikit/cni/internal/core/cnierror"
	"github.com/cnikit/cni/internal/ipam/dhcp/dhcptest"
	"github.com/cnikit/cni/internal/ipam/dhcp/wire"
	"github.com/cnikit/cni/internal/result"
)

// refDaemon has the reference daemon's method set and signatures, over the reference
// library's own types, served by the standard net/rpc: what our client must speak to.
type refDaemon struct{ got cniskel.CmdArgs }

func (d *refDaemon) Allocate(args *cniskel.CmdArgs, res *types100.Result) error {
	d.got = *args
	scope := 253
	res.CNIVersion = "1.0.0"
	res.IPs = []*types100.IPConfig{{
		Address: net.IPNet{IP: net.IPv4(10, 1, 2, 3).To4(), Mask: net.CIDRMask(24, 32)},
		Gateway: net.IPv4(10, 1, 2, 1).To4(),
	}}
	res.Routes = []*types.Route{
		{Dst: net.IPNet{IP: net.IPv4zero.To4(), Mask: net.CIDRMask(0, 32)}, GW: net.IPv4(10, 1, 2, 1), Priority: 5},
		{Dst: net.IPNet{IP: net.IPv4(192, 0, 2, 0).To4(), Mask: net.CIDRMask(24, 32)}, Scope: &scope},
	}
	res.DNS = types.DNS{Nameservers: []string{"10.1.2.53"}, Domain: "example"}
	return nil
}

func (d *refDaemon) Release(args *cniskel.CmdArgs, _ *struct{}) error {
	d.got = *args
	return errors.New("release refused")
}

func serveRef(t *testing.T) (string, *refDaemon) {
	t.Helper()
	d := &refDaemon{}
	srv := rpc.NewServer()
	require.NoError(t, srv.RegisterName("DHCP", d))
	sock := filepath.Join(t.TempDir(), "ref.sock")
	l, err := net.Listen("unix", sock)
	require.NoError(t, err)
	go http.Serve(l, srv) //nolint:errcheck // ends when the listener closes
	t.Cleanup(func() { l.Close() })
	return sock, d
}

func TestOurClientSpeaksToTheReferenceShapedDaemon(t *testing.T) {
	sock, d := serveRef(t)
	ctx := context.Background()
	args := &wire.CmdArgs{ContainerID: "c1", Netns: "/var/run/netns/x", IfName: "eth0", Args: "K=V", Path: "/opt/cni/bin",
		StdinData: []byte(`{"name":"n"}`)}

	var reply wire.Result
	require.NoError(t, wire.Call(ctx, sock, "DHCP.Allocate", args, &reply))
	assert.Equal(t, cniskel.CmdArgs{ContainerID: "c1", Netns: "/var/run/netns/x", IfName: "eth0", Args: "K=V",
		Path: "/opt/cni/bin", StdinData: []byte(`{"name":"n"}`)}, d.got)
	res := reply.ToResult()
	require.Len(t, res.IPs, 1)
	assert.Equal(t, netip.MustParsePrefix("10.1.2.3/24"), res.IPs[0].Address)
	assert.Equal(t, netip.MustParseAddr("10.1.2.1"), res.IPs[0].Gateway)
	assert.Nil(t, res.IPs[0].Interface)
	scope := 253
	assert.Equal(t, []result.Route{
		{Dst: netip.MustParsePrefix("0.0.0.0/0"), GW: netip.MustParseAddr("10.1.2.1"), Priority: 5},
		{Dst: netip.MustParsePrefix("192.0.2.0/24"), Scope: &scope},
	}, res.Routes)
	assert.Equal(t, result.DNS{Nameservers: []string{"10.1.2.53"}, Domain: "example"}, res.DNS)

	err := wire.Call(ctx, sock, "DHCP.Release", args, &wire.Empty{})
	assert.EqualError(t, err, "release refused")

	err = wire.Call(ctx, sock, "DHCP.Check", args, &wire.Empty{})
	assert.True(t, wire.IsUnknownMethod(err), "the reference daemon has no Check: %v", err)
}

// ourDaemon serves methods with the reference's names from our server.
func serveOurs(t *testing.T) string {
	t.Helper()
	srv := wire.NewServer(t.Logf)
	wire.Handle(srv, "DHCP.Allocate", func(a *wire.CmdArgs) (*wire.Result, error) {
		if a.ContainerID == "busy" {
			return nil, cnierror.New(cnierror.CodeTryAgainLater, "no offer")
		}
		if a.ContainerID == "panic" {
			panic("boom")
		}
		return wire.FromResult(&result.Result{CNIVersion: "1.1.0",
			IPs:    []result.IPConfig{{Address: netip.MustParsePrefix("10.9.0.7/16"), Gateway: netip.MustParseAddr("10.9.0.1")}},
			Routes: []result.Route{{Dst: netip.MustParsePrefix("0.0.0.0/0"), GW: netip.MustParseAddr("10.9.0.1")}},
			DNS:    result.DNS{Nameservers: []string{"10.9.0.53"}},
		}), nil
	})
	wire.Handle(srv, "DHCP.Release", func(*wire.CmdArgs) (*wire.Empty, error) { return nil, nil })
	sock := filepath.Join(t.TempDir(), "ours.sock")
	l, err := net.Listen("unix", sock)
	require.NoError(t, err)
	done := make(chan struct{})
	go func() { srv.Serve(l); close(done) }() //nolint:errcheck
	t.Cleanup(func() { l.Close(); <-done })
	return sock
}

func TestReferenceClientSpeaksToOurServer(t *testing.T) {
	sock := serveOurs(t)
	c, err := rpc.DialHTTP("unix", sock)
	require.NoError(t, err)
	defer c.Close()

	res := &types100.Result{}
	require.NoError(t, c.Call("DHCP.Allocate", &cniskel.CmdArgs{ContainerID: "c1", IfName: "eth0"}, res))
	require.Len(t, res.IPs, 1)
	assert.Equal(t, "10.9.0.7/16", res.IPs[0].Address.String())
	assert.Equal(t, "10.9.0.1", res.IPs[0].Gateway.String())
	require.Len(t, res.Routes, 1)
	assert.Equal(t, "0.0.0.0/0", res.Routes[0].Dst.String())
	assert.Equal(t, []string{"10.9.0.53"}, res.DNS.Nameservers)

	// The same connection carries further calls, as net/rpc clients expect.
	require.NoError(t, c.Call("DHCP.Release", &cniskel.CmdArgs{ContainerID: "c1"}, &struct{}{}))

	err = c.Call("DHCP.Allocate", &cniskel.CmdArgs{ContainerID: "busy"}, &types100.Result{})
	require.Error(t, err)
	assert.Equal(t, "no offer (CNI error code 11)", err.Error())
	assert.Equal(t, cnierror.CodeTryAgainLater, cnierror.Code(wire.ServerError(err.Error()).Err()))

	err = c.Call("DHCP.Nope", &cniskel.CmdArgs{}, &struct{}{})
	assert.EqualError(t, err, "rpc: can't find method DHCP.Nope")
	err = c.Call("Other.Nope", &cniskel.CmdArgs{}, &struct{}{})
	assert.EqualError(t, err, "rpc: can't find service Other.Nope")

	err = c.Call("DHCP.Allocate", &cniskel.CmdArgs{ContainerID: "panic"}, &types100.Result{})
	assert.ErrorContains(t, err, "internal error: boom", "a panicking method is an error, not a dead daemon")
	require.NoError(t, c.Call("DHCP.Release", &cniskel.CmdArgs{}, &struct{}{}), "still serving after the panic")
}

func TestOurClientAndServerTogether(t *testing.T) {
	sock := serveOurs(t)
	var reply wire.Result
	require.NoError(t, wire.Call(context.Background(), sock, "DHCP.Allocate", &wire.CmdArgs{ContainerID: "c"}, &reply))
	assert.Equal(t, "10.9.0.7/16", reply.ToResult().IPs[0].Address.String())
	err := wire.Call(context.Background(), sock, "DHCP.Allocate", &wire.CmdArgs{ContainerID: "busy"}, &reply)
	var se wire.ServerError
	require.ErrorAs(t, err, &se)
	assert.Equal(t, cnierror.CodeTryAgainLater, cnierror.Code(se.Err()))
}

func TestSocketPathThatIsNotASocket(t *testing.T) {
	file := filepath.Join(t.TempDir(), "plain")
	require.NoError(t, os.WriteFile(file, nil, 0o600))
	err := wire.Call(context.Background(), file, "DHCP.Allocate", &wire.CmdArgs{}, &wire.Result{})
	var ue *wire.UnreachableError
	require.ErrorAs(t, err, &ue)
	assert.ErrorIs(t, err, wire.ErrNotSocket)
	assert.Contains(t, err.Error(), file)

	err = wire.Call(context.Background(), filepath.Join(t.TempDir(), "none"), "DHCP.Allocate", &wire.CmdArgs{}, &wire.Result{})
	require.ErrorAs(t, err, &ue)
	assert.Contains(t, err.Error(), "is the daemon running")
}

func TestServerRefusesWhatIsNotACONNECT(t *testing.T) {
	srv := wire.NewServer(t.Logf)
	a, b := net.Pipe()
	done := make(chan struct{})
	go func() { srv.ServeConn(a); close(done) }()
	_, err := io.WriteString(b, "GET / HTTP/1.0\r\n\r\n")
	require.NoError(t, err)
	out, _ := io.ReadAll(b)
	assert.Contains(t, string(out), "405")
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("the server kept the connection")
	}
}

// A caller Admit refuses gets the reason in a 403 answer to its CONNECT, which the
// client reports as ErrRefused, and the server reads no call from it.
func TestAdmitRefusesACallerOfAnotherUser(t *testing.T) {
	sock := filepath.Join(dhcptest.OpenTempDir(t), "d.sock")
	l, err := net.Listen("unix", sock)
	require.NoError(t, err)
	require.NoError(t, os.Chmod(sock, 0o666)) // only the peer check stands in the way
	called := false
	srv := wire.NewServer(t.Logf)
	srv.Admit = wire.OwnerOrRoot(0)
	wire.Handle(srv, "DHCP.Status", func(*wire.CmdArgs) (*wire.Empty, error) { called = true; return &wire.Empty{}, nil })
	served := make(chan struct{})
	go func() { _ = srv.Serve(l); close(served) }()
	t.Cleanup(func() { l.Close(); <-served })

	var refused error
	dhcptest.AsUser(t, dhcptest.Nobody, func() {
		refused = wire.Call(context.Background(), sock, "DHCP.Status", &wire.CmdArgs{}, &wire.Empty{})
	})
	require.ErrorIs(t, refused, wire.ErrRefused)
	assert.ErrorContains(t, refused, fmt.Sprintf("uid %d may not use the dhcp daemon", dhcptest.Nobody))
	assert.False(t, called)

	require.NoError(t, wire.Call(context.Background(), sock, "DHCP.Status", &wire.CmdArgs{}, &wire.Empty{}), "root is served")
	assert.True(t, called)
}
