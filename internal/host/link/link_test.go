package link_test

import (
	"errors"
	"net"
	"net/netip"
	"regexp"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/vishvananda/netlink"

	"github.com/cnikit/cni/internal/host/link"
	"github.com/cnikit/cni/internal/host/ns"
	"github.com/cnikit/cni/internal/host/sysctl"
	"github.com/cnikit/cni/internal/result"
	pt "github.com/cnikit/cni/internal/testbed/plugintest"
	"github.com/cnikit/cni/internal/testbed/testns"
)

// pair opens a fresh host and container namespace as link.NS values.
func pair(t *testing.T) (hostNS, contNS *testns.NS, host, cont *link.NS) {
	t.Helper()
	testns.RequireRoot(t)
	hostNS, contNS = testns.New(t), testns.New(t)
	var err error
	host, err = link.Open(hostNS.Path)
	require.NoError(t, err)
	t.Cleanup(host.Close)
	cont, err = link.Open(contNS.Path)
	require.NoError(t, err)
	t.Cleanup(cont.Close)
	return hostNS, contNS, host, cont
}

// vethEth0 is a pair joined by a veth whose container end is eth0, with that end's
// IPv6 DAD set to acceptDAD ("0" off, "1" on, "" the kernel's default), for tests that
// configure it.
func vethEth0(t *testing.T, acceptDAD string) (contNS *testns.NS, cont *link.NS) {
	t.Helper()
	_, contNS, host, cont := pair(t)
	_, err := link.CreateVeth(host, cont, link.VethOptions{IfName: "eth0"})
	require.NoError(t, err)
	if acceptDAD != "" {
		// Without DAD the addresses settle at once, with it they are tentative a while:
		// the poll of ConfigureIface must see either.
		contNS.Run(t, func() error { return sysctl.Set("net/ipv6/conf/eth0/accept_dad", acceptDAD) })
	}
	return contNS, cont
}

func TestCreateVethPutsEachEndInItsNamespace(t *testing.T) {
	t.Parallel()
	hostNS, contNS, host, cont := pair(t)
	mac, _ := net.ParseMAC("0a:58:0a:01:00:05")
	v, err := link.CreateVeth(host, cont, link.VethOptions{IfName: "eth0", MTU: 1400, MAC: mac})
	require.NoError(t, err)

	assert.Regexp(t, regexp.MustCompile(`^veth[0-9a-f]{8}$`), v.Host.Attrs().Name)
	hl, err := hostNS.Handle(t).LinkByName(v.Host.Attrs().Name)
	require.NoError(t, err)
	assert.Equal(t, 1400, hl.Attrs().MTU)
	assert.NotZero(t, hl.Attrs().Flags&net.FlagUp, "host end is up")
	_, err = hostNS.Handle(t).LinkByName("eth0")
	assert.Error(t, err, "the container end never appears in the host")

	cl, err := contNS.Handle(t).LinkByName("eth0")
	require.NoError(t, err)
	assert.Equal(t, mac.String(), cl.Attrs().HardwareAddr.String())
	assert.Equal(t, 1400, cl.Attrs().MTU)
	assert.Zero(t, cl.Attrs().Flags&net.FlagUp, "container end is left down unless asked")
	assert.Equal(t, 1000, cl.Attrs().TxQLen, "the kernel's default txqueuelen, as iproute2 and the reference give")
	assert.Equal(t, 1000, hl.Attrs().TxQLen, "on both ends")

	peer, err := link.HostPeer(host, cont, "eth0")
	require.NoError(t, err)
	assert.Equal(t, v.Host.Attrs().Name, peer.Attrs().Name)

	_, err = link.WaitOperUp(host, v.Host.Attrs().Name, time.Second)
	assert.Error(t, err, "a veth is not oper-up while its peer is down")
	require.NoError(t, contNS.Handle(t).LinkSetUp(cl))
	_, err = link.WaitOperUp(host, v.Host.Attrs().Name, 5*time.Second)
	assert.NoError(t, err)
}

