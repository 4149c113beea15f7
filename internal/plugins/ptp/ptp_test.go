package ptp

import (
	"encoding/json"
	"fmt"
	"net"
	"net/netip"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/vishvananda/netlink"

	"github.com/cnikit/cni/internal/core/cnierror"
	"github.com/cnikit/cni/internal/core/version"
	"github.com/cnikit/cni/internal/result"
	"github.com/cnikit/cni/internal/spec/skel"
	"github.com/cnikit/cni/internal/testbed/nfttest"
	pt "github.com/cnikit/cni/internal/testbed/plugintest"
	"github.com/cnikit/cni/internal/testbed/testns"
)

type env struct {
	t          testing.TB
	host, cont *testns.NS
	dataDir    string
	// netns overrides cont.Path as CNI_NETNS when set.
	netns string
}

func newEnv(t testing.TB) *env {
	t.Helper()
	host, cont := pt.HostAndContainer(t)
	return &env{t: t, host: host, cont: cont, dataDir: t.TempDir()}
}

// config builds a ptp config; extra keys are merged in at the top level.
func (e *env) config(t *testing.T, extra map[string]any, ranges ...string) []byte {
	t.Helper()
	if len(ranges) == 0 {
		ranges = []string{"10.10.0.0/24", "fd10::/64"}
	}
	return pt.Config(t, map[string]any{"cniVersion": "1.1.0", "name": "ptpnet", "type": "ptp",
		"ipam": pt.HostLocal(e.dataDir, ranges...)}, extra)
}

func (e *env) invoke(cmd, cid string, config []byte) (*result.Result, error) {
	return pt.InvokeLogged(e.t, e.host, Plugin(), pt.Call{Command: cmd, ContainerID: cid, Netns: e.netnsPath(),
		IfName: "eth0", Config: config}, nil)
}

func (e *env) netnsPath() string { return pt.NetnsOf(e.cont, e.netns) }

func (e *env) add(t *testing.T, config []byte) *result.Result {
	t.Helper()
	res, err := e.invoke(skel.CmdAdd, "c1", config)
	require.NoError(t, err)
	return res
}

// dial connects from one namespace to addr:port and reports the error.
func dial(n *testns.NS, addr netip.Addr, port int) error {
	return n.Do(func() error {
		c, err := net.DialTimeout("tcp", netip.AddrPortFrom(addr, uint16(port)).String(), 5*time.Second)
		if err != nil {
			return err
		}
		return c.Close()
	})
}

// reservations lists host-local's address files for the network.
func (e *env) reservations(t *testing.T) []string {
	return pt.Reservations(t, filepath.Join(e.dataDir, "ptpnet"))
}

// ruleset is the host's nf_tables ruleset read over netlink and, where the firewall
// binaries are, the nat tables as iptables-save prints them (legacy tables too).
func (e *env) ruleset(t *testing.T) string {
	t.Helper()
	var b strings.Builder
	b.WriteString(nfttest.Ruleset(t, e.host))
	if testns.FirewallBinariesHidden() {
		return b.String()
	}
	for _, cmd := range [][]string{{"iptables-save", "-t", "nat"}, {"ip6tables-save", "-t", "nat"}} {
		out, err := e.host.Exec(t, cmd[0], cmd[1:]...)
		require.NoError(t, err, out)
		b.WriteString(out)
	}
	return b.String()
}

// requireBackend skips an iptables subtest where the firewall binaries are hidden.
func requireBackend(t *testing.T, backend string) {
	t.Helper()
	if backend == "iptables" {
		testns.RequireFirewallBinaries(t, "the iptables masquerade backend's own test")
	}
}

func (e *env) links(t *testing.T, n *testns.NS) []string {
	return pt.Links(t, n)
}

