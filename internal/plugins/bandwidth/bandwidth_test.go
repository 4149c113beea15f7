package bandwidth

import (
	"fmt"
	"net"
	"net/netip"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/vishvananda/netlink"

	"github.com/cnikit/cni/internal/core/cnierror"
	"github.com/cnikit/cni/internal/host/link"
	"github.com/cnikit/cni/internal/host/nlconn"
	"github.com/cnikit/cni/internal/result"
	pt "github.com/cnikit/cni/internal/testbed/plugintest"
	"github.com/cnikit/cni/internal/testbed/testns"
)

// attachment is a container joined to the test's host namespace by a veth, as bridge or
// ptp would leave it, plus the prevResult they would report.
type attachment struct {
	cid      string
	cont     *testns.NS
	hostVeth string
	contAddr netip.Prefix
	hostAddr netip.Prefix
	prev     string
}

// attach creates a container namespace and a veth to host; subnet picks 10.77.<subnet>.0/24.
func attach(t testing.TB, host *testns.NS, cid string, subnet int) *attachment {
	t.Helper()
	cont := testns.NewWithLoopback(t)
	hostVeth := veth(t, host, cont)
	a := &attachment{
		cid: cid, cont: cont, hostVeth: hostVeth,
		contAddr: netip.MustParsePrefix(fmt.Sprintf("10.77.%d.2/24", subnet)),
		hostAddr: netip.MustParsePrefix(fmt.Sprintf("10.77.%d.1/24", subnet)),
	}
	a.prev = fmt.Sprintf(`{"cniVersion":"1.0.0","interfaces":[{"name":%q},{"name":"eth0","sandbox":%q}],`+
		`"ips":[{"interface":1,"address":%q,"gateway":%q}]}`, a.hostVeth, cont.Path, a.contAddr, a.hostAddr.Addr())
	return a
}

// address puts the attachment's addresses on both ends and a default route in the container.
func (a *attachment) address(t testing.TB, host *testns.NS) {
	t.Helper()
	route(t, host, a.hostVeth, a.hostAddr, a.cont, a.contAddr)
}

// join gives a's container another interface ifName on host, as a second attachment of
// the container to the same network would, and returns that attachment.
func (a *attachment) join(t testing.TB, host *testns.NS, ifName string) *attachment {
	t.Helper()
	b := &attachment{cid: a.cid, cont: a.cont, hostVeth: vethNamed(t, host, a.cont, ifName)}
	b.prev = fmt.Sprintf(`{"cniVersion":"1.0.0","interfaces":[{"name":%q},{"name":%q,"sandbox":%q}]}`,
		b.hostVeth, ifName, a.cont.Path)
	return b
}

// veth joins cont to host as bridge or ptp would (eth0 in cont, up) and returns the
// host end's name.
func veth(t testing.TB, host, cont *testns.NS) string {
	t.Helper()
	return vethNamed(t, host, cont, "eth0")
}

// vethNamed is veth with ifName as the container end's name.
func vethNamed(t testing.TB, host, cont *testns.NS, ifName string) string {
	t.Helper()
	hl, err := link.Open(host.Path)
	require.NoError(t, err)
	defer hl.Close()
	cl, err := link.Open(cont.Path)
	require.NoError(t, err)
	defer cl.Close()
	v, err := link.CreateVeth(hl, cl, link.VethOptions{IfName: ifName, ContainerUp: true})
	require.NoError(t, err)
	return v.Host.Attrs().Name
}

// route puts hostAddr on the host end, contAddr on cont's eth0 and a default route in
// cont via hostAddr.
func route(t testing.TB, host *testns.NS, hostVeth string, hostAddr netip.Prefix, cont *testns.NS, contAddr netip.Prefix) {
	t.Helper()
	hh := host.Handle(t)
	hl := hostLink(t, host, hostVeth)
	require.NoError(t, hh.AddrAdd(hl, &netlink.Addr{IPNet: ipNet(hostAddr)}))
	ch := cont.Handle(t)
	cl, err := ch.LinkByName("eth0")
	require.NoError(t, err)
	require.NoError(t, ch.AddrAdd(cl, &netlink.Addr{IPNet: ipNet(contAddr)}))
	require.NoError(t, ch.RouteAdd(&netlink.Route{LinkIndex: cl.Attrs().Index, Gw: hostAddr.Addr().AsSlice()}))
}

