package bridge_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/google/nftables"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netlink/nl"

	"github.com/cnikit/cni/internal/core/cnierror"
	"github.com/cnikit/cni/internal/host/masq"
	"github.com/cnikit/cni/internal/host/netfilter"
	"github.com/cnikit/cni/internal/spec/skel"
	"github.com/cnikit/cni/internal/testbed/kernelfeature"
	pt "github.com/cnikit/cni/internal/testbed/plugintest"
	"github.com/cnikit/cni/internal/testbed/testns"
)

func TestDelTwiceSucceeds(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	conf := w.conf(map[string]any{"ipMasq": true, "macspoofchk": true})
	c := w.add(conf)
	require.NotEmpty(t, w.reservations())
	require.NoError(t, w.del(c, conf))
	require.NoError(t, w.del(c, conf))
	assert.Empty(t, w.reservations())
	assert.Empty(t, hostVeths(w.hostLinks()))
	_, err := c.ns.Handle(t).LinkByName("eth0")
	assert.Error(t, err)
	assert.Zero(t, w.spoofRules(), "the spoof-check rules are gone")
	assert.False(t, w.masqPresent(c, netfilter.NFTables), "the masquerade is gone")
	assert.Error(t, w.check(c, conf), "CHECK after DEL")
}

// masqPresent asks the masq package whether the attachment's rules are in the host.
func (w *world) masqPresent(c *container, backend netfilter.Backend) bool {
	att := masq.Attachment{Network: "testnet", ContainerID: c.id, IfName: "eth0"}
	for _, ip := range c.res.IPs {
		att.IPs = append(att.IPs, ip.Address)
	}
	var err error
	w.host.Run(w.t, func() error {
		err = masq.Check(context.Background(), att, masq.Options{Backend: backend, IPv4: true, IPv6: true})
		return nil
	})
	return err == nil
}

// spoofRules counts the rules in the host's spoof-check table (0 when it is absent).
func (w *world) spoofRules() int {
	n := 0
	w.host.Run(w.t, func() error {
		conn, err := nftables.New()
		if err != nil {
			return err
		}
		chains, err := conn.ListChainsOfTableFamily(nftables.TableFamilyBridge)
		if err != nil {
			return err
		}
		for _, ch := range chains {
			rules, err := conn.GetRules(ch.Table, ch)
			if err != nil {
				return err
			}
			n += len(rules)
		}
		return nil
	})
	return n
}

func TestDelWithTheNetnsGoneRemovesIPsMasqueradeAndSpoofCheck(t *testing.T) {
	t.Parallel()
	for _, backend := range []netfilter.Backend{netfilter.NFTables, netfilter.IPTables} {
		t.Run(string(backend), func(t *testing.T) {
			if backend == netfilter.IPTables {
				testns.RequireFirewallBinaries(t, "the iptables masquerade backend's own test")
			}
			t.Parallel()
			w := newWorld(t)
			conf := w.conf(map[string]any{"ipMasq": true, "ipMasqBackend": string(backend), "macspoofchk": true})
			c := w.add(conf)
			require.True(t, w.masqPresent(c, backend))
			require.Equal(t, 3, w.spoofRules(), "jump, return-for-own-MAC and drop")
			// The namespace is destroyed; its old /proc/<pid>/fd path could be reused by
			// another test's fd, so DEL gets a path that is certain not to exist.
			c.ns.Close()
			_, err := w.invoke("DEL", c.id, t.TempDir()+"/netns-gone", "eth0", conf)
			require.NoError(t, err)
			assert.Empty(t, w.reservations())
			assert.False(t, w.masqPresent(c, backend), "masquerade removed without addresses (#810)")
			assert.Zero(t, w.spoofRules())
			_, err = w.invoke("DEL", c.id, "", "eth0", conf)
			assert.NoError(t, err, "DEL with an empty CNI_NETNS")
		})
	}
}

func TestMasqueradeFamiliesFollowTheOverrides(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	conf := w.conf(map[string]any{"ipMasq": true, "ipMasqIPv6": false, "ipMasqBackend": "nftables",
		"ipam": w.hostLocal("10.79.0.0/24", "fd79::/64")})
	c := w.add(conf)
	check := func(v4, v6 bool) error {
		att := masq.Attachment{Network: "testnet", ContainerID: c.id, IfName: "eth0"}
		for _, ip := range c.res.IPs {
			att.IPs = append(att.IPs, ip.Address)
		}
		var err error
		w.host.Run(t, func() error {
			err = masq.Check(context.Background(), att, masq.Options{Backend: netfilter.NFTables, IPv4: v4, IPv6: v6})
			return nil
		})
		return err
	}
	assert.NoError(t, check(true, false), "IPv4 is masqueraded")
	assert.Error(t, check(false, true), "IPv6 is not")
	assert.NoError(t, w.check(c, conf))
}

