package dhcp_test

import (
	"net/netip"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cnikit/cni/internal/ipam/dhcp/dhcptest"
)

func TestBridgeContainersGetDistinctLeasesWithRoutesAndDNS(t *testing.T) {
	w := newWorld(t, dhcptest.Options{})
	conf := w.conf(nil)
	a, b := w.newCtr(), w.newCtr()
	ra := w.add(a, conf)
	rb := w.add(b, conf)
	require.Len(t, ra.IPs, 1)
	require.Len(t, rb.IPs, 1)
	assert.NotEqual(t, ra.IPs[0].Address, rb.IPs[0].Address)
	subnet := netip.MustParsePrefix(dhcptest.Subnet)
	assert.True(t, subnet.Contains(ra.IPs[0].Address.Addr()))
	assert.Equal(t, 24, ra.IPs[0].Address.Bits())
	assert.Equal(t, netip.MustParseAddr(dhcptest.ServerIP), ra.IPs[0].Gateway)
	assert.Contains(t, ra.Routes, resultDefaultRoute())
	assert.Equal(t, []string{dhcptest.DNSServer}, ra.DNS.Nameservers)
	assert.Equal(t, dhcptest.Domain, ra.DNS.Domain)

	le, ok := w.lab.LeaseOf(a.clientID())
	require.True(t, ok, "dnsmasq has a lease for %s: %v", a.clientID(), w.lab.Leases())
	assert.Equal(t, ra.IPs[0].Address.Addr().String(), le.IP)
}
