package dhcp_test

import (
	"net/netip"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cnikit/cni/internal/core/cnierror"
	"github.com/cnikit/cni/internal/ipam/dhcp/dhcptest"
	"github.com/cnikit/cni/internal/ipam/dhcp/lease6"
	"github.com/cnikit/cni/internal/result"
	pt "github.com/cnikit/cni/internal/testbed/plugintest"
)

func (c *ctr) duid() []byte { return lease6.DUID(c.clientID()).ToBytes() }

// families splits a result's addresses by family.
func families(t *testing.T, res *result.Result) (v4, v6 netip.Prefix) {
	t.Helper()
	for _, ip := range res.IPs {
		if ip.Address.Addr().Is4() {
			v4 = ip.Address
		} else {
			v6 = ip.Address
		}
	}
	return v4, v6
}

func TestDualStackAddGetsBothCheckChecksBothDelReleasesBoth(t *testing.T) {
	w := newWorld(t, dhcptest.Options{IPv6: true})
	conf := w.conf(map[string]any{"ipv6": true})
	c := w.newCtr()
	res := w.add(c, conf)
	v4, v6 := families(t, res)
	require.True(t, v4.IsValid() && v6.IsValid(), "both families: %v", res.IPs)
	assert.Equal(t, 128, v6.Bits(), "DHCPv6 gives an address, not a prefix")
	assert.True(t, netip.MustParsePrefix(dhcptest.Subnet6).Contains(v6.Addr()))
	le4, ok := w.lab.LeaseOf(c.clientID())
	require.True(t, ok)
	assert.Equal(t, v4.Addr().String(), le4.IP)
	le6, ok := w.lab.Lease6Of(c.duid())
	require.True(t, ok, "dnsmasq holds a DHCPv6 lease for the attachment's DUID: %v", w.lab.Leases6())
	assert.Equal(t, v6.Addr().String(), le6.IP)
	assert.ElementsMatch(t, []string{v4.String(), v6.String()}, pt.AddrsIn(t, c.ns, "eth0"), "the bridge plugin put both on eth0")
	assert.Equal(t, []string{dhcptest.DNSServer, dhcptest.DNSServer6}, res.DNS.Nameservers)
	assert.Equal(t, dhcptest.Domain, res.DNS.Domain)
	assert.Len(t, w.heldFiles(), 2, "one lease file per family")

	_, err := w.bridgeCmd("CHECK", c, pt.WithPrev(t, conf, res), "")
	require.NoError(t, err)
	_, err = w.bridgeCmd("DEL", c, conf, "")
	require.NoError(t, err)
	assert.True(t, w.lab.Released(c.clientID()), "DHCPv4 lease released")
	assert.True(t, w.lab.Released6(c.duid()), "DHCPv6 lease released (the server saw the RELEASE)")
	assert.Empty(t, w.heldFiles())
}

func TestIPv6AloneGetsNoIPv4Lease(t *testing.T) {
	w := newWorld(t, dhcptest.Options{IPv6: true})
	conf := w.conf(map[string]any{"ipv4": false, "ipv6": true})
	c := w.newCtr()
	res := w.add(c, conf)
	v4, v6 := families(t, res)
	assert.False(t, v4.IsValid())
	assert.True(t, v6.IsValid())
	_, ok := w.lab.LeaseOf(c.clientID())
	assert.False(t, ok, "no DHCPv4 was asked for")
	assert.Empty(t, res.Routes, "DHCPv6 carries no routes")
	_, err := w.bridgeCmd("CHECK", c, pt.WithPrev(t, conf, res), "")
	require.NoError(t, err, "CHECK wants only the family the config asks for")
	_, err = w.bridgeCmd("DEL", c, conf, "")
	require.NoError(t, err)
}

// TestAFailingFamilyFailsTheAddAndReleasesTheOther: a server that serves DHCPv4 but not
// DHCPv6 makes a dual-stack ADD fail with "try again later"; the DHCPv4 lease it got is
// released and nothing is kept or left in the container.
func TestAFailingFamilyFailsTheAddAndReleasesTheOther(t *testing.T) {
	w := newWorld(t, dhcptest.Options{}, "-resendtimeout", "4s")
	conf := w.conf(map[string]any{"ipv6": true})
	c := w.newCtr()
	_, err := w.bridgeCmd("ADD", c, conf, "")
	require.Error(t, err)
	assert.Equal(t, cnierror.CodeTryAgainLater, cnierror.Code(err), "%v", err)
	assert.ErrorContains(t, err, "DHCPv6")
	assert.True(t, w.lab.Released(c.clientID()), "the DHCPv4 lease of the failed ADD was released")
	assert.Empty(t, w.heldFiles())
	links, err := c.ns.Handle(t).LinkList()
	require.NoError(t, err)
	for _, l := range links {
		assert.Equal(t, "lo", l.Attrs().Name, "the failed ADD left nothing in the container")
	}
}

func TestDualStackLeasesSurviveADaemonRestart(t *testing.T) { restartKeepsLeases(t, true) }

