package lease6

import (
	"context"
	"log"
	"os"
	"testing"
	"time"

	"github.com/insomniacslk/dhcp/dhcpv6"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cnikit/cni/internal/ipam/dhcp/dhcptest"
	"github.com/cnikit/cni/internal/ipam/dhcp/linkid"
	"github.com/cnikit/cni/internal/testbed/testns"
)

// duid is a client's DUID on the wire.
func duid(clientID string) []byte { return DUID(clientID).ToBytes() }

func newClient(t *testing.T, lab *dhcptest.Lab, id string) *Client {
	t.Helper()
	n := testns.NewWithLoopback(t)
	lab.Plug(n, "eth0", "p"+id)
	var host linkid.Host
	lab.Host.Run(t, func() (err error) { host, err = linkid.Self(); return err })
	return &Client{ClientID: id + "/net/eth0", Target: linkid.Target{Netns: n.Path, IfName: "eth0", Host: host},
		Timeout: 2 * time.Second, ResendMax: 2 * time.Second, Logf: log.New(os.Stderr, "", 0).Printf}
}

func TestAcquireRenewRebindRelease(t *testing.T) {
	for name, rapid := range map[string]bool{"four messages": false, "rapid commit": true} {
		t.Run(name, func(t *testing.T) {
			lab := dhcptest.New(t, dhcptest.Options{IPv6: true})
			c := newClient(t, lab, "c6")
			c.noRapidCommit = !rapid
			ctx := context.Background()
			b, err := c.Acquire(ctx)
			require.NoError(t, err)
			addr, err := b.Addr()
			require.NoError(t, err)
			assert.Equal(t, rapid, b.Reply.GetOneOption(dhcpv6.OptionRapidCommit) != nil, "the REPLY came straight after the SOLICIT")
			// dnsmasq writes its lease file after sending the REPLY.
			le, ok := lab.WaitLease6(duid(c.ClientID), 3*time.Second, func(_ dhcptest.Lease6, ok bool) bool { return ok })
			require.True(t, ok, "dnsmasq holds a lease for the DUID: %v", lab.Leases6())
			assert.Equal(t, addr.String(), le.IP)
			assert.Equal(t, uint32(1), le.IAID)
			res, err := b.Result(0)
			require.NoError(t, err)
			assert.Equal(t, addr.String()+"/128", res.IPs[0].Address.String())
			assert.Equal(t, []string{dhcptest.DNSServer6}, res.DNS.Nameservers)
			assert.Equal(t, []string{dhcptest.Domain}, res.DNS.Search)
			tm := b.Times()
			assert.True(t, tm.Renew.Before(tm.Rebind) && tm.Rebind.Before(tm.Expire), "%+v", tm)

			time.Sleep(1100 * time.Millisecond)
			nb, err := c.Renew(ctx, b)
			require.NoError(t, err)
			renewed, _ := lab.WaitLease6(duid(c.ClientID), 3*time.Second, func(l dhcptest.Lease6, ok bool) bool { return ok && l.Expiry.After(le.Expiry) })
			assert.True(t, renewed.Expiry.After(le.Expiry), "RENEW moved the server's expiry")
			a2, _ := nb.Addr()
			assert.Equal(t, addr, a2)

			time.Sleep(1100 * time.Millisecond)
			nb, err = c.Rebind(ctx, nb)
			require.NoError(t, err)
			rebound, _ := lab.WaitLease6(duid(c.ClientID), 3*time.Second, func(l dhcptest.Lease6, ok bool) bool { return ok && l.Expiry.After(renewed.Expiry) })
			assert.True(t, rebound.Expiry.After(renewed.Expiry), "REBIND moved the server's expiry")

			require.NoError(t, c.Release(ctx, nb))
			_, ok = lab.WaitLease6(duid(c.ClientID), 5*time.Second, func(_ dhcptest.Lease6, ok bool) bool { return !ok })
			assert.False(t, ok, "the server saw the RELEASE")
		})
	}
}
