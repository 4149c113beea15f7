package bandwidth

import (
	"errors"
	"io"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cnikit/cni/internal/host/sysctl"
	"github.com/cnikit/cni/internal/testbed/testns"
)

// peer is a second test namespace routed to the container through the host, standing
// in for "the rest of the network".
func peer(t *testing.T, host *testns.NS) (*testns.NS, netip.Addr) {
	t.Helper()
	p := testns.NewWithLoopback(t)
	hostAddr, peerAddr := netip.MustParsePrefix("10.78.0.1/24"), netip.MustParsePrefix("10.78.0.2/24")
	route(t, host, veth(t, host, p), hostAddr, p, peerAddr)
	host.Run(t, func() error { return sysctl.EnableForwarding(true, false) })
	return p, peerAddr.Addr()
}

// measure sends n bytes over TCP from a socket in src to a listener in dst and returns
// the rate the receiver saw in bit/s, timed from the first byte received to the last,
// so connection set-up does not count.
func measure(t *testing.T, src, dst *testns.NS, dstAddr netip.Addr, n int) float64 {
	t.Helper()
	var ln net.Listener
	dst.Run(t, func() (err error) {
		ln, err = net.Listen("tcp", netip.AddrPortFrom(dstAddr, 0).String())
		return err
	})
	defer ln.Close()

	type received struct {
		bytes   int64
		elapsed time.Duration
		err     error
	}
	done := make(chan received, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			done <- received{err: err}
			return
		}
		defer c.Close()
		first := make([]byte, 1)
		if _, err := io.ReadFull(c, first); err != nil {
			done <- received{err: err}
			return
		}
		start := time.Now()
		got, err := io.Copy(io.Discard, c)
		done <- received{bytes: got, elapsed: time.Since(start), err: err}
	}()

	var conn net.Conn
	src.Run(t, func() (err error) {
		conn, err = net.DialTimeout("tcp", ln.Addr().String(), 5*time.Second)
		return err
	})
	buf := make([]byte, 32<<10)
	for sent := 0; sent < n; sent += len(buf) { // n is a multiple of len(buf)
		if _, err := conn.Write(buf); err != nil {
			require.NoError(t, errors.Join(err, conn.Close()))
		}
	}
	require.NoError(t, conn.Close())
	r := <-done
	require.NoError(t, r.err)
	require.Equal(t, int64(n-1), r.bytes, "everything arrived after the first byte")
	return float64(r.bytes) * 8 / r.elapsed.Seconds()
}

// TestTrafficHonoursTheLimitInBothDirections moves a few megabytes each way between the
// container and a peer namespace routed through the host and checks that the rate the
// receiver sees is the configured limit within ±25 %. It checks the kernel's shaping,
// which the plugin set up, not the speed of our code.
func TestTrafficHonoursTheLimitInBothDirections(t *testing.T) {
	testns.RequireRoot(t)
	if testing.Short() {
		t.Skip("moves ~5 MB through shaped links (about 5 s)")
	}
	t.Parallel()
	host, a := newAttached(t, "ctr-speed")
	a.address(t, host)
	p, peerAddr := peer(t, host)

	const ingress, egress = 12_000_000, 8_000_000 // bit/s
	limits := `"ingressRate":12000000,"ingressBurst":400000,"egressRate":8000000,"egressBurst":400000`
	_, err := a.call(t, host, "ADD", limits)
	require.NoError(t, err)

	in := measure(t, p, a.cont, a.contAddr.Addr(), 3<<20)
	out := measure(t, a.cont, p, peerAddr, 5<<19)
	t.Logf("into the container %.2f Mbit/s (limit %d), out of it %.2f Mbit/s (limit %d)",
		in/1e6, ingress/1_000_000, out/1e6, egress/1_000_000)
	assert.InEpsilon(t, float64(ingress), in, 0.25, "ingress rate")
	assert.InEpsilon(t, float64(egress), out, 0.25, "egress rate")
}
