package lease

import (
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/insomniacslk/dhcp/dhcpv4"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cnikit/cni/internal/ipam/dhcp/leasefile"
	"github.com/cnikit/cni/internal/ipam/dhcp/linkid"
	"github.com/cnikit/cni/internal/result"
)

func ack(t *testing.T, mods ...dhcpv4.Modifier) *Bound {
	t.Helper()
	base := []dhcpv4.Modifier{
		dhcpv4.WithMessageType(dhcpv4.MessageTypeAck),
		dhcpv4.WithYourIP(net.IPv4(10, 0, 0, 5)),
		dhcpv4.WithOption(dhcpv4.OptServerIdentifier(net.IPv4(10, 0, 0, 1))),
		dhcpv4.WithOption(dhcpv4.OptSubnetMask(net.CIDRMask(24, 32))),
		dhcpv4.WithOption(dhcpv4.OptRouter(net.IPv4(10, 0, 0, 1))),
	}
	m, err := dhcpv4.New(append(base, mods...)...)
	require.NoError(t, err)
	// Through the wire and back, as a kept lease is.
	m, err = dhcpv4.FromBytes(m.ToBytes())
	require.NoError(t, err)
	return &Bound{ACK: m, At: time.Unix(1000, 0)}
}

func route(dst, gw string) result.Route {
	r := result.Route{Dst: netip.MustParsePrefix(dst)}
	if gw != "" {
		r.GW = netip.MustParseAddr(gw)
	}
	return r
}

func TestRouterGivesTheDefaultRouteAndStaticRoutesAreClassful(t *testing.T) {
	b := ack(t, dhcpv4.WithGeneric(dhcpv4.OptionStaticRoutingTable, []byte{172, 16, 0, 0, 10, 0, 0, 9, 192, 168, 7, 0, 10, 0, 0, 8}))
	res, err := b.Result(0)
	require.NoError(t, err)
	assert.Equal(t, []result.IPConfig{{Address: netip.MustParsePrefix("10.0.0.5/24"), Gateway: netip.MustParseAddr("10.0.0.1")}}, res.IPs)
	assert.Equal(t, []result.Route{
		route("172.16.0.0/16", "10.0.0.9"),
		route("192.168.7.0/24", "10.0.0.8"),
		route("0.0.0.0/0", "10.0.0.1"),
	}, res.Routes)
}

func TestClasslessRoutesWinOverStaticRoutesAndRouter(t *testing.T) {
	_, dst, _ := net.ParseCIDR("198.51.100.0/25")
	_, onLink, _ := net.ParseCIDR("203.0.113.0/24")
	b := ack(t,
		dhcpv4.WithGeneric(dhcpv4.OptionStaticRoutingTable, []byte{172, 16, 0, 0, 10, 0, 0, 9}),
		dhcpv4.WithOption(dhcpv4.OptClasslessStaticRoute(
			&dhcpv4.Route{Dest: dst, Router: net.IPv4(10, 0, 0, 7)},
			&dhcpv4.Route{Dest: onLink, Router: net.IPv4zero},
		)))
	res, err := b.Result(30)
	require.NoError(t, err)
	link := scopeLink
	assert.Equal(t, []result.Route{
		{Dst: netip.MustParsePrefix("198.51.100.0/25"), GW: netip.MustParseAddr("10.0.0.7"), Priority: 30},
		{Dst: netip.MustParsePrefix("203.0.113.0/24"), Scope: &link, Priority: 30},
	}, res.Routes)
	assert.Equal(t, netip.MustParseAddr("10.0.0.1"), res.IPs[0].Gateway, "the router stays the gateway")
}

func TestDNSServersDomainAndSearch(t *testing.T) {
	b := ack(t,
		dhcpv4.WithOption(dhcpv4.OptDNS(net.IPv4(10, 0, 0, 53), net.IPv4(10, 0, 0, 54))),
		dhcpv4.WithOption(dhcpv4.OptDomainName("corp.example")),
		dhcpv4.WithDomainSearchList("a.example", "b.example"))
	res, err := b.Result(0)
	require.NoError(t, err)
	assert.Equal(t, result.DNS{Nameservers: []string{"10.0.0.53", "10.0.0.54"}, Domain: "corp.example",
		Search: []string{"a.example", "b.example"}}, res.DNS)
}

func TestAnACKWithoutMaskIsRefused(t *testing.T) {
	b := ack(t, dhcpv4.WithoutOption(dhcpv4.OptionSubnetMask))
	_, err := b.Result(0)
	assert.ErrorContains(t, err, "Subnet Mask")
}

