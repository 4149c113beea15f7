package vrf_test

import (
	"fmt"
	"net/netip"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/vishvananda/netlink"

	"github.com/cnikit/cni/internal/plugins/vrf"
	"github.com/cnikit/cni/internal/result"
	"github.com/cnikit/cni/internal/testbed/kernelfeature"
	pt "github.com/cnikit/cni/internal/testbed/plugintest"
	"github.com/cnikit/cni/internal/testbed/testns"
)

// world is a host namespace and a container namespace joined by veths the test makes;
// their container ends are what the plugin puts into VRFs.
type world struct {
	t          testing.TB
	host, cont *testns.NS
}

func newWorld(t testing.TB) *world {
	t.Helper()
	host, cont := pt.HostAndContainer(t)
	return &world{t: t, host: host, cont: cont}
}

// iface gives the container an interface ifName with addrs (host end h<ifName> holds
// the gateways, the first address of each subnet) and a route to routeDst via the IPv4
// gateway, and returns the prevResult a main plugin would have returned.
func (w *world) iface(ifName, routeDst string, addrs ...string) *result.Result {
	w.t.Helper()
	res := &result.Result{CNIVersion: "1.1.0"}
	idx := res.AddInterface(result.Interface{Name: ifName, Sandbox: w.cont.Path})
	var hostAddrs []string
	for _, a := range addrs {
		p := netip.MustParsePrefix(a)
		gw := p.Masked().Addr().Next()
		hostAddrs = append(hostAddrs, netip.PrefixFrom(gw, p.Bits()).String())
		res.IPs = append(res.IPs, result.IPConfig{Interface: &idx, Address: p, Gateway: gw})
	}
	testns.Veth(w.t, w.host, "h"+ifName, hostAddrs, w.cont, ifName, addrs)
	for _, ip := range res.IPs {
		if ip.Address.Addr().Is4() {
			testns.Route(w.t, w.cont, ifName, routeDst, ip.Gateway.String())
			break
		}
	}
	return res
}

// newNet1 is the world of most tests: the container's net1 with 10.80.1.2/24 and a
// route to 10.201.0.0/16, and the prevResult naming them.
func newNet1(t testing.TB) (*world, *result.Result) {
	t.Helper()
	w := newWorld(t)
	return w, w.iface("net1", "10.201.0.0/16", "10.80.1.2/24")
}

// conf is a vrf config with prev as prevResult (nil: none) and extra keys.
func conf(t testing.TB, prev *result.Result, extra string) []byte {
	t.Helper()
	return pt.Object(`"cniVersion":"1.1.0","name":"vrfnet","type":"vrf"`, pt.PrevMember(t, prev), extra)
}

// invoke runs the plugin in-process inside the host namespace, for the container.
func (w *world) invoke(cmd, ifName string, config []byte) (*result.Result, error) {
	return w.invokeIn(w.cont.Path, cmd, ifName, config)
}

// invokeIn is invoke with netns as CNI_NETNS.
func (w *world) invokeIn(netns, cmd, ifName string, config []byte) (*result.Result, error) {
	return pt.Invoke(w.t, w.host, vrf.Plugin(), pt.Call{Command: cmd, ContainerID: "ctr1", Netns: netns, IfName: ifName,
		Config: config})
}

// link returns the container's link called name, nil when there is none.
func (w *world) link(name string) netlink.Link { return pt.LinkIn(w.t, w.cont, name) }

// masterOf names the master of the container's link ifName ("" for none).
func (w *world) masterOf(ifName string) string { return pt.MasterOf(w.t, w.cont, ifName) }

// routes lists the container's routes in table through ifName as "dst[ via gw]".
func (w *world) routes(table int, ifName string) []string {
	w.t.Helper()
	var out []string
	for _, r := range pt.TableRoutes(w.t, w.cont, table, ifName) {
		s := fmt.Sprint(r.Dst)
		if r.Gw != nil {
			s += " via " + r.Gw.String()
		}
		out = append(out, s)
	}
	return out
}

// requireNoVRF skips on kernels that have VRF support: the path under test cannot be
// reached there.
func requireNoVRF(t *testing.T) {
	t.Helper()
	testns.RequireRoot(t)
	has, err := kernelfeature.Has(kernelfeature.VRF)
	require.NoError(t, err)
	if has {
		t.Skip("the kernel has VRF support; this test is for kernels without it")
	}
}
