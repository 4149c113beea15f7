package macvlan_test

import (
	"net"
	"os"
	"strings"
	"testing"

	types100 "github.com/containernetworking/cni/pkg/types/100"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/vishvananda/netlink"

	"github.com/cnikit/cni/internal/core/cnierror"
	at "github.com/cnikit/cni/internal/plugins/attachment/attachmenttest"
	"github.com/cnikit/cni/internal/plugins/macvlan"
	"github.com/cnikit/cni/internal/spec/skel"
	pt "github.com/cnikit/cni/internal/testbed/plugintest"
	"github.com/cnikit/cni/internal/testbed/testns"
)

// suite is what every one-link plugin does alike; macvlan needs no kernel feature.
var suite = at.Suite{
	MasterFromDefaultRoute: true,
	Plugin:                 macvlan.Plugin, Keys: map[string]any{"master": at.Master},
	BadInput: []at.BadInput{
		{Name: "unknown mode", Keys: map[string]any{"mode": "bridged"}, Field: "mode"},
		{Name: "mtu above the master's", Keys: map[string]any{"mtu": 1501}, Field: "mtu"},
		{Name: "mtu below IPv4's minimum", Keys: map[string]any{"mtu": 60}, Field: "mtu"},
		{Name: "negative mtu", Keys: map[string]any{"mtu": -1}, Field: "mtu"},
		{Name: "master that does not exist", Keys: map[string]any{"master": "nosuch0"}, Field: "master"},
		{Name: "master with a slash", Keys: map[string]any{"master": "a/b"}, Field: "master"},
		{Name: "mac not a MAC", Keys: map[string]any{"mac": "zz:zz"}, Field: "mac"},
		{Name: "multicast mac", Keys: map[string]any{"mac": "01:00:5e:00:00:01"}, Field: "mac"},
		{Name: "bad runtimeConfig.mac", Keys: map[string]any{"runtimeConfig": map[string]any{"mac": "nope"}}, Field: "runtimeConfig.mac"},
		{Name: "bad CNI_ARGS MAC", CNIArgs: "MAC=12", Field: "CNI_ARGS MAC"},
		{Name: "negative bcqueuelen", Keys: map[string]any{"bcqueuelen": -1}, Field: "bcqueuelen"},
		{Name: "linkInContainer with the master on the host", Keys: map[string]any{"linkInContainer": true}, Field: "master"},
	},
	ExecdBadInput: []at.BadInput{
		{Name: "unknown mode", Keys: map[string]any{"mode": "switch"}, Field: "mode"},
		{Name: "mtu above the master's", Keys: map[string]any{"mtu": 9000}, Field: "mtu"},
		{Name: "master that does not exist", Keys: map[string]any{"master": "nosuch0"}, Field: "master"},
		{Name: "bad capability mac", Keys: map[string]any{"runtimeConfig": map[string]any{"mac": "ff:ff:ff:ff:ff:ff"}}, Field: "runtimeConfig.mac"},
		{Name: "bad CNI_ARGS MAC", CNIArgs: "IgnoreUnknown=1;MAC=xyz", Field: "CNI_ARGS MAC"},
		{Name: "mode of the wrong type", Keys: map[string]any{"mode": 3}, Field: "mode"},
	},
	LibcniKeys:           map[string]any{"capabilities": map[string]any{"mac": true}},
	LibcniCapabilityArgs: map[string]any{"mac": "02:aa:bb:cc:dd:ee"},
	LibcniResult: func(t *testing.T, res *types100.Result) {
		assert.Equal(t, "02:aa:bb:cc:dd:ee", res.Interfaces[0].Mac, "the mac capability")
	},
}

func TestDoesWhatEveryOneLinkPluginDoes(t *testing.T) {
	t.Parallel()
	suite.Run(t)
}

// macvlanIn returns the container's eth0, which must be a macvlan.
var macvlanIn = at.LinkOf[*netlink.Macvlan]

func masterIndex(t *testing.T, e *at.Env) int {
	t.Helper()
	l := e.MasterLink()
	return l.Attrs().Index
}