func TestCreateVethFailsWhenTheContainerNameIsTaken(t *testing.T) {
	t.Parallel()
	hostNS, contNS, host, cont := pair(t)
	_, err := link.CreateVeth(host, cont, link.VethOptions{IfName: "eth0"})
	require.NoError(t, err)
	before, err := hostNS.Handle(t).LinkList()
	require.NoError(t, err)
	hostBefore, contBefore := pt.Links(t, hostNS), pt.Links(t, contNS)

	_, err = link.CreateVeth(host, cont, link.VethOptions{IfName: "eth0"})
	require.ErrorIs(t, err, link.ErrExists)
	after, err := hostNS.Handle(t).LinkList()
	require.NoError(t, err)
	assert.Len(t, after, len(before), "no host veth left behind")
	assert.Equal(t, hostBefore, pt.Links(t, hostNS), "the host keeps the links it had, the first veth's end among them")
	assert.Equal(t, contBefore, pt.Links(t, contNS), "nor a half-made end in the container")
}

func TestCreateVethWithFixedHostNameReportsTheClash(t *testing.T) {
	t.Parallel()
	hostNS, contNS, host, cont := pair(t)
	_, err := link.CreateVeth(host, cont, link.VethOptions{IfName: "eth0", HostName: "vethfixed"})
	require.NoError(t, err)
	hostBefore := pt.Links(t, hostNS)
	_, err = link.CreateVeth(host, cont, link.VethOptions{IfName: "eth1", HostName: "vethfixed"})
	require.Error(t, err)
	assert.True(t, errors.Is(err, syscall.EEXIST), "got %v", err)
	assert.Equal(t, hostBefore, pt.Links(t, hostNS), "the clash leaves the host as it was")
	assert.NotContains(t, pt.Links(t, contNS), "eth1", "and no eth1 in the container")
}

func TestDeleteRemovesBothEndsAndIgnoresMissingLinks(t *testing.T) {
	t.Parallel()
	_, _, host, cont := pair(t)
	v, err := link.CreateVeth(host, cont, link.VethOptions{IfName: "eth0"})
	require.NoError(t, err)
	require.NoError(t, cont.Delete("eth0"))
	_, err = cont.ByName("eth0")
	assert.True(t, link.IsNotFound(err), "the container end is gone: %v", err)
	_, err = host.ByName(v.Host.Attrs().Name)
	assert.True(t, link.IsNotFound(err), "host end went with the container end: %v", err)
	assert.NoError(t, cont.Delete("eth0"))
}

func dualStack() *result.Result {
	idx := 0
	return &result.Result{
		CNIVersion: "1.1.0",
		Interfaces: []result.Interface{{Name: "eth0"}},
		IPs: []result.IPConfig{
			{Interface: &idx, Address: netip.MustParsePrefix("10.9.0.5/24"), Gateway: netip.MustParseAddr("10.9.0.1")},
			{Interface: &idx, Address: netip.MustParsePrefix("fd00:9::5/64"), Gateway: netip.MustParseAddr("fd00:9::1")},
		},
		Routes: []result.Route{
			{Dst: netip.MustParsePrefix("0.0.0.0/0")},
			{Dst: netip.MustParsePrefix("::/0")},
			{Dst: netip.MustParsePrefix("192.168.7.0/24"), GW: netip.MustParseAddr("10.9.0.254"), Priority: 50, MTU: 1300, AdvMSS: 1200},
		},
	}
}

