package dhcp_test

import (
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/vishvananda/netlink"

	"github.com/cnikit/cni/internal/ipam/dhcp/dhcptest"
	"github.com/cnikit/cni/internal/testbed/testns"
)

// DHCPv6 carries no routes: a pod with an IPv6 lease reaches further than its own /128
// through router advertisements (the container's accept_ra, on by default) or the
// config's ipam.routes. Both are shown by a TCP connection to the server's address.

func TestIPv6RoutesComeFromRouterAdvertisements(t *testing.T) {
	w := newWorld(t, dhcptest.Options{IPv6: true, RA: true})
	conf := w.conf(map[string]any{"ipv4": false, "ipv6": true})
	c := w.newCtr()
	res := w.add(c, conf)
	assert.Empty(t, res.Routes, "no route in the result")
	h := c.ns.Handle(t)
	require.Eventually(t, func() bool {
		routes, err := h.RouteList(nil, netlink.FAMILY_V6)
		require.NoError(t, err)
		for _, r := range routes {
			if r.Dst == nil || r.Dst.String() == "::/0" {
				return r.Protocol == netlink.RouteProtocol(9) // RTPROT_RA
			}
		}
		return false
	}, 20*time.Second, 100*time.Millisecond, "a default route from the server's router advertisement")
	assertReachesServer6(t, w, c)
}

func TestIPv6RoutesFromTheConfig(t *testing.T) {
	w := newWorld(t, dhcptest.Options{IPv6: true})
	conf := w.conf(map[string]any{"ipv4": false, "ipv6": true, "routes": []map[string]any{{"dst": dhcptest.Subnet6}}, "priority": 7})
	c := w.newCtr()
	res := w.add(c, conf)
	require.Len(t, res.Routes, 1)
	assert.Equal(t, dhcptest.Subnet6, res.Routes[0].Dst.String())
	assert.Equal(t, 7, res.Routes[0].Priority, "priority is the metric of the config's routes too")
	assertReachesServer6(t, w, c)
}

func assertReachesServer6(t *testing.T, w *world, c *ctr) {
	t.Helper()
	port := testns.ServeTCP(t, w.lab.Server, "tcp6", "["+dhcptest.ServerIP6+"]:0", "hello from the server")
	var got string
	var err error
	assert.Eventually(t, func() bool {
		got, err = testns.DialTCP(c.ns, net.JoinHostPort(dhcptest.ServerIP6, fmt.Sprint(port)), time.Second)
		return err == nil
	}, 10*time.Second, 200*time.Millisecond, "TCP to the server over IPv6: %v", err)
	assert.Equal(t, "hello from the server", got)
}
