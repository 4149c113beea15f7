package vrf_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/vishvananda/netlink"

	"github.com/cnikit/cni/internal/core/cnierror"
	"github.com/cnikit/cni/internal/testbed/kernelfeature"
)

func TestTwoInterfacesShareOneVRFUntilTheLastLeaves(t *testing.T) {
	kernelfeature.Require(t, kernelfeature.VRF)
	t.Parallel()
	w := newWorld(t)
	prev1 := w.iface("net1", "10.201.0.0/16", "10.80.1.2/24")
	prev2 := w.iface("net2", "10.202.0.0/16", "10.80.2.2/24")
	c1 := conf(t, prev1, `"vrfname":"blue","table":1001`)
	c2 := conf(t, prev2, `"vrfname":"blue"`)

	res, err := w.invoke("ADD", "net1", c1)
	require.NoError(t, err)
	assert.Equal(t, prev1.IPs, res.IPs, "prevResult is passed on")
	_, err = w.invoke("ADD", "net2", c2)
	require.NoError(t, err)
	vrf, ok := w.link("blue").(*netlink.Vrf)
	require.True(t, ok, "blue is a VRF")
	assert.Equal(t, uint32(1001), vrf.Table)
	assert.Equal(t, "blue", w.masterOf("net1"))
	assert.Equal(t, "blue", w.masterOf("net2"))
	assert.Contains(t, w.routes(1001, "net1"), "10.80.1.0/24")
	assert.Contains(t, w.routes(1001, "net1"), "10.201.0.0/16 via 10.80.1.1", "the gateway route moved into the VRF table")
	assert.Contains(t, w.routes(1001, "net2"), "10.80.2.0/24")
	assert.Empty(t, w.routes(254, "net1"), "nothing of net1 is left in main")
	_, err = w.invoke("CHECK", "net1", c1)
	assert.NoError(t, err)

	_, err = w.invoke("DEL", "net1", c1)
	require.NoError(t, err)
	assert.NotNil(t, w.link("blue"), "net2 still uses the VRF")
	assert.Equal(t, "", w.masterOf("net1"))
	assert.Equal(t, "blue", w.masterOf("net2"))
	_, err = w.invoke("CHECK", "net1", c1)
	assert.ErrorContains(t, err, "not a member")

	_, err = w.invoke("DEL", "net2", c2)
	require.NoError(t, err)
	assert.Nil(t, w.link("blue"), "the last member left: the VRF is gone")
	_, err = w.invoke("DEL", "net2", c2)
	assert.NoError(t, err, "DEL twice")
}

func TestIPv6AddressesAndRoutesSurviveEnslaving(t *testing.T) {
	kernelfeature.Require(t, kernelfeature.VRF)
	t.Parallel()
	w := newWorld(t)
	prev := w.iface("net1", "10.201.0.0/16", "10.80.1.2/24", "fd80::2/64")
	_, err := w.invoke("ADD", "net1", conf(t, prev, `"vrfname":"red"`))
	require.NoError(t, err)
	addrs, err := w.cont.Handle(t).AddrList(w.link("net1"), netlink.FAMILY_V6)
	require.NoError(t, err)
	var have []string
	for _, a := range addrs {
		have = append(have, a.IPNet.String())
	}
	assert.Contains(t, have, "fd80::2/64")
	vrf := w.link("red").(*netlink.Vrf)
	assert.Contains(t, w.routes(int(vrf.Table), "net1"), "fd80::/64")
}

func TestPickedTableIsFreeOfOtherVRFsAndRules(t *testing.T) {
	kernelfeature.Require(t, kernelfeature.VRF)
	t.Parallel()
	w := newWorld(t)
	h := w.cont.Handle(t)
	require.NoError(t, h.LinkAdd(&netlink.Vrf{LinkAttrs: netlink.LinkAttrs{Name: "other"}, Table: 1}))
	rule := netlink.NewRule()
	rule.Table, rule.Mark = 2, 9
	require.NoError(t, h.RuleAdd(rule))
	prev := w.iface("net1", "10.201.0.0/16", "10.80.1.2/24")
	_, err := w.invoke("ADD", "net1", conf(t, prev, `"vrfname":"green"`))
	require.NoError(t, err)
	assert.Equal(t, uint32(3), w.link("green").(*netlink.Vrf).Table)
}

func TestExistingVRFWithAnotherTableIsRefused(t *testing.T) {
	kernelfeature.Require(t, kernelfeature.VRF)
	t.Parallel()
	w := newWorld(t)
	require.NoError(t, w.cont.Handle(t).LinkAdd(&netlink.Vrf{LinkAttrs: netlink.LinkAttrs{Name: "blue"}, Table: 50}))
	prev := w.iface("net1", "10.201.0.0/16", "10.80.1.2/24")
	_, err := w.invoke("ADD", "net1", conf(t, prev, `"vrfname":"blue","table":60`))
	assert.Equal(t, cnierror.CodeInvalidConfig, cnierror.Code(err), "%v", err)
	assert.ErrorContains(t, err, "table 50")
	assert.Equal(t, "", w.masterOf("net1"))
	assert.NotNil(t, w.link("blue"), "a VRF the plugin did not create is left alone")
}

