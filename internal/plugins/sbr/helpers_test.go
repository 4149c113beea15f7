package sbr_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/netip"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/vishvananda/netlink"

	"github.com/cnikit/cni/internal/plugins/sbr"
	"github.com/cnikit/cni/internal/result"
	pt "github.com/cnikit/cni/internal/testbed/plugintest"
	"github.com/cnikit/cni/internal/testbed/testns"
)

// world is a host namespace and a container namespace joined by veths the test makes:
// the container ends are the interfaces sbr routes.
type world struct {
	t          testing.TB
	host, cont *testns.NS
}

func newWorld(t testing.TB) *world {
	t.Helper()
	host, cont := pt.HostAndContainer(t)
	return &world{t: t, host: host, cont: cont}
}

// iface gives the container an interface ifName (veth to host end h<ifName>) with the
// addresses of ips, and returns the prevResult a main plugin would have returned.
func (w *world) iface(ifName string, ips ...ipGw) *result.Result {
	w.t.Helper()
	var addrs, hostAddrs []string
	for _, ip := range ips {
		addrs = append(addrs, ip.addr)
		if ip.gw != "" {
			p := netip.MustParsePrefix(ip.addr)
			hostAddrs = append(hostAddrs, netip.PrefixFrom(netip.MustParseAddr(ip.gw), p.Bits()).String())
		}
	}
	testns.Veth(w.t, w.host, "h"+ifName, hostAddrs, w.cont, ifName, addrs)
	return prevResult(ifName, w.cont.Path, ips...)
}

type ipGw struct{ addr, gw string }

// newNet1 is the world of most tests: the container's net1 with 10.60.0.2/24 and
// gateway 10.60.0.1, and the prevResult naming them.
func newNet1(t testing.TB) (*world, *result.Result) {
	t.Helper()
	w := newWorld(t)
	return w, w.iface("net1", ipGw{"10.60.0.2/24", "10.60.0.1"})
}

func prevResult(ifName, sandbox string, ips ...ipGw) *result.Result {
	res := &result.Result{CNIVersion: "1.1.0"}
	idx := res.AddInterface(result.Interface{Name: ifName, Sandbox: sandbox})
	for _, ip := range ips {
		c := result.IPConfig{Interface: &idx, Address: netip.MustParsePrefix(ip.addr)}
		if ip.gw != "" {
			c.Gateway = netip.MustParseAddr(ip.gw)
		}
		res.IPs = append(res.IPs, c)
	}
	return res
}

// conf is an sbr config with prev as prevResult (nil: none) and extra keys.
func conf(t testing.TB, prev *result.Result, extra string) []byte {
	t.Helper()
	return pt.Object(`"cniVersion":"1.1.0","name":"sbrnet","type":"sbr"`, pt.PrevMember(t, prev), extra)
}

// invoke runs sbr in-process inside the host namespace.
func (w *world) invoke(cmd, netns, ifName string, config []byte) (*result.Result, error) {
	return w.invokeTo(os.Stderr, cmd, netns, ifName, config)
}

// invokeTo is invoke with the plugin's stderr going to stderr.
func (w *world) invokeTo(stderr io.Writer, cmd, netns, ifName string, config []byte) (*result.Result, error) {
	return pt.InvokeLogged(w.t, w.host, sbr.Plugin(), pt.Call{Command: cmd, ContainerID: "ctr1", Netns: netns,
		IfName: ifName, Config: config}, stderr)
}

// rules lists the container's rules as `ip rule` would show them, "from <src> lookup
// <table>", leaving out the kernel's own ones.
func (w *world) rules() []string { return pt.SourceRules(w.t, w.cont) }

// routes lists the container's routes of table via ifName as "dst[ via gw][ src s]".
func (w *world) routes(table int, ifName string) []string {
	w.t.Helper()
	var out []string
	for _, r := range w.tableRoutes(table, ifName) {
		out = append(out, describeRoute(r))
	}
	return out
}

// mainRoutes lists the container's main-table routes via ifName as routes does, each
// with its protocol and metric: a put-back kernel route must be the kernel's again, not
// a copy. The IPv6 link-local route is left out: the kernel adds it a moment after the
// link comes up (on a slow machine, after a test's first look).
func (w *world) mainRoutes(ifName string) []string {
	w.t.Helper()
	var out []string
	for _, r := range w.tableRoutes(mainTable, ifName) {
		if r.Dst != nil && r.Dst.IP.IsLinkLocalUnicast() {
			continue
		}
		out = append(out, fmt.Sprintf("%s proto %d metric %d", describeRoute(r), r.Protocol, r.Priority))
	}
	return out
}

func (w *world) tableRoutes(table int, ifName string) []netlink.Route {
	return pt.TableRoutes(w.t, w.cont, table, ifName)
}

// describeRoute is "dst[ via gw][ src s]", dst "default" for a default route.
func describeRoute(r netlink.Route) string {
	s := "default"
	if r.Dst != nil && !(r.Dst.IP.IsUnspecified() && strings.HasSuffix(r.Dst.String(), "/0")) {
		s = r.Dst.String()
	}
	if r.Gw != nil {
		s += " via " + r.Gw.String()
	}
	if r.Src != nil {
		s += " src " + r.Src.String()
	}
	return s
}

// withoutLinkLocal drops the IPv6 link-local route the kernel makes on a link with IPv6
// on: it serves no address of an IPv4-only prevResult, so sbr leaves it in main.
func withoutLinkLocal(routes []string) []string {
	var out []string
	for _, r := range routes {
		if r != "fe80::/64" {
			out = append(out, r)
		}
	}
	return out
}

func printed(t testing.TB, res *result.Result) string {
	t.Helper()
	b, err := json.Marshal(res)
	require.NoError(t, err)
	return string(b)
}

// add runs ADD of net1 in the container with prev as prevResult and extra keys, which
// must succeed, and returns its result.
func (w *world) add(prev *result.Result, extra string) *result.Result {
	w.t.Helper()
	res, err := w.invoke("ADD", w.cont.Path, "net1", conf(w.t, prev, extra))
	require.NoError(w.t, err)
	return res
}
