package bridge_test

import (
	"net"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/vishvananda/netlink"

	"github.com/cnikit/cni/internal/core/cnierror"
	pt "github.com/cnikit/cni/internal/testbed/plugintest"
	"github.com/cnikit/cni/internal/testbed/testns"
)

func TestTwoContainersReachEachOtherAndTheGateway(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	conf := w.conf(map[string]any{"isGateway": true})
	a, b := w.add(conf), w.add(conf)

	for _, c := range []*container{a, b} {
		require.Len(t, c.res.Interfaces, 3)
		assert.Equal(t, "cnibr0", c.res.Interfaces[0].Name)
		assert.Regexp(t, `^veth[0-9a-f]{8}$`, c.res.Interfaces[1].Name)
		assert.Equal(t, "eth0", c.res.Interfaces[2].Name)
		assert.Equal(t, c.ns.Path, c.res.Interfaces[2].Sandbox)
		require.Len(t, c.res.IPs, 1)
		require.NotNil(t, c.res.IPs[0].Interface)
		assert.Equal(t, 2, *c.res.IPs[0].Interface)
		assert.Equal(t, "10.77.0.1", c.res.IPs[0].Gateway.String())
		mac := linkIn(t, c.ns, "eth0").Attrs().HardwareAddr.String()
		assert.Equal(t, mac, c.res.Interfaces[2].Mac)
	}
	brAddrs, err := w.host.Handle(t).AddrList(linkIn(t, w.host, "cnibr0"), netlink.FAMILY_V4)
	require.NoError(t, err)
	require.Len(t, brAddrs, 1)
	assert.Equal(t, "10.77.0.1/24", brAddrs[0].IPNet.String())
	assert.Equal(t, "1", sysctlIn(t, w.host, "net/ipv4/ip_forward"))

	assert.NoError(t, ping(t, a.ns, b.res.IPs[0].Address.Addr().String()))
	assert.NoError(t, ping(t, b.ns, a.res.IPs[0].Address.Addr().String()))
	assert.NoError(t, ping(t, a.ns, "10.77.0.1"))
	assert.NoError(t, w.check(a, conf))
	assert.NoError(t, w.check(b, conf))
}

// The bridge's MAC in each result is the one it has: pinMAC's, read once after the port
// joined (the first port gives a fresh bridge its MAC), not looked up again at the end.
func TestResultsGiveTheBridgesMACAsItIs(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	conf := w.conf(map[string]any{"isGateway": true})
	for range 3 {
		c := w.add(conf)
		br := linkIn(t, w.host, "cnibr0")
		assert.Equal(t, br.Attrs().HardwareAddr.String(), c.res.Interfaces[0].Mac)
		assert.NotEqual(t, "00:00:00:00:00:00", c.res.Interfaces[0].Mac)
	}
}

func TestDualStackContainersReachEachOtherOverBothFamilies(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	conf := w.conf(map[string]any{"isDefaultGateway": true, "ipam": w.hostLocal("10.78.0.0/24", "fd78::/64")})
	a, b := w.add(conf), w.add(conf)
	require.Len(t, a.res.IPs, 2)
	assert.Equal(t, "fd78::1", a.res.IPs[1].Gateway.String())
	assert.Equal(t, "0", sysctlIn(t, a.ns, "net/ipv6/conf/eth0/accept_dad"), "DAD off unless enabledad")
	for _, ip := range b.res.IPs {
		assert.NoError(t, ping(t, a.ns, ip.Address.Addr().String()))
	}
	assert.NoError(t, ping(t, a.ns, "fd78::1"))
	routes, err := a.ns.Handle(t).RouteList(nil, netlink.FAMILY_ALL)
	require.NoError(t, err)
	var defaults []string
	for _, r := range routes {
		if r.Dst != nil && r.Dst.IP.IsUnspecified() {
			defaults = append(defaults, r.Gw.String())
		}
	}
	assert.ElementsMatch(t, []string{"10.78.0.1", "fd78::1"}, defaults)
	assert.NoError(t, w.check(a, conf))
}

