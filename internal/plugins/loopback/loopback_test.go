package loopback

import (
	"net"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/vishvananda/netlink"

	"github.com/cnikit/cni/internal/core/cnierror"
	"github.com/cnikit/cni/internal/result"
	"github.com/cnikit/cni/internal/spec/skel"
	"github.com/cnikit/cni/internal/testbed/plugintest"
	"github.com/cnikit/cni/internal/testbed/testns"
)

func invoke(t *testing.T, host *testns.NS, cmd, netns, conf string) (*result.Result, error) {
	t.Helper()
	var res *result.Result
	var err error
	host.Run(t, func() error {
		args := skel.Args{Command: cmd, ContainerID: "c1", Netns: netns, IfName: "eth0", Path: []string{"/opt/cni/bin"}}
		res, err = skel.Invoke(t.Context(), Plugin(), args, []byte(conf), nil)
		return nil
	})
	return res, err
}

func loUp(t *testing.T, n *testns.NS) bool {
	t.Helper()
	lo, err := n.Handle(t).LinkByName("lo")
	require.NoError(t, err)
	return lo.Attrs().Flags&net.FlagUp != 0
}

const conf = `{"cniVersion":"1.1.0","name":"lo","type":"loopback"}`

// chained is conf after a main plugin that reported eth0 with 10.0.0.5/24.
const chained = `{"cniVersion":"1.0.0","name":"lo","type":"loopback","prevResult":{"cniVersion":"1.0.0",
	"interfaces":[{"name":"eth0","sandbox":"/x"}],"ips":[{"address":"10.0.0.5/24","interface":0}]}}`

// addrs lists the addresses res reports, each checked to name interface 0 (lo).
func addrs(t *testing.T, res *result.Result) []string {
	t.Helper()
	var got []string
	for _, ip := range res.IPs {
		got = append(got, ip.Address.String())
		require.NotNil(t, ip.Interface)
		assert.Equal(t, 0, *ip.Interface)
	}
	return got
}

func TestAddBringsLoUpAndReportsItsAddresses(t *testing.T) {
	testns.RequireRoot(t)
	host, ctr := testns.New(t), testns.New(t)
	require.False(t, loUp(t, ctr))
	res, err := invoke(t, host, "ADD", ctr.Path, conf)
	require.NoError(t, err)
	assert.True(t, loUp(t, ctr))
	require.Len(t, res.Interfaces, 1)
	assert.Equal(t, result.Interface{Name: "lo", Mac: "00:00:00:00:00:00", Sandbox: ctr.Path}, res.Interfaces[0])
	got := addrs(t, res)
	assert.ElementsMatch(t, []string{"127.0.0.1/8", "::1/128"}, got)
	assert.ElementsMatch(t, plugintest.AddrsIn(t, ctr, "lo"), got, "the result reports the kernel's addresses of lo")
}

func TestAddInAChainPassesPrevResultThrough(t *testing.T) {
	testns.RequireRoot(t)
	host, ctr := testns.New(t), testns.New(t)
	res, err := invoke(t, host, "ADD", ctr.Path, chained)
	require.NoError(t, err)
	require.Len(t, res.IPs, 1)
	assert.Equal(t, "10.0.0.5/24", res.IPs[0].Address.String())
	assert.Equal(t, "eth0", res.Interfaces[0].Name)
	assert.True(t, loUp(t, ctr))
}

func TestDelSetsLoDownAndCheckNoticesIt(t *testing.T) {
	testns.RequireRoot(t)
	host, ctr := testns.New(t), testns.New(t)
	_, err := invoke(t, host, "ADD", ctr.Path, conf)
	require.NoError(t, err)
	_, err = invoke(t, host, "CHECK", ctr.Path, conf)
	require.NoError(t, err)
	_, err = invoke(t, host, "DEL", ctr.Path, conf)
	require.NoError(t, err)
	assert.False(t, loUp(t, ctr))
	_, err = invoke(t, host, "CHECK", ctr.Path, conf)
	assert.ErrorContains(t, err, "down")
	_, err = invoke(t, host, "DEL", ctr.Path, conf)
	assert.NoError(t, err, "DEL again")
	assert.False(t, loUp(t, ctr), "lo stays down")
}