func ipNet(p netip.Prefix) *net.IPNet {
	return &net.IPNet{IP: p.Addr().AsSlice(), Mask: net.CIDRMask(p.Bits(), p.Addr().BitLen())}
}

// conf builds a network config; limits are extra top-level keys ("" for none), prev a
// prevResult ("" for none).
func conf(network, limits, prev string) []byte {
	if prev != "" {
		prev = `"prevResult":` + prev
	}
	return pt.Object(`"cniVersion":"1.0.0","name":"`+network+`","type":"bandwidth"`, limits, prev)
}

// invoke runs the plugin in-process inside host, as an exec'd plugin would run there,
// for the container's eth0.
func invoke(t testing.TB, host *testns.NS, cmd, cid, netns string, config []byte) (*result.Result, error) {
	t.Helper()
	return invokeIf(t, host, cmd, cid, "eth0", netns, config)
}

// invokeIf is invoke for the container interface ifName.
func invokeIf(t testing.TB, host *testns.NS, cmd, cid, ifName, netns string, config []byte) (*result.Result, error) {
	t.Helper()
	return pt.InvokeLogged(t, host, Plugin(), pt.Call{Command: cmd, ContainerID: cid, Netns: netns, IfName: ifName,
		Config: config}, nil)
}

const bothLimits = `"ingressRate":16000000,"ingressBurst":400000,"egressRate":8000000,"egressBurst":200000`

func TestAddShapesBothDirectionsAndDelRemovesTheIfb(t *testing.T) {
	t.Parallel()
	host, a := newAttached(t, "ctr-both")
	hh := host.Handle(t)

	res, err := a.call(t, host, "ADD", bothLimits)
	require.NoError(t, err)

	got, veth, err := tbfOn(t, host, a.hostVeth)
	require.NoError(t, err)
	assert.Equal(t, tbfFor(Direction{16000000, 400000}), got, "ingress tbf on the host veth")
	assert.Equal(t, uint64(2_000_000), got.Rate)

	name := ifbName("net1", a.cid)
	ifb := hostLink(t, host, name)
	assert.Equal(t, "ifb", ifb.Type())
	assert.Equal(t, "cni-bandwidth net=net1 id=ctr-both if=eth0", ifb.Attrs().Alias)
	assert.Equal(t, veth.Attrs().MTU, ifb.Attrs().MTU)
	assert.NotZero(t, ifb.Attrs().Flags&net.FlagUp)
	got, err = rootTBF(linkNS(t, host), ifb)
	require.NoError(t, err)
	assert.Equal(t, tbfFor(Direction{8000000, 200000}), got, "egress tbf on the ifb")

	qdiscs, err := hh.QdiscList(veth)
	require.NoError(t, err)
	var ingress bool
	for _, q := range qdiscs {
		if _, ok := q.(*netlink.Ingress); ok && q.Attrs().Handle == netlink.MakeHandle(0xffff, 0) {
			ingress = true
		}
	}
	assert.True(t, ingress, "ingress qdisc ffff: on the host veth")
	filters, err := hh.FilterList(veth, netlink.MakeHandle(0xffff, 0))
	require.NoError(t, err)
	require.Len(t, filters, 1)
	u32, ok := filters[0].(*netlink.U32)
	require.True(t, ok, "filter is u32")
	assert.Equal(t, ifb.Attrs().Index, u32.RedirIndex, "mirred redirects to the ifb")

	require.Len(t, res.Interfaces, 3)
	assert.Equal(t, name, res.Interfaces[2].Name)
	assert.Equal(t, ifb.Attrs().HardwareAddr.String(), res.Interfaces[2].Mac)

	_, err = a.call(t, host, "CHECK", bothLimits)
	assert.NoError(t, err)

	// DEL needs neither prevResult nor the netns.
	_, err = invoke(t, host, "DEL", a.cid, "", conf("net1", bothLimits, ""))
	require.NoError(t, err)
	assertIfb(t, host, name, false, "ifb deleted")
	_, err = a.call(t, host, "CHECK", bothLimits)
	assert.ErrorContains(t, err, name, "CHECK after DEL misses the ifb")
	_, err = invoke(t, host, "DEL", a.cid, "", conf("net1", bothLimits, ""))
	assert.NoError(t, err, "second DEL")
}

