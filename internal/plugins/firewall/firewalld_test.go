package firewall_test

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cnikit/cni/internal/core/cnierror"
	"github.com/cnikit/cni/internal/plugins/firewall/firewalldtest"
	"github.com/cnikit/cni/internal/spec/skel"
)

func TestFirewalldIsChosenWhenItOwnsItsName(t *testing.T) {
	e := newNFTEnv(t)
	bus := firewalldtest.StartPrivateBus(t)
	fake := firewalldtest.Start(t, bus)
	env := []string{"DBUS_SYSTEM_BUS_ADDRESS=" + bus}
	c := e.add(e.conflist(netOpts{name: "fwd", bridge: "br-fwd", subnets: []string{"10.30.0.0/24", "fd30::/64"}}), "c-fwd")
	var ip6 string
	for _, ip := range c.res.IPs {
		if ip.Address.Addr().Is6() {
			ip6 = ip.Address.Addr().String()
		}
	}
	src4, src6 := c.ip4()+"/32", ip6+"/128"
	conf := fwConf(t, "fwd", nil, c.res)

	_, err := e.invoke(skel.CmdAdd, conf, c, env...)
	require.NoError(t, err)
	assert.Equal(t, []string{"addSource trusted " + src4, "addSource trusted " + src6}, fake.Calls())
	assert.NotContains(t, e.ruleset(), "c-fwd", "the firewalld backend adds no rules of its own")

	_, err = e.invoke(skel.CmdAdd, conf, c, env...)
	require.NoError(t, err, "ZONE_ALREADY_SET must be tolerated")
	_, err = e.invoke(skel.CmdCheck, conf, c, env...)
	require.NoError(t, err)

	_, err = e.invoke(skel.CmdDel, conf, c, env...)
	require.NoError(t, err)
	_, err = e.invoke(skel.CmdDel, conf, c, env...)
	require.NoError(t, err, "DEL twice must succeed (UNKNOWN_SOURCE tolerated)")
	calls := fake.Calls()
	assert.Equal(t, []string{"removeSource trusted " + src4, "removeSource trusted " + src6}, calls[len(calls)-4:len(calls)-2])

	_, err = e.invoke(skel.CmdCheck, conf, c, env...)
	require.Error(t, err, "CHECK must notice the sources are gone")
	assert.Contains(t, err.Error(), `want "trusted"`)
}

func TestFirewalldZoneConflictFailsAndRollsBack(t *testing.T) {
	e := newNFTEnv(t)
	bus := firewalldtest.StartPrivateBus(t)
	fake := firewalldtest.Start(t, bus)
	c := e.add(e.conflist(netOpts{name: "zc", bridge: "br-zc", subnets: []string{"10.31.0.0/24", "fd31::/64"}}), "c-zc")
	var ip6 string
	for _, ip := range c.res.IPs {
		if ip.Address.Addr().Is6() {
			ip6 = ip.Address.Addr().String()
		}
	}
	fake.Bind(ip6+"/128", "public") // someone else's binding: the second add conflicts

	conf := fwConf(t, "zc", map[string]any{"backend": "firewalld", "firewalldZone": "internal"}, c.res)
	_, err := e.invoke(skel.CmdAdd, conf, c, "DBUS_SYSTEM_BUS_ADDRESS="+bus)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "ZONE_CONFLICT")
	assert.Equal(t, []string{"addSource internal " + c.ip4() + "/32", "addSource internal " + ip6 + "/128",
		"removeSource internal " + c.ip4() + "/32"}, fake.Calls(), "the first source must be rolled back")
}

// Without firewalld on the bus, the node's rule backend is used: nftables in a
// namespace where the host keeps no iptables rules.
func TestRuleBackendIsChosenWhenFirewalldIsNotRunning(t *testing.T) {
	e := newNFTEnv(t)
	bus := firewalldtest.StartPrivateBus(t) // a bus, but nobody owns firewalld's name
	for _, tc := range []struct{ name, addr string }{
		{"name not owned", bus},
		{"no bus socket", "unix:path=" + filepath.Join(t.TempDir(), "no-such-socket")},
		{"bus says nothing", firewalldtest.SilentBus(t)}, // given up after detectTimeout
	} {
		t.Run(tc.name, func(t *testing.T) {
			id := "c-" + strings.ReplaceAll(tc.name, " ", "-")
			c := e.add(e.conflist(netOpts{name: "auto", bridge: "br-auto", subnets: []string{"10.32.0.0/24"}}), id)
			_, err := e.invoke(skel.CmdAdd, fwConf(t, "auto", nil, c.res), c, "DBUS_SYSTEM_BUS_ADDRESS="+tc.addr)
			require.NoError(t, err)
			assert.Contains(t, e.ruleset(), tag("auto", id))
		})
	}
}

// firewalld's ingress policy goes to the node's rule backend: nftables here, where the
// reference would exec iptables whatever the node has.
func TestFirewalldIngressPolicyUsesTheNodesRuleBackend(t *testing.T) {
	e := newNFTEnv(t)
	bus := firewalldtest.StartPrivateBus(t)
	firewalldtest.Start(t, bus)
	env := "DBUS_SYSTEM_BUS_ADDRESS=" + bus
	c := e.add(e.conflist(netOpts{name: "fwdiso", bridge: "br-fwdiso", subnets: []string{"10.34.0.0/24"}}), "c-fwdiso")
	conf := fwConf(t, "fwdiso", map[string]any{"ingressPolicy": "same-bridge"}, c.res)
	_, err := e.invoke(skel.CmdAdd, conf, c, env)
	require.NoError(t, err)
	rs := e.ruleset()
	assert.Contains(t, rs, "set policed\n\telement \"br-fwdiso\"\n")
	assert.NotContains(t, rs, "c-fwdiso", "no rules of the attachment: firewalld lets it through")
	assert.NotContains(t, rs, "CNI-ISOLATION")
	_, err = e.invoke(skel.CmdCheck, conf, c, env)
	require.NoError(t, err)
}

func TestFirewalldBackendWithoutBusIsTryAgainLaterOnAddButDelSucceeds(t *testing.T) {
	e := newNFTEnv(t)
	c := e.add(e.conflist(netOpts{name: "nobus", bridge: "br-nobus", subnets: []string{"10.33.0.0/24"}}), "c-nobus")
	env := "DBUS_SYSTEM_BUS_ADDRESS=unix:path=" + filepath.Join(t.TempDir(), "gone")
	conf := fwConf(t, "nobus", map[string]any{"backend": "firewalld"}, c.res)
	_, err := e.invoke(skel.CmdAdd, conf, c, env)
	require.Error(t, err)
	assert.Equal(t, uint(cnierror.CodeTryAgainLater), cnierror.Code(err))
	_, err = e.invoke(skel.CmdDel, conf, c, env)
	require.NoError(t, err, "a firewalld that is not running holds no runtime sources to remove")
}