func TestTwoContainersOnOneMasterReachEachOtherAndThePeer(t *testing.T) {
	t.Parallel()
	e := suite.New(t)
	conf := e.Config(map[string]any{"master": at.Master, "mode": "bridge"})
	a, b := e.Add(conf), e.Add(conf)

	for _, c := range []*at.Container{a, b} {
		require.Len(t, c.Res.Interfaces, 1)
		iface := c.Res.Interfaces[0]
		mv := macvlanIn(t, c)
		assert.Equal(t, "eth0", iface.Name)
		assert.Equal(t, c.NS.Path, iface.Sandbox)
		assert.Equal(t, mv.HardwareAddr.String(), iface.Mac)
		assert.Equal(t, netlink.MACVLAN_MODE_BRIDGE, mv.Mode)
		assert.Equal(t, masterIndex(t, e), mv.ParentIndex)
		require.Len(t, c.Res.IPs, 1)
		assert.Equal(t, 0, *c.Res.IPs[0].Interface)
		assert.Equal(t, []string{c.Res.IPs[0].Address.String()}, c.Addrs(t), "the reported address is on eth0")
	}
	assert.NotEqual(t, a.Res.Interfaces[0].Mac, b.Res.Interfaces[0].Mac, "each macvlan has a MAC of its own")
	assert.Equal(t, "10.90.0.10/24", a.Res.IPs[0].Address.String())

	assert.NoError(t, at.Reach(t, a.NS, b.NS, b.Addr(t)), "container to container")
	assert.NoError(t, at.Reach(t, b.NS, a.NS, a.Addr(t)), "container to container")
	assert.NoError(t, at.Reach(t, e.Peer, a.NS, a.Addr(t)), "master's peer to container")
	assert.NoError(t, at.Reach(t, e.Peer, b.NS, b.Addr(t)), "master's peer to container")
	assert.NoError(t, at.Reach(t, a.NS, e.Peer, at.PeerAddr), "container to master's peer")

	for _, c := range []*at.Container{a, b} {
		require.NoError(t, e.Check(c, conf))
		require.NoError(t, e.Del(c, conf))
		assert.Equal(t, []string{"lo"}, pt.Links(t, c.NS))
	}
	assert.Empty(t, e.Reservations())
}

func TestPrivateModeKeepsContainersApart(t *testing.T) {
	t.Parallel()
	e := suite.New(t)
	conf := e.Config(map[string]any{"master": at.Master, "mode": "private"})
	a, b := e.Add(conf), e.Add(conf)
	assert.Error(t, at.Reach(t, a.NS, b.NS, b.Addr(t)), "private macvlans must not talk to each other")
	assert.NoError(t, at.Reach(t, a.NS, e.Peer, at.PeerAddr), "but reach the network")
}

func TestNoMasterAndNoDefaultRouteIsTryAgainLater(t *testing.T) {
	t.Parallel()
	e := suite.New(t)
	c := e.NewContainer()
	_, err := e.Invoke(skel.CmdAdd, c.ID, c.NS.Path, e.Config(map[string]any{"master": nil}))
	pt.RequireRefused(t, err, cnierror.CodeTryAgainLater, "master")
	e.AssertNothingLeft(t, c)
}

func TestEveryModeIsCreatedAndChecked(t *testing.T) {
	t.Parallel()
	modes := map[string]netlink.MacvlanMode{
		"":         netlink.MACVLAN_MODE_BRIDGE,
		"bridge":   netlink.MACVLAN_MODE_BRIDGE,
		"private":  netlink.MACVLAN_MODE_PRIVATE,
		"vepa":     netlink.MACVLAN_MODE_VEPA,
		"passthru": netlink.MACVLAN_MODE_PASSTHRU,
		"source":   netlink.MACVLAN_MODE_SOURCE,
	}
	for name, want := range modes {
		t.Run("mode="+name, func(t *testing.T) {
			t.Parallel()
			e := suite.New(t)
			conf := e.Config(map[string]any{"master": at.Master, "mode": name})
			c := e.Add(conf)
			assert.Equal(t, want, macvlanIn(t, c).Mode)
			require.NoError(t, e.Check(c, conf))
			other := "private"
			if name == "private" {
				other = "vepa"
			}
			err := e.Check(c, e.Config(map[string]any{"master": at.Master, "mode": other}))
			require.Error(t, err, "CHECK with another mode")
			assert.Contains(t, err.Error(), "mode")
			require.NoError(t, e.Del(c, conf))
			e.AssertNothingLeft(t, c)
		})
	}
}