func TestGCReleasesBothFamiliesOfAttachmentsNotValid(t *testing.T) {
	w := newWorld(t, dhcptest.Options{IPv6: true})
	conf := w.conf(map[string]any{"ipv6": true})
	keep, drop := w.newCtr(), w.newCtr()
	w.add(keep, conf)
	w.add(drop, conf)
	require.NoError(t, w.ipamCmd("GC", nil, withValid(t, conf, keep.id)))
	assert.True(t, w.lab.Released6(drop.duid()), "GC released the DHCPv6 lease of the attachment that is not valid")
	assert.True(t, w.lab.Released(drop.clientID()), "and its DHCPv4 lease")
	_, ok := w.lab.Lease6Of(keep.duid())
	assert.True(t, ok)
	assert.Len(t, w.heldFiles(), 2)
}

// TestStatusSaysWhichFamilysServerWentAway: the daemon knows a network's servers only
// from its leases' exchanges; when those go unanswered (the server is gone, here seen
// at once by the confirmations a restart sends) STATUS is code 50 naming each family,
// while the leases, whose times are known, are still held. Once a server answers
// again, STATUS is fine.
func TestStatusSaysWhichFamilysServerWentAway(t *testing.T) {
	w := newWorld(t, dhcptest.Options{IPv6: true})
	conf := w.conf(map[string]any{"ipv6": true})
	c := w.newCtr()
	res := w.add(c, conf)
	require.NoError(t, w.ipamCmd("STATUS", nil, conf))

	w.lab.StopServer()
	w.daemon.Kill()
	w.daemon.Start()
	var err error
	require.Eventually(t, func() bool {
		err = w.ipamCmd("STATUS", nil, conf)
		return err != nil && assert.ObjectsAreEqual(cnierror.CodeNotAvailable, cnierror.Code(err)) &&
			containsAll(err.Error(), "DHCPv4", "DHCPv6")
	}, 20*time.Second, 200*time.Millisecond, "STATUS: %v", err)
	_, err = w.bridgeCmd("CHECK", c, pt.WithPrev(t, conf, res), "")
	assert.NoError(t, err, "the leases are still held")

	w.lab.RestartServer(dhcptest.Options{IPv6: true})
	w.daemon.Kill()
	w.daemon.Start()
	assert.Eventually(t, func() bool { return w.ipamCmd("STATUS", nil, conf) == nil }, 20*time.Second, 200*time.Millisecond)
	_, err = w.bridgeCmd("DEL", c, conf, "")
	assert.NoError(t, err)
}

// TestDHCPv6RenewsWithItsServerAndRebindsWithAnyAfterT2 runs a DHCPv6 lease through
// its short times (dnsmasq's shortest lease, 2 minutes: T1 at 1 minute, T2 at 1:45).
// The server that gave it is replaced at once by another (a new DUID, no leases): the
// RENEWs at T1 name the old server, which the new one ignores, and the lease reaches the
// new server only with the REBIND after T2, which names none. The address stays on the
// pod throughout, and the rebound lease is released by DEL. (About two minutes: DHCPv6
// times cannot be shortened as option 58/59 shorten DHCPv4's.)
func TestDHCPv6RenewsWithItsServerAndRebindsWithAnyAfterT2(t *testing.T) {
	t.Parallel()
	w := newWorld(t, dhcptest.Options{IPv6: true, LeaseTime: 2 * time.Minute})
	conf := w.conf(map[string]any{"ipv4": false, "ipv6": true})
	c := w.newCtr()
	res := w.add(c, conf)
	added := time.Now()
	_, v6 := families(t, res)
	w.lab.RestartServer(dhcptest.Options{IPv6: true, LeaseTime: 2 * time.Minute})

	le, ok := w.lab.WaitLease6(c.duid(), 100*time.Second, func(_ dhcptest.Lease6, ok bool) bool { return ok })
	require.False(t, ok, "no answer to the RENEWs between T1 and T2: they name the server that is gone (%v)", le)
	le, ok = w.lab.WaitLease6(c.duid(), 30*time.Second, func(_ dhcptest.Lease6, ok bool) bool { return ok })
	require.True(t, ok, "the REBIND after T2 reached the new server")
	assert.GreaterOrEqual(t, time.Since(added), 105*time.Second-2*time.Second, "not before T2")
	assert.Equal(t, v6.Addr().String(), le.IP, "the same address")
	assert.Contains(t, pt.AddrsIn(t, c.ns, "eth0"), v6.String())

	_, err := w.bridgeCmd("DEL", c, conf, "")
	require.NoError(t, err)
	assert.True(t, w.lab.Released6(c.duid()), "the new server saw the RELEASE")
}

// TestDelOfADualStackPodWhoseNetnsIsGone: DEL succeeds and forgets both leases; the
// DHCPv4 one is released from the host, while the DHCPv6 one cannot be (its messages
// need the pod's interface and link-local address): the server keeps it until its
// valid lifetime ends, which the daemon logs.
func TestDelOfADualStackPodWhoseNetnsIsGone(t *testing.T) {
	w := newWorld(t, dhcptest.Options{IPv6: true})
	conf := w.conf(map[string]any{"ipv6": true})
	c := w.newCtr()
	w.add(c, conf)
	c.ns.Close()

	_, err := w.bridgeCmd("DEL", c, conf, "")
	require.NoError(t, err)
	assert.True(t, w.lab.Released(c.clientID()), "the DHCPv4 lease was released from the host")
	_, ok := w.lab.Lease6Of(c.duid())
	assert.True(t, ok, "the DHCPv6 lease runs out at the server")
	assert.Empty(t, w.heldFiles(), "both are forgotten")
}
