package daemon

import (
	"errors"
	"net"
	"path/filepath"
	"testing"
	"time"

	"github.com/insomniacslk/dhcp/dhcpv6"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cnikit/cni/internal/ipam/dhcp/lease6"
	"github.com/cnikit/cni/internal/ipam/dhcp/leasefile"
	"github.com/cnikit/cni/internal/ipam/dhcp/wire"
	"github.com/cnikit/cni/internal/obs/invlog"
	"github.com/cnikit/cni/internal/obs/invlog/invlogtest"
)

// newLoggedDaemon is a test daemon that writes an invocation log, at the path returned.
func newLoggedDaemon(t *testing.T) (*Daemon, string) {
	t.Helper()
	logFile := filepath.Join(t.TempDir(), "cni.log")
	opts := Defaults()
	opts.Log = &invlog.Config{File: logFile}
	d, _ := newTestDaemonWith(t, opts)
	return d, logFile
}

func TestRenewalsAreCountedAndLogged(t *testing.T) {
	d, logFile := newLoggedDaemon(t)
	h := &held{rec: &leasefile.Record{ClientID: "c1/n/eth0", ContainerID: "c1", Network: "n", IfName: "eth0", Netns: "/run/netns/c1"}}

	d.renewed(h, "renew", time.Now(), nil)
	d.renewed(h, "rebind", time.Now(), errors.New("no answer"))
	_, err := logged(d, "DEL", d.Release)(&wire.CmdArgs{ContainerID: "c1", IfName: "eth0", StdinData: []byte(`{"name":"n","cniVersion":"1.0.0"}`)})
	require.NoError(t, err)

	c, err := d.Counters(&wire.Empty{})
	require.NoError(t, err)
	assert.Equal(t, int64(1), c.Renewals)
	assert.Equal(t, int64(1), c.RenewalFailures)
	assert.Zero(t, c.Held)
	assert.WithinDuration(t, time.Now(), c.Since, time.Minute)

	lines := invlogtest.Lines(t, logFile)
	require.Len(t, lines, 3)
	assert.Equal(t, []string{"RENEW", "REBIND", "DEL"}, []string{lines[0].Command, lines[1].Command, lines[2].Command})
	assert.Equal(t, "n", lines[0].Network)
	assert.Nil(t, lines[0].Error)
	require.NotNil(t, lines[1].Error)
	assert.Equal(t, "no answer", lines[1].Error.Msg)
	assert.Equal(t, "1.0.0", lines[2].CNIVersion)
	assert.Equal(t, "dhcp-daemon", lines[2].Plugin)
}

// bound6At is a DHCPv6 binding of addr, as a server's REPLY gives it.
func bound6At(t *testing.T, addr string) binding {
	t.Helper()
	m, err := dhcpv6.NewMessage()
	require.NoError(t, err)
	m.MessageType = dhcpv6.MessageTypeReply
	m.AddOption(&dhcpv6.OptIANA{IaId: lease6.IAID, Options: dhcpv6.IdentityOptions{Options: dhcpv6.Options{
		&dhcpv6.OptIAAddress{IPv6Addr: net.ParseIP(addr), PreferredLifetime: time.Hour, ValidLifetime: time.Hour},
	}}})
	return &lease6.Bound{Reply: m, At: time.Now()}
}

// TestDHCPv6LeaseEventsNameTheirAddressAndFamily: a dual-stack attachment's two leases
// write lines with the same keys, so each event line names the lease's address, and the
// error of a failed DHCPv6 exchange says DHCPv6; the counters count DHCPv6 events too.
func TestDHCPv6LeaseEventsNameTheirAddressAndFamily(t *testing.T) {
	d, logFile := newLoggedDaemon(t)
	rec := &leasefile.Record{Family: leasefile.DHCPv6, ClientID: "c1/n/eth0", ContainerID: "c1", Network: "n", IfName: "eth0", Netns: "/run/netns/c1"}
	h := &held{rec: rec, bound: bound6At(t, "fd00::5")}

	d.renewed(h, "renew", time.Now(), nil)
	d.renewed(h, "rebind", time.Now(), errors.New("no answer"))
	d.expired(h)

	c, err := d.Counters(&wire.Empty{})
	require.NoError(t, err)
	assert.Equal(t, [3]int64{1, 1, 1}, [3]int64{c.Renewals, c.RenewalFailures, c.Expirations})
	lines := invlogtest.Lines(t, logFile)
	require.Len(t, lines, 3)
	assert.Equal(t, []string{"RENEW", "REBIND", "EXPIRE"}, []string{lines[0].Command, lines[1].Command, lines[2].Command})
	for _, i := range []int{0, 2} {
		require.NotNil(t, lines[i].Result, lines[i].Command)
		require.Len(t, lines[i].Result.IPs, 1)
		assert.Equal(t, "fd00::5/128", lines[i].Result.IPs[0].Address)
	}
	require.NotNil(t, lines[1].Error)
	assert.Equal(t, "DHCPv6: no answer", lines[1].Error.Msg)
}