func TestDelSucceedsWhenNetnsIsGoneOrEmpty(t *testing.T) {
	testns.RequireRoot(t)
	host, ctr := testns.New(t), testns.New(t)
	gone := ctr.Path
	ctr.Close()
	for i := 0; i < 2; i++ {
		_, err := invoke(t, host, "DEL", gone, conf)
		assert.NoError(t, err)
	}
	host.Run(t, func() error {
		args := skel.Args{Command: "DEL", ContainerID: "c1", IfName: "eth0", Path: []string{"/x"}}
		_, err := skel.Invoke(t.Context(), Plugin(), args, []byte(conf), nil)
		return err
	})
}

func TestAddIntoMissingNetnsIsUnknownContainer(t *testing.T) {
	testns.RequireRoot(t)
	host, ctr := testns.New(t), testns.New(t)
	gone := ctr.Path
	ctr.Close()
	_, err := invoke(t, host, "ADD", gone, conf)
	require.Error(t, err)
	assert.Equal(t, cnierror.CodeUnknownContainer, cnierror.Code(err))
}

// A non-loopback address on lo is refused, alone or in a chain (as the reference
// does), and lo is left down: the reference sets lo up before it looks and leaves it up.
func TestAddRefusesANonLoopbackAddressOnLoAndLeavesLoDown(t *testing.T) {
	testns.RequireRoot(t)
	host, ctr := testns.New(t), testns.New(t)
	ctr.Run(t, func() error {
		lo, err := netlink.LinkByName("lo")
		if err != nil {
			return err
		}
		a, _ := netlink.ParseAddr("192.0.2.1/32")
		return netlink.AddrAdd(lo, a)
	})
	for name, c := range map[string]string{"alone": conf, "chained": chained} {
		t.Run(name, func(t *testing.T) {
			_, err := invoke(t, host, "ADD", ctr.Path, c)
			require.Error(t, err)
			assert.Equal(t, cnierror.CodeInvalidConfig, cnierror.Code(err))
			assert.ErrorContains(t, err, "192.0.2.1/32")
			assert.False(t, loUp(t, ctr), "a refused ADD leaves lo down")
		})
	}
}

// With lo already up (a runtime may bring it up itself), ADD leaves it up and reports
// the addresses it holds.
func TestAddOnAnUpLoReportsItsAddresses(t *testing.T) {
	testns.RequireRoot(t)
	host, ctr := testns.New(t), testns.New(t)
	_, err := invoke(t, host, "ADD", ctr.Path, conf)
	require.NoError(t, err)
	res, err := invoke(t, host, "ADD", ctr.Path, conf)
	require.NoError(t, err)
	assert.True(t, loUp(t, ctr))
	assert.ElementsMatch(t, []string{"127.0.0.1/8", "::1/128"}, addrs(t, res))
}

func TestRefusedAddNamesTheFieldAndLeavesLoDown(t *testing.T) {
	testns.RequireRoot(t)
	host, ctr := testns.New(t), testns.New(t)
	for name, tc := range map[string]struct {
		conf, field string // field is what the error must name
	}{
		"no name":  {`{"cniVersion":"1.1.0","type":"loopback"}`, "network name"},
		"bad name": {`{"cniVersion":"1.1.0","name":"l o/x","type":"loopback"}`, "network name"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := invoke(t, host, "ADD", ctr.Path, tc.conf)
			plugintest.RequireRefused(t, err, cnierror.CodeInvalidConfig, tc.field)
			assert.False(t, loUp(t, ctr), "lo stays down")
		})
	}
}
