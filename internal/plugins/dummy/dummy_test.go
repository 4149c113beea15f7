package dummy_test

import (
	"fmt"
	"net"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/vishvananda/netlink"

	at "github.com/cnikit/cni/internal/attachment/attachmenttest"
	"github.com/cnikit/cni/internal/cnierror"
	"github.com/cnikit/cni/internal/kernelfeature"
	"github.com/cnikit/cni/internal/plugins/dummy"
	pt "github.com/cnikit/cni/internal/plugintest"
	"github.com/cnikit/cni/internal/skel"
)

func newEnv(t *testing.T) *at.Env {
	t.Helper()
	return at.New(t, dummy.Plugin())
}

// withDummy is newEnv for tests that create dummy links.
func withDummy(t *testing.T) *at.Env {
	t.Helper()
	kernelfeature.Require(t, kernelfeature.Dummy)
	return newEnv(t)
}

func TestAddGivesTheContainerADummyHoldingTheAddresses(t *testing.T) {
	t.Parallel()
	e := withDummy(t)
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
	e := withDummy(t)
	conf := e.Config(nil)
	c := e.Add(conf)
	h := c.NS.Handle(t)
	l, err := h.LinkByName("eth0")
	require.NoError(t, err)
	addr, err := netlink.ParseAddr(c.Res.IPs[0].Address.String())
	require.NoError(t, err)
	require.NoError(t, h.AddrDel(l, addr))
	assert.Error(t, e.Check(c, conf))
}

func TestDelIsIdempotent(t *testing.T) {
	t.Parallel()
	t.Run("netns gone", func(t *testing.T) {
		t.Parallel()
		e := withDummy(t)
		conf := e.Config(nil)
		c := e.Add(conf)
		c.NS.Close()
		require.NoError(t, e.Del(c, conf))
		assert.Empty(t, e.Reservations())
	})
	t.Run("CNI_NETNS empty still releases the address", func(t *testing.T) {
		t.Parallel()
		e := withDummy(t)
		conf := e.Config(nil)
		c := e.Add(conf)
		_, err := e.Invoke(skel.CmdDel, c.ID, "", conf)
		require.NoError(t, err)
		assert.Empty(t, e.Reservations())
	})
}

func TestFailedAddLeavesNoLinkAndNoReservation(t *testing.T) {
	t.Parallel()
	e := withDummy(t)
	ipam := e.HostLocal(at.Subnet)
	ipam["routes"] = []any{map[string]any{"dst": "10.200.0.0/16", "gw": "192.0.2.1"}}
	c := e.NewContainer()
	_, err := e.Invoke(skel.CmdAdd, c.ID, c.NS.Path, e.Config(map[string]any{"ipam": ipam}))
	require.Error(t, err)
	e.AssertNothingLeft(t, c)
}

func TestNoIPAMIsRefused(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	c := e.NewContainer()
	_, err := e.Invoke(skel.CmdAdd, c.ID, c.NS.Path, e.Config(map[string]any{"ipam": map[string]any{}}))
	require.Error(t, err)
	assert.Equal(t, cnierror.CodeInvalidConfig, pt.Code(err))
	assert.Contains(t, err.Error(), "ipam")
	e.AssertNothingLeft(t, c)

	_, cerr := e.Exec(e.PluginDir(), "ADD", c.ID, c.NS.Path, e.Config(map[string]any{"ipam": nil}))
	require.NotNil(t, cerr)
	assert.Equal(t, cnierror.CodeInvalidConfig, cerr.Code)
	assert.Contains(t, cerr.Msg, "ipam")
	e.AssertNothingLeft(t, c)
}

func TestKernelWithoutDummyIsTryAgainLater(t *testing.T) {
	t.Parallel()
	if ok, err := kernelfeature.Has(kernelfeature.Dummy); err != nil || ok {
		t.Skip("the kernel supports dummy links")
	}
	e := newEnv(t)
	c := e.NewContainer()
	_, err := e.Invoke(skel.CmdAdd, c.ID, c.NS.Path, e.Config(nil))
	require.Error(t, err)
	assert.Equal(t, cnierror.CodeTryAgainLater, pt.Code(err))
	e.AssertNothingLeft(t, c)
}

func TestLibcniAddCheckDelDel(t *testing.T) {
	t.Parallel()
	e := withDummy(t)
	c := e.NewContainer()
	run := e.Libcni(fmt.Sprintf(`{
		"cniVersion": "1.1.0", "name": "testnet",
		"plugins": [{"type": "dummy",
			"ipam": {"type": "host-local", "dataDir": %q, "ranges": [[{"subnet": %q}]]}}]}`,
		e.DataDir, at.Subnet), c, nil)
	require.NoError(t, run.AddErr)
	require.Len(t, run.Result.Interfaces, 1)
	assert.Equal(t, c.NS.Path, run.Result.Interfaces[0].Sandbox)
	assert.NoError(t, run.CheckErr)
	assert.NoError(t, run.DelErr)
	assert.NoError(t, run.Del2Err, "DEL twice")
	e.AssertNothingLeft(t, c)
}