func TestSpoofCheckDropsOnlyForeignSourceMACs(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	conf := w.conf(map[string]any{"macspoofchk": true, "isGateway": true})
	a, b := w.add(conf), w.add(conf)
	require.NoError(t, ping(t, a.ns, b.res.IPs[0].Address.Addr().String()))
	// Changing the container's MAC by hand is what the check exists to stop.
	h := a.ns.Handle(t)
	l := linkIn(t, a.ns, "eth0")
	mac := append([]byte(nil), l.Attrs().HardwareAddr...)
	mac[5] ^= 0x55
	require.NoError(t, h.LinkSetHardwareAddr(l, mac))
	assert.Error(t, ping(t, a.ns, b.res.IPs[0].Address.Addr().String()))
	assert.NoError(t, w.check(b, conf))
}

func TestGCRemovesStateOfAttachmentsNotInUse(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	conf := w.conf(map[string]any{"ipMasq": true, "ipMasqBackend": "nftables", "macspoofchk": true})
	keep, drop := w.add(conf), w.add(conf)
	require.Equal(t, 6, w.spoofRules())

	gcConf := w.conf(map[string]any{"ipMasq": true, "ipMasqBackend": "nftables", "macspoofchk": true,
		"cni.dev/valid-attachments": []skel.Attachment{{ContainerID: keep.id, IfName: "eth0"}}})
	_, err := w.invoke("GC", "", "", "", gcConf)
	require.NoError(t, err)
	assert.Equal(t, 3, w.spoofRules())
	assert.True(t, w.masqPresent(keep, netfilter.NFTables))
	assert.False(t, w.masqPresent(drop, netfilter.NFTables))
	assert.Len(t, w.reservations(), 1, "host-local released the dropped attachment's IP")
	assert.NoError(t, w.check(keep, conf))

	_, err = w.invoke("STATUS", "", "", "", conf)
	assert.NoError(t, err)
}

func TestAddFailingHalfwayLeavesNothingBehind(t *testing.T) {
	t.Parallel()
	t.Run("ipam exhausted", func(t *testing.T) {
		t.Parallel()
		w := newWorld(t)
		conf := w.conf(map[string]any{"ipMasq": true, "macspoofchk": true, "ipam": map[string]any{
			"type": "host-local", "dataDir": w.dataDir,
			"ranges": []any{[]any{map[string]any{"subnet": "10.80.0.0/30"}}},
		}})
		w.add(conf) // takes the only usable address
		before := hostVeths(w.hostLinks())
		rules := w.spoofRules()
		ns := testns.New(t)
		_, err := w.invoke("ADD", "exhausted", ns.Path, "eth0", conf)
		require.Error(t, err)
		assert.Equal(t, before, hostVeths(w.hostLinks()), "no veth left")
		assert.Equal(t, rules, w.spoofRules(), "no spoof-check rules left")
		_, err = ns.Handle(t).LinkByName("eth0")
		assert.Error(t, err)
		assert.Len(t, w.reservations(), 1, "only the first container's address")
	})
	t.Run("CNI_IFNAME taken", func(t *testing.T) {
		t.Parallel()
		w := newWorld(t)
		ns := testns.New(t)
		clash := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: "eth0"}, PeerName: "other0"}
		require.NoError(t, ns.Handle(t).LinkAdd(clash))
		_, err := w.invoke("ADD", "clash", ns.Path, "eth0", w.conf(nil))
		require.Error(t, err)
		assert.Contains(t, err.Error(), "already exists")
		assert.Empty(t, hostVeths(w.hostLinks()), "no host veth")
		assert.Empty(t, w.reservations(), "no IP reserved")
		assert.Equal(t, []string{"eth0", "lo", "other0"}, pt.Links(t, ns), "the clashing link is untouched")
	})
	t.Run("netns missing", func(t *testing.T) {
		t.Parallel()
		w := newWorld(t)
		_, err := w.invoke("ADD", "nons", t.TempDir()+"/gone", "eth0", w.conf(nil))
		require.Error(t, err)
		assert.Empty(t, w.reservations())
		assert.Empty(t, hostVeths(w.hostLinks()), "no host veth")
	})
}

func TestCheckFailsWhenStateIsRemovedByHand(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name   string
		remove func(t *testing.T, w *world, c *container)
	}{
		{"container veth", func(t *testing.T, w *world, c *container) {
			require.NoError(t, c.ns.Handle(t).LinkDel(linkIn(t, c.ns, "eth0")))
		}},
		{"address", func(t *testing.T, w *world, c *container) {
			a, err := netlink.ParseAddr(c.res.IPs[0].Address.String())
			require.NoError(t, err)
			require.NoError(t, c.ns.Handle(t).AddrDel(linkIn(t, c.ns, "eth0"), a))
		}},
		{"default route", func(t *testing.T, w *world, c *container) {
			l := linkIn(t, c.ns, "eth0")
			routes, err := c.ns.Handle(t).RouteList(l, netlink.FAMILY_V4)
			require.NoError(t, err)
			for _, r := range routes {
				if r.Gw != nil {
					require.NoError(t, c.ns.Handle(t).RouteDel(&r))
				}
			}
		}},
		{"bridge port", func(t *testing.T, w *world, c *container) {
			require.NoError(t, w.host.Handle(t).LinkSetNoMaster(linkIn(t, w.host, c.res.Interfaces[1].Name)))
		}},
		{"masquerade", func(t *testing.T, w *world, c *container) {
			w.host.Run(t, func() error { return masq.Teardown(context.Background(), "testnet", c.id, "eth0") })
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			w := newWorld(t)
			conf := w.conf(map[string]any{"isDefaultGateway": true, "ipMasq": true, "ipMasqBackend": "nftables"})
			c := w.add(conf)
			require.NoError(t, w.check(c, conf))
			tc.remove(t, w, c)
			assert.Error(t, w.check(c, conf))
		})
	}
}

