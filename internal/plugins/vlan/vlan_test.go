package vlan_test

import (
	"fmt"
	"testing"

	types100 "github.com/containernetworking/cni/pkg/types/100"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/vishvananda/netlink"

	"github.com/cnikit/cni/internal/core/cnierror"
	at "github.com/cnikit/cni/internal/plugins/attachment/attachmenttest"
	"github.com/cnikit/cni/internal/plugins/vlan"
	"github.com/cnikit/cni/internal/spec/skel"
	"github.com/cnikit/cni/internal/testbed/kernelfeature"
	pt "github.com/cnikit/cni/internal/testbed/plugintest"
	"github.com/cnikit/cni/internal/testbed/testns"
)

// suite is what every one-link plugin does alike; its New skips without vlan support.
var suite = at.Suite{
	Plugin: vlan.Plugin, Needs: []kernelfeature.Feature{kernelfeature.VLAN},
	Keys: map[string]any{"master": at.Master, "vlanId": 10},
	// These are refused before anything is created, so they run on any kernel.
	BadInput: []at.BadInput{
		{Name: "vlanId 5000", Keys: map[string]any{"vlanId": 5000}, Field: "vlanId"},
		{Name: "vlanId -1", Keys: map[string]any{"vlanId": -1}, Field: "vlanId"},
		{Name: "vlanId 4095", Keys: map[string]any{"vlanId": 4095}, Field: "vlanId"},
		{Name: "mtu above the master's", Keys: map[string]any{"mtu": 1501}, Field: "mtu"},
		{Name: "master missing", Keys: map[string]any{"master": nil}, Field: "master"},
		{Name: "master that does not exist", Keys: map[string]any{"master": "nosuch0"}, Field: "master"},
		{Name: "no IPAM", Keys: map[string]any{"ipam": map[string]any{}}, Field: "ipam"},
		{Name: "vlanId of the wrong type", Keys: map[string]any{"vlanId": "100"}, Field: "vlanId"},
	},
	ExecdBadInput: []at.BadInput{
		{Name: "vlanId", Keys: map[string]any{"vlanId": 5000}, Field: "vlanId"},
		{Name: "mtu", Keys: map[string]any{"vlanId": 1, "mtu": 9000}, Field: "mtu"},
		{Name: "master", Keys: map[string]any{"master": "nosuch0", "vlanId": 1}, Field: "master"},
	},
	LibcniKeys: map[string]any{"vlanId": 42, "dns": map[string]any{"nameservers": []string{"10.90.0.53"}}},
	LibcniResult: func(t *testing.T, res *types100.Result) {
		assert.Equal(t, []string{"10.90.0.53"}, res.DNS.Nameservers, "dns from the config")
	},
	InContainer: func(t *testing.T, l netlink.Link) {
		v, ok := l.(*netlink.Vlan)
		require.True(t, ok, "a vlan: %T", l)
		assert.Equal(t, 10, v.VlanId)
	},
}

func TestDoesWhatEveryOneLinkPluginDoes(t *testing.T) {
	t.Parallel()
	suite.Run(t)
}

// vlanIn returns the container's eth0, which must be a vlan.
var vlanIn = at.LinkOf[*netlink.Vlan]

// vlanPeer gives the peer namespace a VLAN interface with id on the master's other end,
// holding addr: a VLAN-aware neighbour that only sees frames tagged with that id.
func vlanPeer(t *testing.T, e *at.Env, id int, addr string) {
	t.Helper()
	h := e.Peer.Handle(t)
	p, err := h.LinkByName(at.Peer)
	require.NoError(t, err)
	name := fmt.Sprintf("%s.%d", at.Peer, id)
	require.NoError(t, h.LinkAdd(&netlink.Vlan{LinkAttrs: netlink.LinkAttrs{Name: name, ParentIndex: p.Attrs().Index}, VlanId: id}))
	testns.Up(t, e.Peer, name, addr)
}

// One VLAN id per master: the kernel refuses a second link with the same id on it.
func TestTaggedTrafficReachesAVlanAwarePeerOnTheSameIDOnly(t *testing.T) {
	t.Parallel()
	e := suite.New(t)
	vlanPeer(t, e, 100, "10.100.0.1/24")
	conf := e.Config(map[string]any{"master": at.Master, "vlanId": 100, "ipam": e.HostLocal("10.100.0.0/24")})
	c := e.Add(conf)
	master := e.MasterLink()
	v := vlanIn(t, c)
	assert.Equal(t, 100, v.VlanId)
	assert.Equal(t, master.Attrs().Index, v.ParentIndex)
	require.Len(t, c.Res.Interfaces, 1)
	assert.Equal(t, c.NS.Path, c.Res.Interfaces[0].Sandbox)
	assert.Equal(t, v.HardwareAddr.String(), c.Res.Interfaces[0].Mac)
	assert.NoError(t, at.Reach(t, c.NS, e.Peer, "10.100.0.1"), "container to the VLAN 100 peer")
	assert.NoError(t, at.Reach(t, e.Peer, c.NS, c.Addr(t)), "VLAN 100 peer to container")

	// Frames tagged 101 do not reach the VLAN 100 interface.
	other := e.Add(e.Config(map[string]any{"master": at.Master, "vlanId": 101, "ipam": e.HostLocal("10.100.0.0/24")}))
	assert.Error(t, at.Reach(t, other.NS, e.Peer, "10.100.0.1"), "VLAN 101 must not reach VLAN 100")

	require.NoError(t, e.Check(c, conf))
	require.NoError(t, e.Del(c, conf))
	require.NoError(t, e.Del(c, conf))
	assert.Equal(t, []string{"lo"}, pt.Links(t, c.NS))
}

func TestAVLANIDAlreadyUsedOnTheMasterIsRefused(t *testing.T) {
	t.Parallel()
	e := suite.New(t)
	conf := e.Config(map[string]any{"master": at.Master, "vlanId": 7})
	e.Add(conf)
	c := e.NewContainer()
	_, err := e.Invoke(skel.CmdAdd, c.ID, c.NS.Path, conf)
	pt.RequireRefused(t, err, cnierror.CodeInvalidConfig, "vlanId")
	assert.Equal(t, []string{"lo"}, pt.Links(t, c.NS))
	assert.Len(t, e.Reservations(), 1, "only the first container's")
}

func TestMTUIsAppliedAndChecked(t *testing.T) {
	t.Parallel()
	e := suite.New(t)
	conf := e.Config(map[string]any{"master": at.Master, "vlanId": 5, "mtu": 1400})
	c := e.Add(conf)
	assert.Equal(t, 1400, vlanIn(t, c).MTU)
	require.NoError(t, e.Check(c, conf))
	err := e.Check(c, e.Config(map[string]any{"master": at.Master, "vlanId": 5, "mtu": 1300}))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "mtu")
	err = e.Check(c, e.Config(map[string]any{"master": at.Master, "vlanId": 6, "mtu": 1400}))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "vlan id")
}

// No vlan support needed: DEL never touches the master. (The reference's DEL looks up
// the master's MTU and fails once the master is gone.)
func TestDelOfAMasterThatNeverExistedSucceeds(t *testing.T) {
	t.Parallel()
	e := suite.AnyKernel(t)
	c := e.NewContainer()
	require.NoError(t, e.Del(c, e.Config(map[string]any{"master": "gone0", "vlanId": 10})))
	require.NoError(t, e.Del(c, e.Config(map[string]any{"master": "gone0", "vlanId": 5000})))
}