func TestAddConnectsContainerAndHostDualStack(t *testing.T) {
	e := newEnv(t)
	conf := e.config(t, map[string]any{"mtu": 1400, "dns": map[string]any{"nameservers": []string{"10.10.0.53"}}})
	res := e.add(t, conf)

	require.Len(t, res.Interfaces, 2)
	assert.True(t, strings.HasPrefix(res.Interfaces[0].Name, "veth"))
	assert.Equal(t, "eth0", res.Interfaces[1].Name)
	assert.Equal(t, e.cont.Path, res.Interfaces[1].Sandbox)
	assert.Equal(t, 1400, res.Interfaces[1].MTU)
	assert.Equal(t, []string{"10.10.0.53"}, res.DNS.Nameservers)
	require.Len(t, res.IPs, 2)
	for _, ip := range res.IPs {
		require.NotNil(t, ip.Interface)
		assert.Equal(t, 1, *ip.Interface)
	}
	ip4, ip6 := res.IPs[0], res.IPs[1]
	assert.Equal(t, "10.10.0.2/24", ip4.Address.String())
	assert.Equal(t, "10.10.0.1", ip4.Gateway.String())
	assert.Equal(t, "fd10::1", ip6.Gateway.String())

	hostPort, contPort := testns.ServeTCP(t, e.host, "tcp", ":0", ""), testns.ServeTCP(t, e.cont, "tcp", ":0", "")
	for _, ip := range res.IPs {
		assert.NoError(t, dial(e.cont, ip.Gateway, hostPort), "container reaches the host at %s", ip.Gateway)
		assert.NoError(t, dial(e.host, ip.Address.Addr(), contPort), "host reaches the container at %s", ip.Address.Addr())
	}

	routes, err := e.cont.Handle(t).RouteList(nil, netlink.FAMILY_V4)
	require.NoError(t, err)
	var got []string
	for _, r := range routes {
		got = append(got, fmt.Sprintf("%s via %s src %s", r.Dst, r.Gw, r.Src))
	}
	assert.Contains(t, got, "10.10.0.1/32 via <nil> src 10.10.0.2")
	assert.Contains(t, got, "10.10.0.0/24 via 10.10.0.1 src 10.10.0.2")
	assert.NotContains(t, got, "10.10.0.0/24 via <nil> src 10.10.0.2", "the connected route is replaced")

	_, err = e.invoke(skel.CmdCheck, "c1", pt.WithPrev(t, conf, res))
	assert.NoError(t, err)

	// The result is what the kernel has: the MTU on both ends, the container's MAC,
	// both addresses on eth0.
	cont := pt.AttrsIn(t, e.cont, "eth0")
	require.NotNil(t, cont, "eth0 in the container")
	assert.Equal(t, 1400, cont.MTU)
	assert.Equal(t, res.Interfaces[1].Mac, cont.HardwareAddr.String())
	hostEnd := pt.AttrsIn(t, e.host, res.Interfaces[0].Name)
	require.NotNil(t, hostEnd, "the host end %s", res.Interfaces[0].Name)
	assert.Equal(t, 1400, hostEnd.MTU)
	assert.Equal(t, res.Interfaces[0].Mac, hostEnd.HardwareAddr.String())
	have := pt.AddrsIn(t, e.cont, "eth0")
	for _, ip := range res.IPs {
		assert.Contains(t, have, ip.Address.String(), "the reported address is on eth0")
	}
}

func TestMasqueradeFollowsThePerFamilyKeys(t *testing.T) {
	pt.ForEachBackend(t, func(t *testing.T, backend string) {
		t.Parallel()
		e := newEnv(t)
		conf := e.config(t, map[string]any{"ipMasq": true, "ipMasqIPv6": false, "ipMasqBackend": backend})
		res := e.add(t, conf)
		rs := e.ruleset(t)
		assert.Contains(t, rs, "10.10.0.2")
		assert.NotContains(t, rs, "fd10::2")
		_, err := e.invoke(skel.CmdCheck, "c1", pt.WithPrev(t, conf, res))
		assert.NoError(t, err)
		_, err = e.invoke(skel.CmdDel, "c1", conf)
		require.NoError(t, err)
		assert.NotContains(t, e.ruleset(t), "10.10.0.2")
		assert.Empty(t, e.reservations(t))
	})
}