func TestInterfaceWithAnotherMasterIsRefusedAndTheNewVRFRemoved(t *testing.T) {
	kernelfeature.Require(t, kernelfeature.VRF)
	t.Parallel()
	w, prev := newNet1(t)
	h := w.cont.Handle(t)
	require.NoError(t, h.LinkAdd(&netlink.Bridge{LinkAttrs: netlink.LinkAttrs{Name: "br0"}}))
	br, err := h.LinkByName("br0")
	require.NoError(t, err)
	require.NoError(t, h.LinkSetMaster(w.link("net1"), br))
	_, err = w.invoke("ADD", "net1", conf(t, prev, `"vrfname":"blue"`))
	assert.ErrorContains(t, err, "already has a master (br0)")
	assert.Nil(t, w.link("blue"), "the VRF the failed ADD created is gone")
}

func TestDelWhenTheVRFOrInterfaceVanishedSucceeds(t *testing.T) {
	kernelfeature.Require(t, kernelfeature.VRF)
	t.Parallel()
	w, prev := newNet1(t)
	c := conf(t, prev, `"vrfname":"blue"`)
	_, err := w.invoke("ADD", "net1", c)
	require.NoError(t, err)
	require.NoError(t, w.cont.Handle(t).LinkDel(w.link("net1")))
	_, err = w.invoke("DEL", "net1", c)
	require.NoError(t, err)
	assert.Nil(t, w.link("blue"), "no member left")
	_, err = w.invoke("DEL", "net1", c)
	assert.NoError(t, err)
}

func TestBadConfigIsAnInvalidConfig(t *testing.T) {
	t.Parallel()
	w, prev := newNet1(t)
	for name, c := range map[string][]byte{
		"no vrfname":     conf(t, prev, ""),
		"slash in name":  conf(t, prev, `"vrfname":"a/b"`),
		"long name":      conf(t, prev, `"vrfname":"abcdefghijklmnop"`),
		"reserved table": conf(t, prev, `"vrfname":"blue","table":255`),
		"no prevResult":  conf(t, nil, `"vrfname":"blue"`),
	} {
		t.Run(name, func(t *testing.T) {
			_, err := w.invoke("ADD", "net1", c)
			assert.Equal(t, cnierror.CodeInvalidConfig, cnierror.Code(err), "%v", err)
		})
	}
	h := w.cont.Handle(t)
	l := w.link("net1")
	require.NotNil(t, l)
	assert.Zero(t, l.Attrs().MasterIndex)
	links, err := h.LinkList()
	require.NoError(t, err)
	assert.Len(t, links, 2, "lo and net1 only")
}

func TestDelWithoutNamespaceSucceeds(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	w.cont.Close()
	_, err := w.invoke("DEL", "net1", conf(t, nil, `"vrfname":"blue"`))
	assert.NoError(t, err)
}

// TestDelReadsOnlyTheVRFName: DEL needs the VRF's name alone. A name ADD refuses (none,
// "", too long, with a slash, not a string) is no VRF of this plugin's: DEL succeeds
// and deletes nothing, where it used to fail for ever with ADD's refusal. Keys DEL does
// not need never make it fail: with a good name it still takes the interface out.
func TestDelReadsOnlyTheVRFName(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, extra string
		deletes     bool
	}{
		{"no vrfname", ``, false},
		{"empty vrfname", `"vrfname":""`, false},
		{"vrfname of 16 characters", `"vrfname":"abcdefghijklmnop"`, false},
		{"vrfname with a slash", `"vrfname":"a/b"`, false},
		{"vrfname not a string", `"vrfname":7`, false},
		{"table not a number", `"vrfname":"blue","table":"x"`, true},
		{"table reserved", `"vrfname":"blue","table":255`, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			w, prev := newNet1(t)
			bad := conf(t, prev, tc.extra)
			_, err := w.invoke("ADD", "net1", bad)
			require.Equal(t, cnierror.CodeInvalidConfig, cnierror.Code(err), "premise: ADD refuses it: %v", err)
			if !tc.deletes {
				for i := range 2 {
					_, err = w.invoke("DEL", "net1", bad)
					require.NoError(t, err, "DEL %d", i+1)
				}
				if ok, _ := kernelfeature.Has(kernelfeature.VRF); !ok {
					return // nothing of ours to see deleted or kept on this kernel
				}
			}
			kernelfeature.Require(t, kernelfeature.VRF)
			_, err = w.invoke("ADD", "net1", conf(t, prev, `"vrfname":"blue"`))
			require.NoError(t, err)
			_, err = w.invoke("DEL", "net1", bad)
			require.NoError(t, err)
			if tc.deletes {
				assert.Equal(t, "", w.masterOf("net1"), "out of the VRF")
				assert.Nil(t, w.link("blue"), "the empty VRF is gone")
			} else {
				assert.Equal(t, "blue", w.masterOf("net1"), "nothing deleted")
			}
		})
	}
}
