package link_test

import (
	"net"
	"regexp"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/vishvananda/netlink"

	"github.com/cnikit/cni/internal/core/cnierror"
	"github.com/cnikit/cni/internal/host/link"
	"github.com/cnikit/cni/internal/testbed/testns"
)

func linkNames(t *testing.T, n *testns.NS) []string {
	t.Helper()
	links, err := n.Handle(t).LinkList()
	require.NoError(t, err)
	var out []string
	for _, l := range links {
		out = append(out, l.Attrs().Name)
	}
	return out
}

// masterIn gives n a veth end called name (its peer in a namespace of its own) to hang
// children off.
func masterIn(t *testing.T, n *testns.NS, name string) netlink.Link {
	t.Helper()
	testns.Veth(t, n, name, nil, testns.New(t), "peer", nil)
	l, err := n.Handle(t).LinkByName(name)
	require.NoError(t, err)
	return l
}

func TestCreateChildPutsTheLinkInTheContainerUnderIfName(t *testing.T) {
	t.Parallel()
	hostNS, contNS, host, cont := pair(t)
	m := masterIn(t, hostNS, "master0")
	// A host link called like the container interface must not get in the way.
	testns.Veth(t, hostNS, "eth0", nil, testns.New(t), "x", nil)

	mac, _ := net.ParseMAC("02:00:00:00:00:07")
	l, err := link.CreateChild(host, cont, &netlink.Macvlan{
		LinkAttrs: netlink.LinkAttrs{ParentIndex: m.Attrs().Index, MTU: 1400, HardwareAddr: mac},
		Mode:      netlink.MACVLAN_MODE_BRIDGE,
	}, "eth0")
	require.NoError(t, err)
	assert.Equal(t, "eth0", l.Attrs().Name)
	assert.Equal(t, mac.String(), l.Attrs().HardwareAddr.String())
	assert.Equal(t, 1400, l.Attrs().MTU)
	assert.Equal(t, m.Attrs().Index, l.Attrs().ParentIndex)
	assert.ElementsMatch(t, []string{"lo", "eth0"}, linkNames(t, contNS))
	assert.ElementsMatch(t, []string{"lo", "master0", "eth0"}, linkNames(t, hostNS), "nothing new on the host")
}

func TestCreateChildInItsOwnNamespace(t *testing.T) {
	t.Parallel()
	_, contNS, _, cont := pair(t)
	m := masterIn(t, contNS, "cmaster")
	_, err := link.CreateChild(cont, cont, &netlink.Macvlan{
		LinkAttrs: netlink.LinkAttrs{ParentIndex: m.Attrs().Index}, Mode: netlink.MACVLAN_MODE_PRIVATE}, "net1")
	require.NoError(t, err)
	assert.ElementsMatch(t, []string{"lo", "cmaster", "net1"}, linkNames(t, contNS))
}

func TestCreateChildRefusesATakenIfNameAndLeavesNothing(t *testing.T) {
	t.Parallel()
	hostNS, contNS, host, cont := pair(t)
	m := masterIn(t, hostNS, "master0")
	masterIn(t, contNS, "eth0")
	_, err := link.CreateChild(host, cont, &netlink.Macvlan{LinkAttrs: netlink.LinkAttrs{ParentIndex: m.Attrs().Index}}, "eth0")
	require.Error(t, err)
	assert.Equal(t, cnierror.CodeInvalidEnv, cnierror.From(err).Code)
	assert.ElementsMatch(t, []string{"lo", "eth0"}, linkNames(t, contNS))
}

func TestCreateChildPassesKernelRefusalsOnAndLeavesNothing(t *testing.T) {
	t.Parallel()
	hostNS, contNS, host, cont := pair(t)
	m := masterIn(t, hostNS, "master0")
	// A macvlan MTU above its master's is refused by the kernel.
	_, err := link.CreateChild(host, cont, &netlink.Macvlan{LinkAttrs: netlink.LinkAttrs{ParentIndex: m.Attrs().Index, MTU: 9000}}, "eth0")
	require.Error(t, err)
	assert.Contains(t, err.Error(), "macvlan")
	assert.Equal(t, []string{"lo"}, linkNames(t, contNS))
}

func TestTempLinkNameIsAValidRecognisableName(t *testing.T) {
	for try := range 3 {
		assert.Regexp(t, regexp.MustCompile(`^cnitmp[0-9a-f]{8}$`), link.TempLinkName("eth0", try))
	}
	assert.Equal(t, link.TempLinkName("eth0", 0), link.TempLinkName("eth0", 0), "a DEL finds the first try's name")
	assert.NotEqual(t, link.TempLinkName("eth0", 0), link.TempLinkName("net1", 0))
}

func TestDefaultRouteLinkPrefersIPv4AndFollowsMultipath(t *testing.T) {
	t.Parallel()
	hostNS, _, host, _ := pair(t)
	h := hostNS.Handle(t)
	a, b := masterIn(t, hostNS, "a0"), masterIn(t, hostNS, "b0")
	testns.Up(t, hostNS, "a0", "10.1.0.2/24", "fd01::2/64")
	testns.Up(t, hostNS, "b0", "10.2.0.2/24")

	_, err := host.DefaultRouteLink()
	assert.ErrorIs(t, err, link.ErrNoDefaultRoute)

	require.NoError(t, h.RouteAdd(&netlink.Route{LinkIndex: a.Attrs().Index, Gw: net.ParseIP("fd01::1")}))
	l, err := host.DefaultRouteLink()
	require.NoError(t, err)
	assert.Equal(t, "a0", l.Attrs().Name, "the IPv6 default route when there is no IPv4 one")

	anyV4 := &net.IPNet{IP: net.IPv4zero.To4(), Mask: net.CIDRMask(0, 32)}
	require.NoError(t, h.RouteAdd(&netlink.Route{Dst: anyV4, MultiPath: []*netlink.NexthopInfo{
		{LinkIndex: b.Attrs().Index, Gw: net.ParseIP("10.2.0.1")},
		{LinkIndex: a.Attrs().Index, Gw: net.ParseIP("10.1.0.1")},
	}}))
	l, err = host.DefaultRouteLink()
	require.NoError(t, err)
	assert.Equal(t, "b0", l.Attrs().Name, "IPv4 first, and a multipath route's first next hop")
}
