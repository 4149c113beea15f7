package lease6

import (
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/insomniacslk/dhcp/dhcpv6"
	"github.com/insomniacslk/dhcp/iana"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cnikit/cni/internal/ipam/dhcp/lease"
	"github.com/cnikit/cni/internal/ipam/dhcp/leasefile"
	"github.com/cnikit/cni/internal/ipam/dhcp/linkid"
)

// reply builds a REPLY with one IA_NA (IAID, t1, t2) holding addr, through the wire and
// back as a kept lease is.
func reply(t testing.TB, iaid [4]byte, t1, t2, preferred, valid time.Duration, extra ...dhcpv6.Option) *Bound {
	t.Helper()
	return replyOf(t, iaid, t1, t2, preferred, valid, []string{"fd00::5"}, extra...)
}

// replyOf is reply with the IA_NA holding addrs, in that order.
func replyOf(t testing.TB, iaid [4]byte, t1, t2, preferred, valid time.Duration, addrs []string, extra ...dhcpv6.Option) *Bound {
	t.Helper()
	m, err := dhcpv6.NewMessage()
	require.NoError(t, err)
	m.MessageType = dhcpv6.MessageTypeReply
	m.AddOption(dhcpv6.OptServerID(&dhcpv6.DUIDLL{HWType: iana.HWTypeEthernet, LinkLayerAddr: net.HardwareAddr{2, 0, 0, 0, 0, 1}}))
	var opts dhcpv6.Options
	for _, a := range addrs {
		opts = append(opts, &dhcpv6.OptIAAddress{IPv6Addr: net.ParseIP(a), PreferredLifetime: preferred, ValidLifetime: valid})
	}
	m.AddOption(&dhcpv6.OptIANA{IaId: iaid, T1: t1, T2: t2, Options: dhcpv6.IdentityOptions{Options: opts}})
	for _, o := range extra {
		m.AddOption(o)
	}
	m, err = dhcpv6.MessageFromBytes(m.ToBytes())
	require.NoError(t, err)
	return &Bound{Reply: m, At: time.Unix(1000, 0)}
}

func TestTimesFollowTheIAOrTheRFCsDefaults(t *testing.T) {
	at := time.Unix(1000, 0)
	b := reply(t, IAID, 100*time.Second, 160*time.Second, 200*time.Second, 300*time.Second)
	tm := b.Times()
	assert.Equal(t, at.Add(100*time.Second), tm.Renew)
	assert.Equal(t, at.Add(160*time.Second), tm.Rebind)
	assert.Equal(t, at.Add(300*time.Second), tm.Expire)

	tm = reply(t, IAID, 0, 0, 200*time.Second, 300*time.Second).Times()
	assert.Equal(t, at.Add(100*time.Second), tm.Renew, "T1 0: half the preferred lifetime")
	assert.Equal(t, at.Add(160*time.Second), tm.Rebind, "T2 0: 0.8 of it")

	tm = reply(t, IAID, 500*time.Second, 400*time.Second, 200*time.Second, 300*time.Second).Times()
	assert.False(t, tm.Renew.After(tm.Rebind) || tm.Rebind.After(tm.Expire), "nonsense T1/T2 are put in order: %+v", tm)

	tm = reply(t, IAID, 0, 0, 0xffffffff*time.Second, 0xffffffff*time.Second).Times()
	assert.True(t, tm.Infinite)
}

func TestCheckRefusesWhatIsNotALease(t *testing.T) {
	_, err := reply(t, [4]byte{9, 9, 9, 9}, 0, 0, time.Hour, time.Hour).check()
	assert.ErrorContains(t, err, "no IA_NA for this client", "another IAID")
	_, err = reply(t, IAID, 0, 0, 0, 0).check()
	assert.ErrorIs(t, err, ErrRefused, "lifetimes 0: the address is withdrawn")
	_, err = reply(t, IAID, 0, 0, time.Hour, time.Hour, &dhcpv6.OptStatusCode{StatusCode: iana.StatusNoAddrsAvail}).check()
	assert.ErrorIs(t, err, ErrRefused)
	_, err = reply(t, IAID, 0, 0, time.Hour, time.Hour).check()
	assert.NoError(t, err)
}

