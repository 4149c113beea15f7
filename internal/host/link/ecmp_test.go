package link_test

import (
	"net/netip"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/vishvananda/netlink"

	"github.com/cnikit/cni/internal/host/link"
	"github.com/cnikit/cni/internal/result"
)

// Two result routes to one destination through different gateways both end up in the
// kernel, as next hops of one multipath route or as sibling routes (the kernel shows
// either), the way the reference adds them without NLM_F_EXCL (upstream row P26).
func TestConfigureIfaceKeepsEveryGatewayOfOneDestination(t *testing.T) {
	t.Parallel()
	contNS, cont := vethEth0(t, "")
	res := dualStack()
	res.Routes = []result.Route{
		{Dst: netip.MustParsePrefix("0.0.0.0/0"), GW: netip.MustParseAddr("10.9.0.1")},
		{Dst: netip.MustParsePrefix("0.0.0.0/0"), GW: netip.MustParseAddr("10.9.0.254")},
		{Dst: netip.MustParsePrefix("::/0"), GW: netip.MustParseAddr("fd00:9::1")},
		{Dst: netip.MustParsePrefix("::/0"), GW: netip.MustParseAddr("fd00:9::254")},
	}
	require.NoError(t, link.ConfigureIface(cont, "eth0", res))

	routes, err := contNS.Handle(t).RouteList(nil, netlink.FAMILY_ALL)
	require.NoError(t, err)
	var defaults []string
	for _, r := range routes {
		if r.Dst != nil && !r.Dst.IP.IsUnspecified() {
			continue
		}
		if r.Gw != nil {
			defaults = append(defaults, r.Gw.String())
		}
		for _, nh := range r.MultiPath {
			defaults = append(defaults, nh.Gw.String())
		}
	}
	assert.ElementsMatch(t, []string{"10.9.0.1", "10.9.0.254", "fd00:9::1", "fd00:9::254"}, defaults)
}