func TestMTUDefaultsToTheMastersAndMayBeLower(t *testing.T) {
	t.Parallel()
	e := suite.New(t)
	h := e.Host.Handle(t)
	m := e.MasterLink()
	require.NoError(t, h.LinkSetMTU(m, 9000))

	c := e.Add(e.Config(map[string]any{"master": at.Master}))
	assert.Equal(t, 9000, macvlanIn(t, c).MTU)
	assert.Equal(t, 9000, c.Res.Interfaces[0].MTU)

	c = e.Add(e.Config(map[string]any{"master": at.Master, "mtu": 1400}))
	assert.Equal(t, 1400, macvlanIn(t, c).MTU)
	assert.Equal(t, 1400, c.Res.Interfaces[0].MTU)
}

func TestMACComesFromConfigCNIArgsAndCapabilityLaterWinning(t *testing.T) {
	t.Parallel()
	const conf, args, capability = "02:00:00:00:00:01", "02:00:00:00:00:02", "02:00:00:00:00:03"
	tests := []struct {
		name    string
		keys    map[string]any
		cniArgs string
		want    string
	}{
		{"config", map[string]any{"mac": conf}, "", conf},
		{"CNI_ARGS over config", map[string]any{"mac": conf}, "IgnoreUnknown=1;MAC=" + args, args},
		{"capability over both", map[string]any{"mac": conf, "runtimeConfig": map[string]any{"mac": capability}}, "IgnoreUnknown=1;MAC=" + args, capability},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e := suite.New(t)
			tt.keys["master"] = at.Master
			cfg := e.Config(tt.keys)
			c := e.Add(cfg, tt.cniArgs)
			assert.Equal(t, tt.want, macvlanIn(t, c).HardwareAddr.String())
			assert.Equal(t, tt.want, c.Res.Interfaces[0].Mac)
			require.NoError(t, e.Check(c, cfg))
		})
	}
}

func TestBCQueueLenReachesTheKernel(t *testing.T) {
	t.Parallel()
	e := suite.New(t)
	c := e.Add(e.Config(map[string]any{"master": at.Master, "bcqueuelen": 3000}))
	assert.Equal(t, uint32(3000), macvlanIn(t, c).BCQueueLen)
}

func TestEmptyIPAMGivesTheLinkOnlyAndUp(t *testing.T) {
	t.Parallel()
	e := suite.New(t)
	conf := e.Config(map[string]any{"master": at.Master, "ipam": map[string]any{}})
	c := e.Add(conf)
	assert.Empty(t, c.Res.IPs)
	require.Len(t, c.Res.Interfaces, 1)
	mv := macvlanIn(t, c)
	assert.NotZero(t, mv.Flags&net.FlagUp, "link is up")
	require.NoError(t, e.Check(c, conf))
	require.NoError(t, e.Del(c, conf))
	require.NoError(t, e.Del(c, conf))
	e.AssertNothingLeft(t, c)
}

func TestNeighboursAreNotifiedOfTheNewInterface(t *testing.T) {
	t.Parallel()
	e := suite.New(t)
	c := e.Add(e.Config(map[string]any{"master": at.Master, "ipam": e.HostLocal(at.Subnet, "fd90::/64")}))
	for _, name := range []string{"ipv4/conf/eth0/arp_notify", "ipv6/conf/eth0/ndisc_notify"} {
		var b []byte
		c.NS.Run(t, func() (err error) { b, err = os.ReadFile("/proc/sys/net/" + name); return err })
		assert.Equal(t, "1", strings.TrimSpace(string(b)), name)
	}
	require.Len(t, c.Res.IPs, 2)
}

func TestLinkInContainerUsesAMasterInsideTheContainer(t *testing.T) {
	t.Parallel()
	e := suite.New(t)
	c := e.NewContainer()
	cm := e.ContainerMaster(c, "10.91.0.2/24", "10.91.0.1/24")
	h := c.NS.Handle(t)

	conf := e.Config(map[string]any{"master": "cmaster", "linkInContainer": true, "ipam": e.HostLocal("10.91.0.0/24")})
	e.AddTo(c, conf)
	mv := macvlanIn(t, c)
	assert.Equal(t, cm.Attrs().Index, mv.ParentIndex)
	assert.NoError(t, at.Reach(t, e.Peer, c.NS, c.Addr(t)))
	require.NoError(t, e.Check(c, conf))
	require.NoError(t, e.Del(c, conf))
	assert.Equal(t, []string{"cmaster", "lo"}, pt.Links(t, c.NS))
	assert.Equal(t, []string{"lo", at.Master}, pt.Links(t, e.Host))

	// Without a master, the container's default route names it.
	require.NoError(t, h.RouteAdd(&netlink.Route{LinkIndex: cm.Attrs().Index, Gw: net.ParseIP("10.91.0.1")}))
	conf = e.Config(map[string]any{"linkInContainer": true, "ipam": map[string]any{}})
	e.AddTo(c, conf)
	assert.Equal(t, cm.Attrs().Index, macvlanIn(t, c).ParentIndex)
	require.NoError(t, e.Check(c, conf))
	require.NoError(t, e.Del(c, conf))
	assert.Equal(t, []string{"cmaster", "lo"}, pt.Links(t, c.NS), "DEL leaves the container's master")
	assert.Error(t, e.Check(c, conf), "CHECK after DEL")
}