func TestResultRefusesAnAddressNoPodMayHold(t *testing.T) {
	for addr, why := range map[string]string{
		"ff02::1": "multicast", "ff0e::1": "multicast", "::1": "loopback", "::": "unspecified", "fe80::5": "link-local",
	} {
		b := replyOf(t, IAID, 0, 0, time.Hour, time.Hour, []string{addr})
		got, err := b.Addr()
		require.NoError(t, err, "%s is still the lease, to be released", addr)
		assert.Equal(t, netip.MustParseAddr(addr), got)
		_, err = b.Result(0)
		assert.ErrorIs(t, err, lease.ErrUnusable, addr)
		assert.ErrorContains(t, err, addr+" is ", addr)
		assert.ErrorContains(t, err, why, addr)
	}
}

func TestResultTakesTheFirstUsableAddressOfTheIA(t *testing.T) {
	b := replyOf(t, IAID, 0, 0, time.Hour, time.Hour, []string{"ff02::1", "::1", "fd00::7"})
	res, err := b.Result(0)
	require.NoError(t, err)
	require.Len(t, res.IPs, 1)
	assert.Equal(t, "fd00::7/128", res.IPs[0].Address.String())
}

func TestDUIDIsStablePerAttachmentAndAUUID(t *testing.T) {
	a, b := DUID("c1/net/eth0"), DUID("c1/net/eth0")
	assert.Equal(t, a.ToBytes(), b.ToBytes())
	assert.NotEqual(t, a.ToBytes(), DUID("c1/net/eth1").ToBytes())
	raw := a.ToBytes()
	require.Len(t, raw, 18)
	assert.Equal(t, []byte{0, 4}, raw[:2], "DUID-UUID")
	assert.Equal(t, byte(0x80), raw[2+6]&0xf0, "UUID version 8")
	assert.Equal(t, byte(0x80), raw[2+8]&0xc0, "RFC 4122 variant")
}

// FuzzKeptReply: whatever REPLY a lease file or a server holds, reading it as a lease
// never panics, and a lease it gives has its moments in order.
func FuzzKeptReply(f *testing.F) {
	f.Add(reply(f, IAID, time.Minute, 2*time.Minute, 3*time.Minute, 4*time.Minute).Reply.ToBytes())
	f.Add(reply(f, IAID, 0, 0, 0xffffffff*time.Second, 0xffffffff*time.Second, dhcpv6.OptDNS(net.ParseIP("fd00::53"))).Reply.ToBytes())
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := dhcpv6.MessageFromBytes(data)
		if err != nil {
			return
		}
		b := &Bound{Reply: m, At: time.Unix(1000, 0)}
		if _, err := b.Result(0); err != nil {
			return
		}
		tm := b.Times()
		if tm.Renew.After(tm.Rebind) || tm.Rebind.After(tm.Expire) || tm.Renew.Before(b.At) {
			t.Fatalf("moments out of order: %+v", tm)
		}
	})
}

func TestAddrTextAndStampGiveTheLeaseAsTheDaemonKeepsIt(t *testing.T) {
	b := reply(t, IAID, 0, 0, time.Hour, time.Hour)
	b.Link = linkid.ID{IfIndex: 7, HWAddr: "02:00:00:00:00:07"}
	assert.Equal(t, "fd00::5", b.AddrText())
	assert.Equal(t, "?", reply(t, [4]byte{9}, 0, 0, time.Hour, time.Hour).AddrText())

	var rec leasefile.Record
	b.Stamp(&rec)
	assert.Equal(t, b.Link, rec.ID)
	assert.Equal(t, b.Reply.ToBytes(), rec.ACK)
	assert.Equal(t, b.At, rec.Bound)
}
