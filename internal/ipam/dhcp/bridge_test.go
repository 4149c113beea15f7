package dhcp_test

import (
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/vishvananda/netlink"

	"github.com/cnikit/cni/internal/core/cnierror"
	"github.com/cnikit/cni/internal/result"
	pt "github.com/cnikit/cni/internal/testbed/plugintest"

	"github.com/cnikit/cni/internal/ipam/dhcp/dhcptest"
	"github.com/cnikit/cni/internal/ipam/dhcp/leasefile"
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

func TestLeaseIsRenewedAtT1(t *testing.T) {
	w := newWorld(t, dhcptest.Options{LeaseTime: 2 * time.Minute, RebindAfter: 3 * time.Second})
	c := w.newCtr()
	w.add(c, w.conf(nil))
	first, ok := w.lab.LeaseOf(c.clientID())
	require.True(t, ok)
	renewed, _ := w.lab.WaitLease(c.clientID(), 20*time.Second, func(le dhcptest.Lease, ok bool) bool {
		return ok && le.Expiry.Sub(first.Expiry) >= 2*time.Second
	})
	assert.GreaterOrEqual(t, renewed.Expiry.Sub(first.Expiry), 2*time.Second,
		"the server's expiry moved on: %v then %v", first.Expiry, renewed.Expiry)
	assert.Equal(t, first.IP, renewed.IP)
}

// restartKeepsLeases adds an attachment (dual stack when ipv6), kills and restarts the
// daemon, and checks what the restart must keep: the lease files, each family's lease
// confirmed at the server (a later expiry, the same address, still on eth0), CHECK
// passing, and DEL releasing every lease, also when run twice.
func restartKeepsLeases(t *testing.T, ipv6 bool) {
	t.Helper()
	w := newWorld(t, dhcptest.Options{IPv6: ipv6})
	var ipamKeys map[string]any
	files := 1 // one lease file per family
	if ipv6 {
		ipamKeys, files = map[string]any{"ipv6": true}, 2
	}
	conf := w.conf(ipamKeys)
	c := w.newCtr()
	res := w.add(c, conf)
	v4, v6 := families(t, res)
	require.Len(t, w.heldFiles(), files)
	before4, ok := w.lab.LeaseOf(c.clientID())
	require.True(t, ok)
	assert.Equal(t, v4.Addr().String(), before4.IP)
	var before6 dhcptest.Lease6
	if ipv6 {
		before6, ok = w.lab.Lease6Of(c.duid())
		require.True(t, ok)
		assert.Equal(t, v6.Addr().String(), before6.IP)
	}

	w.restartDaemon()
	after4 := w.lab.Extended(c.clientID(), before4.Expiry)
	assert.True(t, after4.Expiry.After(before4.Expiry), "INIT-REBOOT confirmed the DHCPv4 lease")
	assert.Equal(t, before4.IP, after4.IP)
	if ipv6 {
		after6 := w.lab.Extended6(c.duid(), before6.Expiry)
		assert.True(t, after6.Expiry.After(before6.Expiry), "REBIND confirmed the DHCPv6 lease")
		assert.Equal(t, before6.IP, after6.IP)
	}
	assert.Len(t, w.heldFiles(), files, "the restarted daemon holds the same leases")
	var onPod []string
	for _, ip := range res.IPs {
		onPod = append(onPod, ip.Address.String())
	}
	assert.ElementsMatch(t, onPod, pt.AddrsIn(t, c.ns, "eth0"), "the addresses stay on eth0 across the restart")

	_, err := w.bridgeCmd("CHECK", c, pt.WithPrev(t, conf, res), "")
	require.NoError(t, err, "CHECK after a daemon restart")
	_, err = w.bridgeCmd("DEL", c, conf, "")
	require.NoError(t, err)
	assert.True(t, w.lab.Released(c.clientID()), "DEL after a restart released the DHCPv4 lease at the server")
	if ipv6 {
		assert.True(t, w.lab.Released6(c.duid()), "DEL after a restart released the DHCPv6 lease")
	}
	assert.Empty(t, w.heldFiles())
	_, err = w.bridgeCmd("DEL", c, conf, "")
	assert.NoError(t, err, "DEL twice")
}

func TestDaemonRestartKeepsLeasesCheckPassesDelReleases(t *testing.T) { restartKeepsLeases(t, false) }

func TestDelAfterNetnsIsGoneReleasesFromTheHost(t *testing.T) {
	w := newWorld(t, dhcptest.Options{})
	conf := w.conf(nil)
	c := w.newCtr()
	w.add(c, conf)
	_, ok := w.lab.LeaseOf(c.clientID())
	require.True(t, ok)
	c.ns.Close()

	_, err := w.bridgeCmd("DEL", c, conf, "")
	require.NoError(t, err)
	assert.True(t, w.lab.Released(c.clientID()), "the server got the release sent from the host")
	assert.Empty(t, w.heldFiles())
}

func TestLeaseOfAVanishedNetnsIsReleasedNotRenewed(t *testing.T) {
	w := newWorld(t, dhcptest.Options{LeaseTime: 2 * time.Minute, RebindAfter: 3 * time.Second})
	c := w.newCtr()
	w.add(c, w.conf(nil))
	c.ns.Close() // no DEL: the runtime lost it

	_, ok := w.lab.WaitLease(c.clientID(), 20*time.Second, func(_ dhcptest.Lease, ok bool) bool { return !ok })
	assert.False(t, ok, "the daemon released the lease when it found the namespace gone")
	assert.Eventually(t, func() bool { return len(w.heldFiles()) == 0 }, 5*time.Second, 50*time.Millisecond)
}

func TestGCReleasesLeasesOfAttachmentsNotValid(t *testing.T) {
	w := newWorld(t, dhcptest.Options{})
	conf := w.conf(nil)
	keep, drop := w.newCtr(), w.newCtr()
	w.add(keep, conf)
	w.add(drop, conf)

	require.NoError(t, w.ipamCmd("GC", nil, withValid(t, conf, keep.id)))

	assert.True(t, w.lab.Released(drop.clientID()), "GC released the lease of the attachment that is not valid")
	_, ok := w.lab.LeaseOf(keep.clientID())
	assert.True(t, ok, "GC kept the valid attachment's lease")
	assert.Len(t, w.heldFiles(), 1)
	assert.Equal(t, []string{leasefile.FileName(keep.clientID())}, w.heldFiles(), "the file kept is the valid attachment's")
	assert.NoError(t, w.ipamCmd("CHECK", keep, conf), "the valid attachment still checks")
	assert.Error(t, w.ipamCmd("CHECK", drop, conf), "the released one does not")
}

func TestServerThatNeverAnswersIsTryAgainLaterAndLeavesNothing(t *testing.T) {
	w := newWorld(t, dhcptest.Options{}, "-resendtimeout", "3s")
	w.lab.StopServer()
	c := w.newCtr()
	_, err := w.bridgeCmd("ADD", c, w.conf(nil), "")
	require.Error(t, err)
	assert.Equal(t, cnierror.CodeTryAgainLater, cnierror.Code(err), "%v", err)
	assert.Empty(t, w.heldFiles())
	assert.Error(t, w.ipamCmd("CHECK", c, w.conf(nil)), "the daemon holds nothing for the attachment")
	links, err := c.ns.Handle(t).LinkList()
	require.NoError(t, err)
	for _, l := range links {
		assert.Equal(t, "lo", l.Attrs().Name, "the failed ADD left nothing in the container")
	}
}

func TestProvideHostNameFromCNIArgs(t *testing.T) {
	w := newWorld(t, dhcptest.Options{})
	conf := w.conf(map[string]any{
		"provide":  []map[string]any{{"option": "host-name", "fromArg": "K8S_POD_NAME"}},
		"priority": 42,
	})
	c := w.newCtr()
	res, err := w.bridgeCmd("ADD", c, conf, "IgnoreUnknown=1;K8S_POD_NAME=web-0")
	require.NoError(t, err)
	le, ok := w.lab.LeaseOf(c.clientID())
	require.True(t, ok)
	assert.Equal(t, "web-0", le.Hostname)
	require.NotEmpty(t, res.Routes)
	for _, r := range res.Routes {
		assert.Equal(t, 42, r.Priority, "priority is every route's metric")
	}
}

func TestClasslessRoutesOverrideTheRouter(t *testing.T) {
	w := newWorld(t, dhcptest.Options{Classless: true})
	c := w.newCtr()
	res := w.add(c, w.conf(nil))
	assert.ElementsMatch(t, []result.Route{
		{Dst: netip.MustParsePrefix(dhcptest.StaticDst), GW: netip.MustParseAddr(dhcptest.StaticGW)},
		resultDefaultRoute(),
	}, res.Routes)
	routes, err := c.ns.Handle(t).RouteList(nil, netlink.FAMILY_V4)
	require.NoError(t, err)
	var dsts []string
	for _, r := range routes {
		if r.Dst != nil {
			dsts = append(dsts, r.Dst.String())
		}
	}
	assert.Contains(t, dsts, dhcptest.StaticDst, "the bridge plugin installed the classless route")
}

func TestOlderConfigVersionsGetTheirResultShape(t *testing.T) {
	w := newWorld(t, dhcptest.Options{})
	for _, v := range []string{"0.2.0", "0.4.0", "1.0.0"} {
		conf := pt.WithKeys(t, w.conf(nil), map[string]any{"cniVersion": v})
		ctr := w.newCtr()
		res := w.add(ctr, conf)
		assert.Equal(t, v, res.CNIVersion)
		require.Len(t, res.IPs, 1, v)
		_, err := w.bridgeCmd("DEL", ctr, conf, "")
		require.NoError(t, err, v)
	}
}

// TestRefusedRenewalTakesTheLinkDown: a server that refuses the renewal (it forgot the
// lease and now serves another pool) ends the lease; the interface goes down, since the
// address is no longer ours, and CHECK says so. DEL still succeeds.
func TestRefusedRenewalTakesTheLinkDown(t *testing.T) {
	w := newWorld(t, dhcptest.Options{LeaseTime: 2 * time.Minute, RebindAfter: 3 * time.Second})
	conf := w.conf(nil)
	c := w.newCtr()
	res := w.add(c, conf)
	w.lab.RestartServer(dhcptest.Options{Pool: [2]string{"10.99.0.200", "10.99.0.210"}})

	h := c.ns.Handle(t)
	require.Eventually(t, func() bool {
		l, err := h.LinkByName("eth0")
		return err == nil && l.Attrs().Flags&net.FlagUp == 0
	}, 20*time.Second, 100*time.Millisecond, "eth0 went down when the lease ended")
	_, err := w.bridgeCmd("CHECK", c, pt.WithPrev(t, conf, res), "")
	assert.ErrorContains(t, err, "expired")
	_, err = w.bridgeCmd("DEL", c, conf, "")
	assert.NoError(t, err)
	assert.Empty(t, w.heldFiles())
}