func TestDelOfAConfigNoLongerValidSucceeds(t *testing.T) {
	t.Parallel()
	e := suite.New(t)
	conf := e.Config(map[string]any{"master": at.Master})
	c := e.Add(conf)
	invalid := e.Config(map[string]any{"master": "gone0", "mode": "nonsense", "mtu": 99999})
	require.NoError(t, e.Del(c, invalid))
	e.AssertNothingLeft(t, c)
	require.NoError(t, e.Del(c, invalid), "DEL again")
}

func TestInterfaceNameTakenInTheContainerIsRefused(t *testing.T) {
	t.Parallel()
	e := suite.New(t)
	c := e.NewContainer()
	testns.Veth(t, c.NS, "eth0", nil, e.Peer, "other0", nil)
	_, err := e.Invoke(skel.CmdAdd, c.ID, c.NS.Path, e.Config(map[string]any{"master": at.Master}))
	pt.RequireRefused(t, err, cnierror.CodeInvalidEnv, "CNI_IFNAME")
	assert.Equal(t, []string{"eth0", "lo"}, pt.Links(t, c.NS))
	assert.Empty(t, e.Reservations())
	assert.Equal(t, []string{"lo", at.Master}, pt.Links(t, e.Host), "no macvlan left on the host")
}

func TestHostLinkWithTheContainersInterfaceNameDoesNotClash(t *testing.T) {
	t.Parallel()
	e := suite.New(t)
	testns.Veth(t, e.Host, "eth0", nil, e.Peer, "hosteth0", nil)
	c := e.Add(e.Config(map[string]any{"master": at.Master}))
	assert.Equal(t, "eth0", macvlanIn(t, c).Name)
	assert.Equal(t, []string{"eth0", "lo", at.Master}, pt.Links(t, e.Host))
}

func TestCheckNoticesAMissingAddressAndAWrongMaster(t *testing.T) {
	t.Parallel()
	e := suite.New(t)
	testns.Veth(t, e.Host, "master1", nil, e.Peer, "peer1", nil)
	conf := e.Config(map[string]any{"master": at.Master})
	c := e.Add(conf)
	err := e.Check(c, e.Config(map[string]any{"master": "master1"}))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "master")

	c.DelAddr(t)
	err = e.Check(c, conf)
	require.Error(t, err)
	assert.Contains(t, err.Error(), c.Addr(t))
}

func TestStatusAndGCGoThroughIPAM(t *testing.T) {
	t.Parallel()
	e := suite.New(t)
	conf := e.Config(map[string]any{"master": at.Master})
	kept, dropped := e.Add(conf), e.Add(conf)
	require.Len(t, e.Reservations(), 2)

	_, err := e.Invoke(skel.CmdStatus, "", "", conf)
	require.NoError(t, err)
	_, err = e.Invoke(skel.CmdStatus, "", "", e.Config(map[string]any{"mode": "bogus"}))
	assert.Equal(t, cnierror.CodeInvalidConfig, pt.Code(err), "STATUS validates the config")
	assert.ErrorContains(t, err, "mode", "STATUS names the bad field")

	gcConf := e.Config(map[string]any{"master": at.Master, "cni.dev/valid-attachments": []any{
		map[string]any{"containerID": kept.ID, "ifname": "eth0"},
	}})
	_, err = e.Invoke(skel.CmdGC, "", "", gcConf)
	require.NoError(t, err)
	assert.Equal(t, []string{kept.Addr(t)}, e.Reservations())
	// GC keeps the valid attachment whole: CHECK still finds its address reserved.
	require.NoError(t, e.Check(kept, conf), "CHECK of the kept attachment after GC")
	// The dropped one's DEL, its address already released, still removes its link
	// and leaves the kept one's reservation.
	require.NoError(t, e.Del(dropped, conf))
	assert.Equal(t, []string{"lo"}, pt.Links(t, dropped.NS))
	assert.Equal(t, []string{kept.Addr(t)}, e.Reservations())
}
