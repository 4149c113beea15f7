package dhcp_test

import (
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/insomniacslk/dhcp/dhcpv4"
	"github.com/insomniacslk/dhcp/dhcpv4/server4"
	"github.com/insomniacslk/dhcp/dhcpv6"
	"github.com/insomniacslk/dhcp/dhcpv6/server6"
	"github.com/insomniacslk/dhcp/iana"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cnikit/cni/internal/core/cnierror"
	"github.com/cnikit/cni/internal/ipam/dhcp/dhcptest"
	"github.com/cnikit/cni/internal/ipam/dhcp/lease6"
	pt "github.com/cnikit/cni/internal/testbed/plugintest"
)

// standIn is a DHCP server in the lab's server namespace, in place of dnsmasq, that
// leases one fixed address to every client, whatever it is; it counts the RELEASEs.
type standIn struct {
	released atomic.Int32
}

var standInHW = net.HardwareAddr{2, 0, 0, 0, 0, 0x99}

// serveDHCPv6 answers every SOLICIT (rapid commit) and REQUEST with a REPLY that leases
// addr, and every RELEASE with Success.
func serveDHCPv6(t *testing.T, lab *dhcptest.Lab, addr string) *standIn {
	s := &standIn{}
	serverID := &dhcpv6.DUIDLL{HWType: iana.HWTypeEthernet, LinkLayerAddr: standInHW}
	handler := func(conn net.PacketConn, peer net.Addr, m dhcpv6.DHCPv6) {
		msg, err := m.GetInnerMessage()
		if err != nil {
			return
		}
		mods := []dhcpv6.Modifier{dhcpv6.WithServerID(serverID)}
		if msg.MessageType == dhcpv6.MessageTypeRelease {
			s.released.Add(1)
			mods = append(mods, dhcpv6.WithOption(&dhcpv6.OptStatusCode{StatusCode: iana.StatusSuccess}))
		} else {
			mods = append(mods, dhcpv6.WithIAID(lease6.IAID), dhcpv6.WithIANA(dhcpv6.OptIAAddress{
				IPv6Addr: net.ParseIP(addr), PreferredLifetime: time.Hour, ValidLifetime: time.Hour}))
		}
		reply, err := dhcpv6.NewReplyFromMessage(msg, mods...)
		if err == nil {
			_, _ = conn.WriteTo(reply.ToBytes(), peer)
		}
	}
	var srv *server6.Server
	lab.Server.Run(t, func() error {
		var err error
		srv, err = server6.NewServer("srv0", nil, handler)
		return err
	})
	go func() { _ = srv.Serve() }()
	t.Cleanup(func() { srv.Close() })
	return s
}

// serveDHCPv4 answers every DISCOVER with an OFFER and every REQUEST with an ACK of
// addr in a /24. dnsmasq is stopped first: it holds port 67.
func serveDHCPv4(t *testing.T, lab *dhcptest.Lab, addr string) *standIn {
	lab.StopServer()
	s := &standIn{}
	handler := func(conn net.PacketConn, peer net.Addr, m *dhcpv4.DHCPv4) {
		var typ dhcpv4.MessageType
		switch m.MessageType() {
		case dhcpv4.MessageTypeDiscover:
			typ = dhcpv4.MessageTypeOffer
		case dhcpv4.MessageTypeRequest:
			typ = dhcpv4.MessageTypeAck
		default:
			return
		}
		reply, err := dhcpv4.NewReplyFromRequest(m,
			dhcpv4.WithMessageType(typ),
			dhcpv4.WithYourIP(net.ParseIP(addr)),
			dhcpv4.WithServerIP(net.ParseIP(dhcptest.ServerIP)),
			dhcpv4.WithOption(dhcpv4.OptServerIdentifier(net.ParseIP(dhcptest.ServerIP))),
			dhcpv4.WithOption(dhcpv4.OptSubnetMask(net.CIDRMask(24, 32))),
			dhcpv4.WithOption(dhcpv4.OptIPAddressLeaseTime(time.Hour)),
		)
		if err != nil {
			return
		}
		// Broadcast: the client has no address to be answered at.
		_, _ = conn.WriteTo(reply.ToBytes(), &net.UDPAddr{IP: net.IPv4bcast, Port: dhcpv4.ClientPort})
	}
	var srv *server4.Server
	lab.Server.Run(t, func() error {
		var err error
		srv, err = server4.NewServer("srv0", &net.UDPAddr{IP: net.IPv4zero, Port: dhcpv4.ServerPort}, handler)
		return err
	})
	go func() { _ = srv.Serve() }()
	t.Cleanup(func() { srv.Close() })
	return s
}

// A server that leases an address no pod may hold (a multicast group, loopback, a
// broadcast address) does not get it onto a pod: the ADD fails with code 11 naming the
// address and why, a DHCPv6 lease is given back, and nothing is left in the container
// or in the daemon's state.
func TestAnAddressNoPodMayHoldIsRefusedAndGivenBack(t *testing.T) {
	cases := []struct {
		family, addr, why string
	}{
		{"v6", "ff02::1", "multicast"},
		{"v6", "::1", "loopback"},
		{"v6", "fe80::99", "link-local"},
		{"v4", "127.0.0.1", "loopback"},
		{"v4", "10.99.0.255", "the broadcast address of 10.99.0.0/24"},
	}
	for _, tc := range cases {
		t.Run(tc.family+" "+tc.addr, func(t *testing.T) {
			w := newWorld(t, dhcptest.Options{})
			var server *standIn
			keys := map[string]any{"ipv4": false, "ipv6": true}
			if tc.family == "v4" {
				server, keys = serveDHCPv4(t, w.lab, tc.addr), nil
			} else {
				server = serveDHCPv6(t, w.lab, tc.addr)
			}
			conf := w.conf(keys)
			c := w.newCtr()

			_, err := w.bridgeCmd("ADD", c, conf, "")

			require.Error(t, err)
			assert.Equal(t, cnierror.CodeTryAgainLater, cnierror.Code(err), "%v", err)
			assert.ErrorContains(t, err, "refused")
			assert.ErrorContains(t, err, tc.addr+" is ")
			assert.ErrorContains(t, err, tc.why)
			if tc.family == "v6" {
				// DHCPv4's RELEASE goes from the leased address, which the pod never
				// got: that lease runs out at the server.
				assert.Eventually(t, func() bool { return server.released.Load() > 0 }, 10*time.Second, 20*time.Millisecond,
					"the refused lease is given back to the server")
			}
			assert.Empty(t, w.heldFiles(), "no lease kept")
			assert.Nil(t, pt.LinkIn(t, c.ns, "eth0"), "the failed ADD left no interface")
			_, err = w.bridgeCmd("DEL", c, conf, "")
			assert.NoError(t, err)
		})
	}
}