func TestCheckFailsAfterAQdiscWasChangedByHand(t *testing.T) {
	testns.RequireRoot(t)
	t.Parallel()
	for _, where := range []string{"host veth", "ifb"} {
		t.Run(where, func(t *testing.T) {
			t.Parallel()
			host, a := newAttached(t, "ctr-check")
			hh := host.Handle(t)
			c := conf("net1", bothLimits, a.prev)
			_, err := invoke(t, host, "ADD", a.cid, a.cont.Path, c)
			require.NoError(t, err)
			target := a.hostVeth
			if where == "ifb" {
				target = ifbName("net1", a.cid)
			}
			l := hostLink(t, host, target)
			p, err := rootTBF(linkNS(t, host), l)
			require.NoError(t, err)
			p.Rate *= 2
			require.NoError(t, setRootTBF(&nlconn.Handle{Handle: hh}, l, p))

			_, err = invoke(t, host, "CHECK", a.cid, a.cont.Path, c)
			require.Error(t, err)
			assert.Contains(t, err.Error(), target)
		})
	}
}

func TestCheckFailsWhenTheRedirectIsGone(t *testing.T) {
	t.Parallel()
	host, a := newAttached(t, "ctr-redirect")
	c := conf("net1", bothLimits, a.prev)
	_, err := invoke(t, host, "ADD", a.cid, a.cont.Path, c)
	require.NoError(t, err)
	hh := host.Handle(t)
	veth := hostLink(t, host, a.hostVeth)
	require.NoError(t, delIngress(&nlconn.Handle{Handle: hh}, veth))
	_, err = invoke(t, host, "CHECK", a.cid, a.cont.Path, c)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "redirect")
}

func TestZeroLimitsPassPrevResultThroughAndChangeNothing(t *testing.T) {
	t.Parallel()
	host, a := newAttached(t, "ctr-zero")
	for _, limits := range []string{"", `"ingressRate":0,"egressRate":0`, `"runtimeConfig":{"bandwidth":{}}`} {
		res, err := a.call(t, host, "ADD", limits)
		require.NoError(t, err, limits)
		require.Len(t, res.Interfaces, 2)
		assert.Equal(t, a.hostVeth, res.Interfaces[0].Name)
		links, err := host.Handle(t).LinkList()
		require.NoError(t, err)
		for _, l := range links {
			assert.NotEqual(t, "ifb", l.Type(), "no ifb for %s", limits)
		}
		veth := hostLink(t, host, a.hostVeth)
		_, err = rootTBF(linkNS(t, host), veth)
		assert.Error(t, err, "no tbf on the host veth for %s", limits)
	}
}

func TestCapabilityLimitsApplyWithoutStaticKeys(t *testing.T) {
	testns.RequireRoot(t)
	t.Parallel()
	tests := []struct {
		name, limits string
		want         Direction
	}{
		{"capability", `"runtimeConfig":{"bandwidth":{"ingressRate":24000000,"ingressBurst":300000}}`,
			Direction{24000000, 300000}},
		{"static wins", `"ingressRate":8000000,"ingressBurst":100000,` +
			`"runtimeConfig":{"bandwidth":{"ingressRate":24000000,"ingressBurst":300000}}`, Direction{8000000, 100000}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			host, a := newAttached(t, "ctr-cap")
			res, err := a.call(t, host, "ADD", tt.limits)
			require.NoError(t, err)
			assert.Len(t, res.Interfaces, 2, "no egress limit, no ifb")
			got, _, err := tbfOn(t, host, a.hostVeth)
			require.NoError(t, err)
			assert.Equal(t, tbfFor(tt.want), got)
		})
	}
}

