package lease

import (
	"net"
	"net/netip"
	"testing"

	"github.com/insomniacslk/dhcp/dhcpv4"
	"github.com/stretchr/testify/assert"
)

func TestUsableRefusesEveryClassNoPodMayHold(t *testing.T) {
	refused := map[string]string{
		"::":              "unspecified",
		"::1":             "loopback",
		"ff02::1":         "multicast",
		"ff05::1:3":       "multicast",
		"fe80::1":         "link-local",
		"::ffff:10.0.0.5": "IPv4-mapped",
		"0.0.0.0":         "unspecified",
		"0.1.2.3":         "this network",
		"127.0.0.1":       "loopback",
		"127.8.9.10":      "loopback",
		"224.0.0.1":       "multicast",
		"239.1.1.1":       "multicast",
		"255.255.255.255": "limited broadcast",
		"240.0.0.1":       "reserved",
		"169.254.1.1":     "link-local",
	}
	for addr, why := range refused {
		err := Usable(netip.MustParseAddr(addr))
		assert.ErrorIs(t, err, ErrUnusable, addr)
		assert.ErrorContains(t, err, addr+" is ", addr)
		assert.ErrorContains(t, err, why, addr)
	}
	for _, addr := range []string{"10.0.0.5", "192.168.1.1", "100.64.0.1", "8.8.8.8", "fd00::5", "2001:db8::1", "fd99::100"} {
		assert.NoError(t, Usable(netip.MustParseAddr(addr)), addr)
	}
}

func TestResultRefusesAnAddressNoPodMayHold(t *testing.T) {
	cases := []struct {
		ip   string
		mask int
		why  string
	}{
		{"127.0.0.1", 8, "loopback"},
		{"224.0.0.1", 24, "multicast"},
		{"255.255.255.255", 24, "limited broadcast"},
		{"0.0.0.5", 24, "this network"},
		{"10.0.0.255", 24, "the broadcast address of 10.0.0.0/24"},
		{"10.0.0.0", 24, "the network address of 10.0.0.0/24"},
		{"169.254.3.4", 16, "link-local"},
	}
	for _, tc := range cases {
		b := ack(t, dhcpv4.WithYourIP(net.ParseIP(tc.ip)), dhcpv4.WithOption(dhcpv4.OptSubnetMask(net.CIDRMask(tc.mask, 32))))
		_, err := b.Result(0)
		assert.ErrorIs(t, err, ErrUnusable, tc.ip)
		assert.ErrorContains(t, err, tc.why, tc.ip)
	}
	for _, ok := range []struct {
		ip   string
		mask int
	}{{"10.0.0.5", 24}, {"10.0.0.0", 31}, {"10.0.0.1", 31}, {"10.0.0.7", 32}, {"10.0.1.0", 23}} {
		b := ack(t, dhcpv4.WithYourIP(net.ParseIP(ok.ip)), dhcpv4.WithOption(dhcpv4.OptSubnetMask(net.CIDRMask(ok.mask, 32))))
		_, err := b.Result(0)
		assert.NoError(t, err, "%s/%d", ok.ip, ok.mask)
	}
}