func TestKeysAreObservedInTheKernel(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name  string
		keys  map[string]any
		args  []string
		check func(t *testing.T, w *world, c *container)
	}{
		{"mtu", map[string]any{"mtu": 1400}, nil, func(t *testing.T, w *world, c *container) {
			assert.Equal(t, 1400, linkIn(t, c.ns, "eth0").Attrs().MTU)
			assert.Equal(t, 1400, linkIn(t, w.host, c.res.Interfaces[1].Name).Attrs().MTU)
			assert.Equal(t, 1400, linkIn(t, w.host, "cnibr0").Attrs().MTU)
		}},
		{"hairpinMode", map[string]any{"hairpinMode": true}, nil, func(t *testing.T, w *world, c *container) {
			pi, err := w.host.Handle(t).LinkGetProtinfo(linkIn(t, w.host, c.res.Interfaces[1].Name))
			require.NoError(t, err)
			assert.True(t, pi.Hairpin)
			assert.False(t, pi.Isolated)
		}},
		{"portIsolation", map[string]any{"portIsolation": true}, nil, func(t *testing.T, w *world, c *container) {
			pi, err := w.host.Handle(t).LinkGetProtinfo(linkIn(t, w.host, c.res.Interfaces[1].Name))
			require.NoError(t, err)
			assert.True(t, pi.Isolated)
			assert.False(t, pi.Hairpin)
		}},
		{"promiscMode", map[string]any{"promiscMode": true}, nil, func(t *testing.T, w *world, c *container) {
			assert.NotZero(t, linkIn(t, w.host, "cnibr0").Attrs().Promisc)
		}},
		{"no promiscMode", nil, nil, func(t *testing.T, w *world, c *container) {
			assert.Zero(t, linkIn(t, w.host, "cnibr0").Attrs().Promisc)
		}},
		{"isDefaultGateway", map[string]any{"isDefaultGateway": true}, nil, func(t *testing.T, w *world, c *container) {
			routes, err := c.ns.Handle(t).RouteList(nil, netlink.FAMILY_V4)
			require.NoError(t, err)
			found := false
			for _, r := range routes {
				found = found || (r.Dst != nil && r.Dst.String() == "0.0.0.0/0" && r.Gw.String() == "10.77.0.1")
			}
			assert.True(t, found, "default route via 10.77.0.1 in %v", routes)
			assert.NoError(t, ping(t, c.ns, "10.77.0.1"))
		}},
		{"no isGateway", nil, nil, func(t *testing.T, w *world, c *container) {
			addrs, err := w.host.Handle(t).AddrList(linkIn(t, w.host, "cnibr0"), netlink.FAMILY_V4)
			require.NoError(t, err)
			assert.Empty(t, addrs, "the bridge carries no gateway address")
		}},
		{"enabledad", map[string]any{"enabledad": true, "ipam": nil}, nil, func(t *testing.T, w *world, c *container) {
			assert.Equal(t, "1", sysctlIn(t, c.ns, "net/ipv6/conf/eth0/accept_dad"))
			assert.Equal(t, "1", sysctlIn(t, c.ns, "net/ipv6/conf/eth0/enhanced_dad"))
		}},
		{"no enabledad", nil, nil, func(t *testing.T, w *world, c *container) {
			assert.Equal(t, "0", sysctlIn(t, c.ns, "net/ipv6/conf/eth0/accept_dad"))
			assert.Equal(t, "1", sysctlIn(t, c.ns, "net/ipv4/conf/eth0/arp_notify"))
		}},
		{"runtimeConfig.mac", map[string]any{"runtimeConfig": map[string]any{"mac": "0a:58:0a:4d:00:99"}},
			[]string{"IgnoreUnknown=1", "MAC=0a:58:0a:4d:00:01"}, func(t *testing.T, w *world, c *container) {
				assert.Equal(t, "0a:58:0a:4d:00:99", linkIn(t, c.ns, "eth0").Attrs().HardwareAddr.String())
				assert.Equal(t, "0a:58:0a:4d:00:99", c.res.Interfaces[2].Mac)
			}},
		{"args.cni.mac", map[string]any{"args": map[string]any{"cni": map[string]any{"mac": "0a:58:0a:4d:00:98"}}},
			[]string{"IgnoreUnknown=1", "MAC=0a:58:0a:4d:00:01"}, func(t *testing.T, w *world, c *container) {
				assert.Equal(t, "0a:58:0a:4d:00:98", linkIn(t, c.ns, "eth0").Attrs().HardwareAddr.String())
			}},
		{"CNI_ARGS MAC", nil, []string{"IgnoreUnknown=1", "MAC=0a:58:0a:4d:00:97", "K8S_POD_NAME=x"},
			func(t *testing.T, w *world, c *container) {
				assert.Equal(t, "0a:58:0a:4d:00:97", linkIn(t, c.ns, "eth0").Attrs().HardwareAddr.String())
			}},
		{"disableContainerInterface", map[string]any{"disableContainerInterface": true, "ipam": map[string]any{}}, nil,
			func(t *testing.T, w *world, c *container) {
				assert.Zero(t, linkIn(t, c.ns, "eth0").Attrs().Flags&net.FlagUp, "container interface left down")
				assert.Empty(t, c.res.IPs)
			}},
		{"ipam empty (L2 only)", map[string]any{"ipam": map[string]any{}}, nil, func(t *testing.T, w *world, c *container) {
			l := linkIn(t, c.ns, "eth0")
			assert.NotZero(t, l.Attrs().Flags&net.FlagUp)
			addrs, err := c.ns.Handle(t).AddrList(l, netlink.FAMILY_V4)
			require.NoError(t, err)
			assert.Empty(t, addrs)
			assert.Empty(t, c.res.IPs)
		}},
		{"dns", map[string]any{"dns": map[string]any{"nameservers": []string{"10.77.0.53"}, "search": []string{"svc"}}}, nil,
			func(t *testing.T, w *world, c *container) {
				assert.Equal(t, []string{"10.77.0.53"}, c.res.DNS.Nameservers)
				assert.Equal(t, []string{"svc"}, c.res.DNS.Search)
			}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			w := newWorld(t)
			conf := w.conf(tc.keys)
			c := w.add(conf, tc.args...)
			tc.check(t, w, c)
			assert.NoError(t, w.check(c, conf))
			assert.NoError(t, w.del(c, conf))
		})
	}
}