func TestDelTwiceSucceeds(t *testing.T) {
	e := newEnv(t)
	conf := e.config(t, map[string]any{"ipMasq": true})
	res := e.add(t, conf)
	for i := 0; i < 2; i++ {
		_, err := e.invoke(skel.CmdDel, "c1", conf)
		require.NoError(t, err, "DEL %d", i+1)
	}
	assert.Equal(t, []string{"lo"}, e.links(t, e.cont))
	assert.Equal(t, []string{"lo"}, e.links(t, e.host))
	assert.Empty(t, e.reservations(t))
	assert.NotContains(t, e.ruleset(t), "10.10.0.2", "the masquerade is gone")
	_, err := e.invoke(skel.CmdCheck, "c1", pt.WithPrev(t, conf, res))
	assert.Error(t, err, "CHECK after DEL")
}

func TestDelWithNetnsGoneLeavesNoMasqueradeState(t *testing.T) {
	pt.ForEachBackend(t, func(t *testing.T, backend string) {
		t.Parallel()
		e := newEnv(t)
		conf := e.config(t, map[string]any{"ipMasq": true, "ipMasqBackend": backend})
		e.add(t, conf)
		require.Contains(t, e.ruleset(t), "10.10.0.2")
		// The runtime already removed the sandbox (and the veth with it). The
		// closed namespace's /proc fd path could be reused by another test's file,
		// so the DEL gets a path that surely does not exist.
		e.cont.Close()
		e.netns = filepath.Join(t.TempDir(), "gone")
		_, err := e.invoke(skel.CmdDel, "c1", conf)
		require.NoError(t, err)
		rs := e.ruleset(t)
		assert.NotContains(t, rs, "10.10.0.2")
		assert.NotContains(t, rs, "fd10::2")
		assert.Empty(t, e.reservations(t))
	})
}

func TestFailedAddLeavesNothingBehind(t *testing.T) {
	e := newEnv(t)
	conf := e.config(t, map[string]any{"ipMasq": true, "ipMasqBackend": "nftables"})
	// A route through a gateway the container cannot reach fails the ADD after IPAM,
	// the veth and the masquerade were set up.
	var c map[string]any
	require.NoError(t, json.Unmarshal(conf, &c))
	c["ipam"].(map[string]any)["routes"] = []map[string]string{{"dst": "192.168.0.0/16", "gw": "10.99.0.1"}}
	conf, err := json.Marshal(c)
	require.NoError(t, err)

	_, err = e.invoke(skel.CmdAdd, "c1", conf)
	require.ErrorContains(t, err, "192.168.0.0/16", "fails at the route, after everything else was set up")
	assert.Equal(t, []string{"lo"}, e.links(t, e.cont))
	assert.Equal(t, []string{"lo"}, e.links(t, e.host))
	assert.Empty(t, e.reservations(t))
	rs := e.ruleset(t)
	assert.NotContains(t, rs, "10.10.0.2")
	assert.NotContains(t, rs, "id=c1")
}

func TestCheckFailsWhenARouteWasRemovedByHand(t *testing.T) {
	e := newEnv(t)
	conf := e.config(t, nil, "10.10.0.0/24")
	res := e.add(t, conf)
	h := e.cont.Handle(t)
	l, err := h.LinkByName("eth0")
	require.NoError(t, err)
	_, subnet, _ := net.ParseCIDR("10.10.0.0/24")
	require.NoError(t, h.RouteDel(&netlink.Route{LinkIndex: l.Attrs().Index, Dst: subnet, Gw: net.ParseIP("10.10.0.1")}))
	_, err = e.invoke(skel.CmdCheck, "c1", pt.WithPrev(t, conf, res))
	assert.ErrorContains(t, err, "10.10.0.0/24")
}