func TestGCRemovesOnlyThisNetworksStaleIfbs(t *testing.T) {
	testns.RequireRoot(t)
	t.Parallel()
	host := testns.NewWithLoopback(t)
	keep := attach(t, host, "ctr-keep", 1)
	stale := attach(t, host, "ctr-stale", 2)
	other := attach(t, host, "ctr-other", 3)
	egress := `"egressRate":8000000,"egressBurst":200000`
	for _, a := range []*attachment{keep, stale} {
		_, err := a.call(t, host, "ADD", egress)
		require.NoError(t, err)
	}
	_, err := invoke(t, host, "ADD", other.cid, other.cont.Path, conf("net2", egress, other.prev))
	require.NoError(t, err)

	gcConf := []byte(`{"cniVersion":"1.1.0","name":"net1","type":"bandwidth",` +
		`"cni.dev/valid-attachments":[{"containerID":"ctr-keep","ifname":"eth0"}]}`)
	_, err = invoke(t, host, "GC", "", "", gcConf)
	require.NoError(t, err)

	assertIfb(t, host, ifbName("net1", "ctr-keep"), true, "valid attachment keeps its ifb")
	assertIfb(t, host, ifbName("net1", "ctr-stale"), false, "stale ifb removed")
	assertIfb(t, host, ifbName("net2", "ctr-other"), true, "another network's ifb is not this GC's business")
	_, err = keep.call(t, host, "CHECK", egress)
	assert.NoError(t, err, "the valid attachment's ifb, tbf and redirect stay as ADD made them")
	_, err = stale.call(t, host, "CHECK", egress)
	assert.ErrorContains(t, err, ifbName("net1", "ctr-stale"), "the stale attachment no longer checks")
}

func TestAddErrorsAreTyped(t *testing.T) {
	t.Parallel()
	host, a := newAttached(t, "ctr-err")
	tests := []struct {
		name   string
		config []byte
		code   uint
		msg    string
	}{
		{"no prevResult", conf("net1", bothLimits, ""), cnierror.CodeInvalidConfig, "prevResult"},
		{"invalid limits", conf("net1", `"ingressRate":1000`, a.prev), cnierror.CodeInvalidConfig, "ingressBurst"},
		{"wrong type", conf("net1", `"egressRate":"fast"`, a.prev), cnierror.CodeInvalidConfig, "egressRate"},
		{"too old a version", []byte(`{"cniVersion":"0.2.0","name":"net1","type":"bandwidth"}`),
			cnierror.CodeIncompatibleVersion, "incompatible"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := invoke(t, host, "ADD", a.cid, a.cont.Path, tt.config)
			require.Error(t, err)
			assert.Equal(t, tt.code, cnierror.Code(err), err.Error())
			assert.Contains(t, err.Error(), tt.msg)
			assertUnshaped(t, host, a.hostVeth)
		})
	}
	links, err := host.Handle(t).LinkList()
	require.NoError(t, err)
	for _, l := range links {
		assert.NotEqual(t, "ifb", l.Type(), "a failed ADD leaves no ifb")
	}
}

// The host veth comes from the kernel (the container end's peer), so a prevResult that
// lists only the container's interface (Cilium's) or none (an IPAM result handed on)
// is shaped all the same, where the reference refuses both.
func TestAddShapesAHostVethThatPrevResultDoesNotList(t *testing.T) {
	testns.RequireRoot(t)
	t.Parallel()
	for name, prev := range map[string]func(*attachment) string{
		"container interface only": func(a *attachment) string {
			return fmt.Sprintf(`{"cniVersion":"1.0.0","interfaces":[{"name":"eth0","sandbox":%q}],"ips":[{"interface":0,"address":"10.77.1.2/24"}]}`, a.cont.Path)
		},
		"no interfaces": func(*attachment) string { return `{"cniVersion":"1.0.0","ips":[{"address":"10.77.1.2/24"}]}` },
	} {
		t.Run(name, func(t *testing.T) {
			host := testns.NewWithLoopback(t)
			a := attach(t, host, "ctr-unlisted", 1)
			c := conf("net1", bothLimits, prev(a))
			_, err := invoke(t, host, "ADD", a.cid, a.cont.Path, c)
			require.NoError(t, err)
			got, _, err := tbfOn(t, host, a.hostVeth)
			require.NoError(t, err)
			assert.Equal(t, tbfFor(Direction{16000000, 400000}), got)
			_, err = invoke(t, host, "CHECK", a.cid, a.cont.Path, c)
			assert.NoError(t, err)
			_, err = invoke(t, host, "DEL", a.cid, a.cont.Path, c)
			require.NoError(t, err)
			assertIfb(t, host, ifbName("net1", a.cid), false, "ifb deleted")
		})
	}
}