func TestForceAddressReplacesADifferentBridgeAddress(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	h := w.host.Handle(t)
	br := &netlink.Bridge{LinkAttrs: netlink.LinkAttrs{Name: "cnibr0"}}
	require.NoError(t, h.LinkAdd(br))
	old, _ := netlink.ParseAddr("10.99.0.1/24")
	require.NoError(t, h.AddrAdd(br, old))

	conf := w.conf(map[string]any{"isGateway": true})
	ns := testns.New(t)
	_, err := w.invoke("ADD", "force-1", ns.Path, "eth0", conf)
	require.Error(t, err, "a different address without forceAddress fails")
	assert.Contains(t, err.Error(), "forceAddress")
	assert.Empty(t, w.reservations(), "the failed ADD released its IP")
	assert.Empty(t, hostVeths(w.hostLinks()), "the failed ADD removed its veth")
	kept, err := h.AddrList(linkIn(t, w.host, "cnibr0"), netlink.FAMILY_V4)
	require.NoError(t, err)
	require.Len(t, kept, 1, "the failed ADD left the bridge's address alone")
	assert.Equal(t, "10.99.0.1/24", kept[0].IPNet.String())

	forced := w.conf(map[string]any{"isGateway": true, "forceAddress": true})
	w.add(forced)
	addrs, err := h.AddrList(linkIn(t, w.host, "cnibr0"), netlink.FAMILY_V4)
	require.NoError(t, err)
	require.Len(t, addrs, 1)
	assert.Equal(t, "10.77.0.1/24", addrs[0].IPNet.String())
}