func TestGCRemovesStaleMasqueradeAndReservations(t *testing.T) {
	e := newEnv(t)
	conf := e.config(t, map[string]any{"ipMasq": true, "ipMasqBackend": "nftables"})
	res := e.add(t, conf)
	// While the attachment is valid, GC keeps it whole.
	keep := pt.WithKeys(t, conf, map[string]any{"cni.dev/valid-attachments": []skel.Attachment{{ContainerID: "c1", IfName: "eth0"}}})
	_, err := e.invoke(skel.CmdGC, "", keep)
	require.NoError(t, err)
	assert.Contains(t, e.ruleset(t), "10.10.0.2", "GC keeps a valid attachment's masquerade")
	assert.Len(t, e.reservations(t), 2, "and its addresses")
	_, err = e.invoke(skel.CmdCheck, "c1", pt.WithPrev(t, conf, res))
	require.NoError(t, err, "CHECK after a GC that keeps it")

	gcConf := pt.WithKeys(t, conf, map[string]any{"cni.dev/valid-attachments": []skel.Attachment{}})
	_, err = e.invoke(skel.CmdGC, "", gcConf)
	require.NoError(t, err)
	assert.NotContains(t, e.ruleset(t), "10.10.0.2")
	assert.Empty(t, e.reservations(t))
}

func TestStatusAsksIPAM(t *testing.T) {
	e := newEnv(t)
	_, err := e.invoke(skel.CmdStatus, "", e.config(t, nil))
	assert.NoError(t, err)
}

func TestConfigErrorsNameTheKey(t *testing.T) {
	e := newEnv(t)
	for _, tc := range []struct {
		name  string
		patch map[string]any
		want  string
	}{
		{"mtu too small", map[string]any{"mtu": 10}, "mtu"},
		{"unknown backend", map[string]any{"ipMasq": true, "ipMasqBackend": "pf"}, "ipMasqBackend"},
		{"no ipam", map[string]any{"ipam": map[string]any{}}, "ipam"},
		{"wrong type", map[string]any{"ipMasq": "yes"}, "ipMasq"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := e.invoke(skel.CmdAdd, "c1", e.config(t, tc.patch))
			var ce *cnierror.Error
			require.ErrorAs(t, err, &ce)
			assert.Equal(t, cnierror.CodeInvalidConfig, ce.Code)
			assert.Contains(t, ce.Msg, tc.want)
			assert.Equal(t, []string{"lo"}, e.links(t, e.host), "no host end left")
			assert.Empty(t, e.reservations(t), "no address reserved")
		})
	}
	assert.Equal(t, []string{"lo"}, e.links(t, e.cont))
}

func TestAddDelInEverySpecVersion(t *testing.T) {
	for _, v := range version.All() {
		t.Run(v, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			conf := pt.WithKeys(t, e.config(t, nil, "10.10.0.0/24"), map[string]any{"cniVersion": v})
			res, err := e.invoke(skel.CmdAdd, "c1", conf)
			require.NoError(t, err)
			assert.Equal(t, v, res.CNIVersion)
			require.NotEmpty(t, res.IPs)
			assert.Equal(t, "10.10.0.2/24", res.IPs[0].Address.String())
			if version.AtLeast(v, "0.4.0") {
				_, err = e.invoke(skel.CmdCheck, "c1", pt.WithPrev(t, conf, res))
				assert.NoError(t, err)
			}
			_, err = e.invoke(skel.CmdDel, "c1", conf)
			require.NoError(t, err)
			assert.Equal(t, []string{"lo"}, e.links(t, e.cont))
			assert.Equal(t, []string{"lo"}, e.links(t, e.host))
			assert.Empty(t, e.reservations(t))
		})
	}
}