func TestTimesDefaultToHalfAndSevenEighths(t *testing.T) {
	b := ack(t, dhcpv4.WithOption(dhcpv4.OptIPAddressLeaseTime(800*time.Second)))
	tm := b.Times()
	assert.Equal(t, b.At.Add(400*time.Second), tm.Renew)
	assert.Equal(t, b.At.Add(700*time.Second), tm.Rebind)
	assert.Equal(t, b.At.Add(800*time.Second), tm.Expire)

	b = ack(t, dhcpv4.WithOption(dhcpv4.OptIPAddressLeaseTime(800*time.Second)),
		dhcpv4.WithOption(dhcpv4.OptRenewTimeValue(900*time.Second)), dhcpv4.WithOption(dhcpv4.OptRebindingTimeValue(100*time.Second)))
	tm = b.Times()
	assert.False(t, tm.Renew.After(tm.Rebind), "T1 never after T2")
	assert.Equal(t, b.At.Add(100*time.Second), tm.Rebind)

	assert.Equal(t, b.At.Add(DefaultLeaseTime), ack(t).Times().Expire, "no lease time: the reference's hour")
}

func TestResendsAddUpToTheTimeout(t *testing.T) {
	for _, c := range []struct {
		timeout time.Duration
		first   time.Duration
		tries   int
	}{{10 * time.Second, time.Second, 4}, {2 * time.Second, time.Second, 2}, {500 * time.Millisecond, 500 * time.Millisecond, 1}} {
		first, tries := Resends(c.timeout)
		assert.Equal(t, c.first, first, "%s", c.timeout)
		assert.Equal(t, c.tries, tries, "%s", c.timeout)
	}
}

func TestEveryRequestCarriesClientIDOptionsAndTheBroadcastFlag(t *testing.T) {
	c := &Client{ID: "cid/net/eth0", Broadcast: true,
		Request: []dhcpv4.OptionCode{dhcpv4.OptionRouter, dhcpv4.OptionClasslessStaticRoute},
		Provide: []dhcpv4.Option{dhcpv4.OptGeneric(dhcpv4.OptionHostName, []byte("web-0"))}}
	b := ack(t)
	renew, err := dhcpv4.NewRenewFromAck(b.ACK, c.modifiers()...)
	require.NoError(t, err)
	discover, err := dhcpv4.NewDiscovery(net.HardwareAddr{2, 0, 0, 0, 0, 1}, c.modifiers()...)
	require.NoError(t, err)
	for name, m := range map[string]*dhcpv4.DHCPv4{"renew": renew, "discover": discover} {
		assert.Equal(t, append([]byte{0}, "cid/net/eth0"...), m.GetOneOption(dhcpv4.OptionClientIdentifier), name)
		assert.Equal(t, "web-0", string(m.GetOneOption(dhcpv4.OptionHostName)), name)
		assert.Equal(t, dhcpv4.OptionCodeList{dhcpv4.OptionRouter, dhcpv4.OptionClasslessStaticRoute}, m.ParameterRequestList(), name)
		assert.True(t, m.IsBroadcast(), name)
	}
}

func TestInfiniteLeaseIsNeverRenewedNorExpires(t *testing.T) {
	b := ack(t, dhcpv4.WithOption(dhcpv4.OptIPAddressLeaseTime(0xffffffff*time.Second)))
	b.At = time.Now()
	tm := b.Times()
	assert.True(t, tm.Infinite)
	farOff := b.At.AddDate(1000, 0, 0)
	assert.True(t, tm.Renew.After(farOff), "renew at %s", tm.Renew)
	assert.True(t, tm.Rebind.After(farOff), "rebind at %s", tm.Rebind)
	assert.True(t, tm.Expire.After(farOff), "expire at %s", tm.Expire)
	assert.Positive(t, time.Until(tm.Renew), "the upkeep sleeps rather than renews")
}

func TestHugeFiniteLeaseTimesDoNotOverflow(t *testing.T) {
	const lt = 0xfffffffe * time.Second // 136 years: lt*7 overflows a Duration
	b := ack(t, dhcpv4.WithOption(dhcpv4.OptIPAddressLeaseTime(lt)))
	tm := b.Times()
	assert.False(t, tm.Infinite)
	assert.Equal(t, b.At.Add(lt/2), tm.Renew)
	assert.Equal(t, b.At.Add(lt/8*7), tm.Rebind)
	assert.Equal(t, b.At.Add(lt), tm.Expire)
	assert.True(t, tm.Renew.After(b.At) && tm.Rebind.After(tm.Renew) && tm.Expire.After(tm.Rebind))
}

func TestAddrTextAndStampGiveTheLeaseAsTheDaemonKeepsIt(t *testing.T) {
	b := ack(t)
	b.Link = linkid.ID{IfIndex: 7, HWAddr: "02:00:00:00:00:07"}
	assert.Equal(t, "10.0.0.5/24", b.AddrText())
	assert.Equal(t, "?", ack(t, dhcpv4.WithYourIP(net.IPv4zero)).AddrText())

	var rec leasefile.Record
	b.Stamp(&rec)
	assert.Equal(t, b.Link, rec.ID)
	assert.Equal(t, b.ACK.ToBytes(), rec.ACK)
	assert.Equal(t, b.At, rec.Bound)
}
