package ipvlan_test

import (
	"net/netip"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/vishvananda/netlink"

	at "github.com/cnikit/cni/internal/plugins/attachment/attachmenttest"
	"github.com/cnikit/cni/internal/plugins/ipvlan"
	"github.com/cnikit/cni/internal/result"
	"github.com/cnikit/cni/internal/spec/skel"
	"github.com/cnikit/cni/internal/testbed/kernelfeature"
	pt "github.com/cnikit/cni/internal/testbed/plugintest"
)

// suite is what every one-link plugin does alike; its New skips without ipvlan support.
var suite = at.Suite{
	MasterFromDefaultRoute: true,
	Plugin:                 ipvlan.Plugin, Needs: []kernelfeature.Feature{kernelfeature.IPVLAN},
	Keys: map[string]any{"master": at.Master},
	// These are refused before anything is created, so they run on any kernel.
	BadInput: []at.BadInput{
		{Name: "unknown mode", Keys: map[string]any{"mode": "l4"}, Field: "mode"},
		{Name: "mtu above the master's", Keys: map[string]any{"mtu": 1600}, Field: "mtu"},
		{Name: "master that does not exist", Keys: map[string]any{"master": "nosuch0"}, Field: "master"},
		{Name: "chained without IPAM and without addresses", Keys: map[string]any{"master": nil, "ipam": nil},
			Prev: prevResult(at.Master), Field: "ipam"},
		{Name: "chained with two interfaces", Keys: map[string]any{"master": nil},
			Prev: &result.Result{CNIVersion: "1.1.0", Interfaces: []result.Interface{{Name: "a"}, {Name: "b"}}}, Field: "master"},
		{Name: "no IPAM and no prevResult", Keys: map[string]any{"ipam": nil}, Field: "ipam"},
	},
	ExecdBadInput: []at.BadInput{
		{Name: "mode", Keys: map[string]any{"mode": "l9"}, Field: "mode"},
		{Name: "mtu", Keys: map[string]any{"mtu": 70000}, Field: "mtu"},
		{Name: "master", Keys: map[string]any{"master": "nosuch0"}, Field: "master"},
	},
	LibcniKeys: map[string]any{"mode": "l3"},
	InContainer: func(t *testing.T, l netlink.Link) {
		assert.IsType(t, &netlink.IPVlan{}, l)
	},
}

func TestDoesWhatEveryOneLinkPluginDoes(t *testing.T) {
	t.Parallel()
	suite.Run(t)
}

// ipvlanIn returns the container's eth0, which must be an ipvlan.
var ipvlanIn = at.LinkOf[*netlink.IPVlan]

func TestContainersReachEachOtherInL2AndL3(t *testing.T) {
	t.Parallel()
	modes := map[string]netlink.IPVlanMode{"l2": netlink.IPVLAN_MODE_L2, "l3": netlink.IPVLAN_MODE_L3, "l3s": netlink.IPVLAN_MODE_L3S}
	for name, want := range modes {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			e := suite.New(t)
			conf := e.Config(map[string]any{"master": at.Master, "mode": name})
			a, b := e.Add(conf), e.Add(conf)
			master := e.MasterLink()
			for _, c := range []*at.Container{a, b} {
				iv := ipvlanIn(t, c)
				assert.Equal(t, want, iv.Mode)
				assert.Equal(t, master.Attrs().Index, iv.ParentIndex)
				require.Len(t, c.Res.Interfaces, 1)
				assert.Equal(t, c.NS.Path, c.Res.Interfaces[0].Sandbox)
				assert.Equal(t, iv.HardwareAddr.String(), c.Res.Interfaces[0].Mac)
				assert.Equal(t, master.Attrs().HardwareAddr.String(), iv.HardwareAddr.String(), "ipvlan shares the master's MAC")
			}
			assert.NoError(t, at.Reach(t, a.NS, b.NS, b.Addr(t)))
			assert.NoError(t, at.Reach(t, b.NS, a.NS, a.Addr(t)))
			if name == "l2" {
				assert.NoError(t, at.Reach(t, e.Peer, a.NS, a.Addr(t)), "l2 answers ARP on the master's network")
			}
			for _, c := range []*at.Container{a, b} {
				require.NoError(t, e.Check(c, conf))
				require.NoError(t, e.Del(c, conf))
				require.NoError(t, e.Del(c, conf))
			}
			assert.Empty(t, e.Reservations())
		})
	}
}

func TestCheckNoticesAnotherMode(t *testing.T) {
	t.Parallel()
	e := suite.New(t)
	conf := e.Config(map[string]any{"master": at.Master, "mode": "l3"})
	c := e.Add(conf)
	err := e.Check(c, e.Config(map[string]any{"master": at.Master, "mode": "l2"}))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "mode")
}

// prevResult is what a previous plugin in the chain reported: one interface, the
// master, and addresses for the ipvlan to take.
func prevResult(ifName string, addrs ...string) *result.Result {
	res := &result.Result{CNIVersion: "1.1.0"}
	idx := res.AddInterface(result.Interface{Name: ifName})
	for _, a := range addrs {
		res.IPs = append(res.IPs, result.IPConfig{Interface: &idx, Address: netip.MustParsePrefix(a)})
	}
	return res
}

func TestChainedIpvlanTakesMasterAndAddressesFromThePrevResult(t *testing.T) {
	t.Parallel()
	e := suite.New(t)
	conf := pt.WithPrev(t, e.Config(map[string]any{"ipam": nil}), prevResult(at.Master, "10.90.0.50/24"))
	c := e.NewContainer()
	e.AddTo(c, conf)
	master := e.MasterLink()
	assert.Equal(t, master.Attrs().Index, ipvlanIn(t, c).ParentIndex)
	require.Len(t, c.Res.Interfaces, 1)
	assert.Equal(t, "eth0", c.Res.Interfaces[0].Name)
	require.Len(t, c.Res.IPs, 1)
	assert.Equal(t, "10.90.0.50/24", c.Res.IPs[0].Address.String())
	assert.Equal(t, 0, *c.Res.IPs[0].Interface)
	assert.NoError(t, at.Reach(t, e.Peer, c.NS, "10.90.0.50"))
	require.NoError(t, e.Check(c, e.Config(map[string]any{"ipam": nil})))
	require.NoError(t, e.Del(c, e.Config(map[string]any{"ipam": nil})))
	assert.Equal(t, []string{"lo"}, pt.Links(t, c.NS))
}

// The reference's DEL resolves an unset master from the default route again and fails
// on a host without one; ours never looks (no ipvlan support needed here).
func TestDelWithNoMasterAndNoDefaultRouteSucceeds(t *testing.T) {
	t.Parallel()
	e := suite.AnyKernel(t)
	c := e.NewContainer()
	require.NoError(t, e.Del(c, e.Config(nil)))
	_, err := e.Invoke(skel.CmdDel, c.ID, "", e.Config(nil))
	require.NoError(t, err)
}