func TestConfigureIfaceSetsAddressesRoutesAndIPv6Sysctls(t *testing.T) {
	t.Parallel()
	contNS, cont := vethEth0(t, "0")
	res := dualStack()
	require.NoError(t, link.ConfigureIface(cont, "eth0", res))

	h := contNS.Handle(t)
	l, err := h.LinkByName("eth0")
	require.NoError(t, err)
	assert.NotZero(t, l.Attrs().Flags&net.FlagUp)
	addrs, err := h.AddrList(l, netlink.FAMILY_ALL)
	require.NoError(t, err)
	var got []string
	for _, a := range addrs {
		got = append(got, a.IPNet.String())
	}
	assert.Contains(t, got, "10.9.0.5/24")
	assert.Contains(t, got, "fd00:9::5/64")

	routes, err := h.RouteList(l, netlink.FAMILY_ALL)
	require.NoError(t, err)
	var def4, def6, extra *netlink.Route
	for i, r := range routes {
		switch r.Dst.String() {
		case "0.0.0.0/0":
			def4 = &routes[i]
		case "::/0":
			def6 = &routes[i]
		case "192.168.7.0/24":
			extra = &routes[i]
		}
	}
	require.NotNil(t, def4)
	require.NotNil(t, def6)
	require.NotNil(t, extra)
	assert.Equal(t, "10.9.0.1", def4.Gw.String(), "route without gw uses the v4 gateway")
	assert.Equal(t, "fd00:9::1", def6.Gw.String(), "route without gw uses the v6 gateway")
	assert.Equal(t, 50, extra.Priority)
	assert.Equal(t, 1300, extra.MTU)
	assert.Equal(t, 1200, extra.AdvMSS)

	var keep string
	contNS.Run(t, func() (err error) { keep, err = sysctl.Get("net/ipv6/conf/eth0/keep_addr_on_down"); return err })
	assert.Equal(t, "1", keep)

	assert.NoError(t, link.VerifyIface(cont, "eth0", res))
}

func TestConfigureIfaceWaitsForDADWithoutFixedSleeps(t *testing.T) {
	t.Parallel()
	contNS, cont := vethEth0(t, "1")
	require.NoError(t, link.ConfigureIface(cont, "eth0", dualStack()))
	h := contNS.Handle(t)
	l, err := h.LinkByName("eth0")
	require.NoError(t, err)
	addrs, err := h.AddrList(l, netlink.FAMILY_V6)
	require.NoError(t, err)
	for _, a := range addrs {
		assert.Zero(t, a.Flags&syscall.IFA_F_TENTATIVE, "%s is no longer tentative", a.IPNet)
	}
}

func TestVerifyIfaceFailsWhenAnAddressOrRouteIsRemoved(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name   string
		remove func(h *netlink.Handle, l netlink.Link) error
		msg    string // what the error names
	}{
		{"address", func(h *netlink.Handle, l netlink.Link) error {
			a, _ := netlink.ParseAddr("10.9.0.5/24")
			return h.AddrDel(l, a)
		}, "eth0: address 10.9.0.5/24 not found"},
		{"route", func(h *netlink.Handle, l netlink.Link) error {
			_, dst, _ := net.ParseCIDR("192.168.7.0/24")
			return h.RouteDel(&netlink.Route{LinkIndex: l.Attrs().Index, Dst: dst, Priority: 50})
		}, "route 192.168.7.0/24 via 10.9.0.254"},
		{"link", func(h *netlink.Handle, l netlink.Link) error { return h.LinkDel(l) }, `link "eth0"`},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			contNS, cont := vethEth0(t, "0")
			res := dualStack()
			require.NoError(t, link.ConfigureIface(cont, "eth0", res))
			require.NoError(t, link.VerifyIface(cont, "eth0", res))
			h := contNS.Handle(t)
			l, err := h.LinkByName("eth0")
			require.NoError(t, err)
			require.NoError(t, c.remove(h, l))
			assert.Error(t, link.VerifyIface(cont, "eth0", res))
			assert.ErrorContains(t, link.VerifyIface(cont, "eth0", res), c.msg)
		})
	}
}

func TestOpenMissingNamespaceIsNotExist(t *testing.T) {
	_, err := link.Open(t.TempDir() + "/gone")
	require.ErrorIs(t, err, ns.ErrNotExist)
}