func TestCheckNeedsPrevResult(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	conf := w.conf(nil)
	c := w.add(conf)
	_, err := w.invoke("CHECK", c.id, c.ns.Path, "eth0", conf)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "prevResult")
	assert.Equal(t, cnierror.CodeInvalidConfig, code(err))
}

func TestVLANAccessPortAndGateway(t *testing.T) {
	kernelfeature.Require(t, kernelfeature.BridgeVLANFiltering)
	t.Parallel()
	w := newWorld(t)
	conf := w.conf(map[string]any{"vlan": 100, "isGateway": true})
	a, b := w.add(conf), w.add(conf)
	require.Len(t, a.res.Interfaces, 4, "bridge, host veth, container, vlan gateway")
	assert.Equal(t, "cnibr0.100", a.res.Interfaces[3].Name)
	vids := portVIDs(t, w, a)
	assert.Equal(t, []uint16{100}, vids, "access VLAN only, default VLAN removed")
	assert.NoError(t, ping(t, a.ns, b.res.IPs[0].Address.Addr().String()))
	assert.NoError(t, ping(t, a.ns, "10.77.0.1"))
	assert.NoError(t, w.check(a, conf))
}

func TestVLANTrunkAndPreservedDefault(t *testing.T) {
	kernelfeature.Require(t, kernelfeature.BridgeVLANFiltering)
	t.Parallel()
	w := newWorld(t)
	conf := w.conf(map[string]any{"preserveDefaultVlan": true, "ipam": map[string]any{},
		"vlanTrunk": []any{map[string]any{"id": 7}, map[string]any{"minID": 10, "maxID": 12}}})
	c := w.add(conf)
	vids := portVIDs(t, w, c)
	assert.ElementsMatch(t, []uint16{1, 7, 10, 11, 12}, vids)
}

// portVLANs lists the VLANs of c's host veth as "vid" for tagged ones and "vid
// native" for the untagged PVID.
func portVLANs(t *testing.T, w *world, c *container) []string {
	t.Helper()
	var out []string
	for _, v := range portVLANInfo(t, w, c) {
		s := fmt.Sprint(v.Vid)
		if v.PortVID() && v.EngressUntag() {
			s += " native"
		}
		out = append(out, s)
	}
	return out
}

// portVIDs lists the ids of the VLANs of c's host veth.
func portVIDs(t *testing.T, w *world, c *container) []uint16 {
	t.Helper()
	var vids []uint16
	for _, v := range portVLANInfo(t, w, c) {
		vids = append(vids, v.Vid)
	}
	return vids
}

// portVLANInfo is the bridge's VLAN entries of c's host veth.
func portVLANInfo(t *testing.T, w *world, c *container) []*nl.BridgeVlanInfo {
	t.Helper()
	vlans, err := w.host.Handle(t).BridgeVlanList()
	require.NoError(t, err)
	return vlans[int32(linkIn(t, w.host, c.res.Interfaces[1].Name).Attrs().Index)]
}

// vlan and vlanTrunk together make vlan the trunk's native VLAN, and a trunk alone
// keeps VLAN 1 native, as the reference since v1.8.0 (upstream row P13); the default
// VLAN is dropped otherwise, preserveDefaultVlan being false by default (row P14).
func TestVLANTrunkNativeVLAN(t *testing.T) {
	kernelfeature.Require(t, kernelfeature.BridgeVLANFiltering)
	t.Parallel()
	trunk := []any{map[string]any{"id": 7}, map[string]any{"minID": 10, "maxID": 11}}
	for _, tc := range []struct {
		name string
		keys map[string]any
		want []string
	}{
		{"vlan and trunk", map[string]any{"vlan": 5, "vlanTrunk": trunk}, []string{"5 native", "7", "10", "11"}},
		{"trunk alone", map[string]any{"vlanTrunk": trunk}, []string{"1 native", "7", "10", "11"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorld(t)
			tc.keys["ipam"] = map[string]any{}
			c := w.add(w.conf(tc.keys))
			assert.ElementsMatch(t, tc.want, portVLANs(t, w, c))
		})
	}
}
