package dummy_test

import (
	"net"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/vishvananda/netlink"

	at "github.com/cnikit/cni/internal/plugins/attachment/attachmenttest"
	"github.com/cnikit/cni/internal/plugins/dummy"
	"github.com/cnikit/cni/internal/testbed/kernelfeature"
	pt "github.com/cnikit/cni/internal/testbed/plugintest"
)

// suite is what every one-link plugin does alike; a dummy has no master, and New skips
// without dummy support.
var suite = at.Suite{
	Plugin: dummy.Plugin, Needs: []kernelfeature.Feature{kernelfeature.Dummy},
	BadInput:      []at.BadInput{{Name: "ipam empty", Keys: map[string]any{"ipam": map[string]any{}}, Field: "ipam"}},
	ExecdBadInput: []at.BadInput{{Name: "no ipam", Keys: map[string]any{"ipam": nil}, Field: "ipam"}},
}

func TestDoesWhatEveryOneLinkPluginDoes(t *testing.T) {
	t.Parallel()
	suite.Run(t)
}

func TestAddGivesTheContainerADummyHoldingTheAddresses(t *testing.T) {
	t.Parallel()
	e := suite.New(t)
	conf := e.Config(map[string]any{"dns": map[string]any{"nameservers": []string{"10.90.0.53"}},
		"ipam": e.HostLocal(at.Subnet, "fd90::/64")})
	c := e.Add(conf)

	l, err := c.NS.Handle(t).LinkByName("eth0")
	require.NoError(t, err)
	_, ok := l.(*netlink.Dummy)
	assert.True(t, ok, "eth0 is a %s", l.Type())
	assert.NotZero(t, l.Attrs().Flags&net.FlagUp)
	require.Len(t, c.Res.Interfaces, 1)
	assert.Equal(t, "eth0", c.Res.Interfaces[0].Name)
	assert.Equal(t, c.NS.Path, c.Res.Interfaces[0].Sandbox)
	assert.Equal(t, l.Attrs().HardwareAddr.String(), c.Res.Interfaces[0].Mac)
	require.Len(t, c.Res.IPs, 2)
	assert.Equal(t, []string{"10.90.0.53"}, c.Res.DNS.Nameservers)
	assert.NoError(t, at.Reach(t, c.NS, c.NS, c.Addr(t)), "the address answers inside the container")
	assert.Equal(t, []string{"lo", at.Master}, pt.Links(t, e.Host), "nothing on the host")

	require.NoError(t, e.Check(c, conf))
	require.NoError(t, e.Del(c, conf))
	require.NoError(t, e.Del(c, conf))
	e.AssertNothingLeft(t, c)
}

func TestCheckNoticesAMissingAddress(t *testing.T) {
	t.Parallel()
	e := suite.New(t)
	conf := e.Config(nil)
	c := e.Add(conf)
	c.DelAddr(t)
	err := e.Check(c, conf)
	assert.Error(t, err)
	assert.ErrorContains(t, err, c.Addr(t), "CHECK names the missing address")
}