func TestInvalidConfigNamesTheField(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	cases := []struct {
		name  string
		keys  map[string]any
		args  []string
		field string
	}{
		{"hairpin and promisc", map[string]any{"hairpinMode": true, "promiscMode": true}, nil, "hairpinMode"},
		{"vlan too big", map[string]any{"vlan": 4095}, nil, "vlan"},
		{"vlan negative", map[string]any{"vlan": -1}, nil, "vlan"},
		{"trunk id zero", map[string]any{"vlanTrunk": []any{map[string]any{"id": 0}}}, nil, "vlanTrunk[0].id"},
		{"trunk range reversed", map[string]any{"vlanTrunk": []any{map[string]any{"minID": 20, "maxID": 10}}}, nil, "vlanTrunk[0]"},
		{"disableContainerInterface with ipam", map[string]any{"disableContainerInterface": true}, nil, "disableContainerInterface"},
		{"mtu too small", map[string]any{"mtu": 10}, nil, "mtu"},
		{"mtu wrong type", map[string]any{"mtu": "big"}, nil, "mtu"},
		{"bad runtimeConfig mac", map[string]any{"runtimeConfig": map[string]any{"mac": "zz"}}, nil, "runtimeConfig.mac"},
		{"multicast args mac", map[string]any{"args": map[string]any{"cni": map[string]any{"mac": "01:00:5e:00:00:01"}}}, nil, "args.cni.mac"},
		{"bad CNI_ARGS mac", nil, []string{"MAC=nope"}, "CNI_ARGS MAC"},
		{"bad backend", map[string]any{"ipMasq": true, "ipMasqBackend": "pf"}, nil, "ipMasqBackend"},
		{"bridge name too long", map[string]any{"bridge": "averyveryverylongbridge"}, nil, "bridge"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ns := testns.New(t)
			_, err := w.invoke("ADD", "bad-1", ns.Path, "eth0", w.conf(tc.keys), tc.args...)
			require.Error(t, err)
			assert.Equal(t, cnierror.CodeInvalidConfig, code(err), "%v", err)
			assert.Contains(t, err.Error(), tc.field)
			assert.Equal(t, []string{"lo"}, pt.Links(t, ns), "no container interface")
		})
	}
	assert.Empty(t, hostVeths(w.hostLinks()))
	assert.Empty(t, w.reservations())
	assert.Equal(t, []string{"lo"}, w.hostLinks(), "no bridge made for a refused config")
}

// TestBrokenIPAMSectionMakesNoBridge: an ipam section ADD cannot use is code 7 naming
// its field, found before the bridge is made: a bridge, unlike the veth, outlives a
// failed ADD (it may be shared by then), so the check must come first.
func TestBrokenIPAMSectionMakesNoBridge(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	cases := []struct {
		name  string
		ipam  map[string]any
		field string
	}{
		{"subnet out of range", map[string]any{"type": "host-local", "dataDir": w.dataDir,
			"ranges": []any{[]any{map[string]any{"subnet": "10.0.0.0/33"}}}}, "ipam.ranges[0]"},
		{"no ranges", map[string]any{"type": "host-local", "dataDir": w.dataDir, "ranges": []any{}}, "ipam.ranges"},
		{"bad static address", map[string]any{"type": "static",
			"addresses": []any{map[string]any{"address": "10.0.0.300/24"}}}, "ipam.addresses[0]"},
		{"type on no path", map[string]any{"type": "no-such-ipam"}, "no-such-ipam"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ns := testns.New(t)
			_, err := w.invoke("ADD", "bad-ipam", ns.Path, "eth0", w.conf(map[string]any{"ipam": tc.ipam}))
			require.Error(t, err)
			assert.Equal(t, cnierror.CodeInvalidConfig, code(err), "%v", err)
			assert.Contains(t, err.Error(), tc.field)
			assert.Equal(t, []string{"lo"}, pt.Links(t, ns), "no container interface")
		})
	}
	assert.Equal(t, []string{"lo"}, w.hostLinks(), "no bridge made for a refused ipam section")
}