func TestAddRollsBackWhenTheIfbNameIsTaken(t *testing.T) {
	t.Parallel()
	host, a := newAttached(t, "ctr-taken")
	hh := host.Handle(t)
	// An ifb owned by nobody we know sits on the name.
	require.NoError(t, hh.LinkAdd(&netlink.Ifb{LinkAttrs: netlink.LinkAttrs{Name: ifbName("net1", a.cid)}}))

	_, err := a.call(t, host, "ADD", bothLimits)
	require.Error(t, err)
	veth := hostLink(t, host, a.hostVeth)
	_, err = rootTBF(linkNS(t, host), veth)
	assert.Error(t, err, "the ingress tbf added before the failure was undone")
	assertIfb(t, host, ifbName("net1", a.cid), true, "somebody else's ifb is left alone")
}

func TestAddTwiceReplacesItsOwnIfb(t *testing.T) {
	t.Parallel()
	host, a := newAttached(t, "ctr-twice")
	_, err := a.call(t, host, "ADD", bothLimits)
	require.NoError(t, err)
	_, err = a.call(t, host, "ADD", bothLimits)
	require.NoError(t, err)
	_, err = a.call(t, host, "CHECK", bothLimits)
	assert.NoError(t, err)
}

// linkNS opens n as a link.NS, closed when the test ends.
func linkNS(t *testing.T, n *testns.NS) *link.NS {
	t.Helper()
	l, err := link.Open(n.Path)
	require.NoError(t, err)
	t.Cleanup(l.Close)
	return l
}

// hostLink is the link called name in host, which must exist.
func hostLink(t testing.TB, host *testns.NS, name string) netlink.Link {
	t.Helper()
	l := pt.LinkIn(t, host, name)
	require.NotNil(t, l, "link %s", name)
	return l
}

// tbfOn is the root tbf of host's link called name, which must exist, and the link.
func tbfOn(t *testing.T, host *testns.NS, name string) (tbfParams, netlink.Link, error) {
	t.Helper()
	l := hostLink(t, host, name)
	p, err := rootTBF(linkNS(t, host), l)
	return p, l, err
}

// assertIfb checks that host has an ifb called name when want is true, and none when it
// is false.
func assertIfb(t testing.TB, host *testns.NS, name string, want bool, msg string) bool {
	t.Helper()
	_, err := host.Handle(t).LinkByName(name)
	if want {
		return assert.NoError(t, err, msg)
	}
	return assert.True(t, link.IsNotFound(err), "%s: %v", msg, err)
}

// newAttached is a host namespace of the test's own with one attachment, cid, on
// 10.77.1.0/24.
func newAttached(t *testing.T, cid string) (*testns.NS, *attachment) {
	t.Helper()
	testns.RequireRoot(t)
	host := testns.NewWithLoopback(t)
	return host, attach(t, host, cid, 1)
}

// call runs cmd in-process for a (its container's eth0) with the config of net1 with
// limits and a's prevResult.
func (a *attachment) call(t testing.TB, host *testns.NS, cmd, limits string) (*result.Result, error) {
	t.Helper()
	return invoke(t, host, cmd, a.cid, a.cont.Path, conf("net1", limits, a.prev))
}

// assertUnshaped checks that host's link called name holds nothing bandwidth adds: no
// root tbf and no ingress redirect.
func assertUnshaped(t *testing.T, host *testns.NS, name string) {
	t.Helper()
	veth := hostLink(t, host, name)
	kind, _, err := rootQdisc(linkNS(t, host), veth.Attrs().Index)
	require.NoError(t, err)
	assert.NotEqual(t, "tbf", kind, "no tbf on %s", name)
	assert.False(t, redirects(&nlconn.Handle{Handle: host.Handle(t)}, veth), "no redirect on %s", name)
}
