package ipamconf

import (
	"net/netip"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cnikit/cni/internal/core/cnierror"
)

func TestRoutesKeepHostBitsAndExtensions(t *testing.T) {
	table, scope := 100, 253
	got, err := Routes("ipam.routes", []Route{
		{Dst: "10.1.2.3/16", GW: "10.1.0.1", MTU: 1400, AdvMSS: 1360, Priority: 7, Table: &table, Scope: &scope},
		{Dst: "::ffff:10.9.0.0/112"},
	})
	require.NoError(t, err)
	require.Len(t, got, 2)
	assert.Equal(t, netip.MustParsePrefix("10.1.2.3/16"), got[0].Dst)
	assert.Equal(t, netip.MustParseAddr("10.1.0.1"), got[0].GW)
	assert.Equal(t, 1400, got[0].MTU)
	assert.Equal(t, 1360, got[0].AdvMSS)
	assert.Equal(t, 7, got[0].Priority)
	assert.Equal(t, 100, *got[0].Table)
	assert.Equal(t, 253, *got[0].Scope)
	assert.Equal(t, netip.MustParsePrefix("10.9.0.0/16"), got[1].Dst, "IPv4-mapped prefixes become IPv4")
}

func TestRoutesErrorsNameTheField(t *testing.T) {
	_, err := Routes("ipam.routes", []Route{{Dst: "0.0.0.0/0"}, {Dst: "0.0.0.0/0", GW: "bad"}})
	require.Error(t, err)
	assert.Equal(t, cnierror.CodeInvalidConfig, cnierror.Code(err))
	assert.Equal(t, `ipam.routes[1].gw: invalid IP address "bad"`, err.Error())
	_, err = Routes("ipam.routes", []Route{{Dst: "10.0.0.0"}})
	assert.Equal(t, `ipam.routes[0].dst: invalid CIDR "10.0.0.0"`, err.Error())
}

// Found by FuzzRoutes: a zoned gateway went into the result, which no reader (result.Parse,
// libcni) accepts, so the next plugin of the chain failed on our output.
func TestZonedAddressesAreRefused(t *testing.T) {
	_, err := Routes("ipam.routes", []Route{{Dst: "fe80::/64", GW: "fe80::1%eth0"}})
	require.Error(t, err)
	assert.Equal(t, `ipam.routes[0].gw: invalid IP address "fe80::1%eth0"`, err.Error())
	_, err = ParseAddr("ipam.addresses[0].gateway", "fe80::1%eth0")
	require.Error(t, err)
	assert.Equal(t, cnierror.CodeInvalidConfig, cnierror.Code(err))
}

// Routes to one destination through different gateways all stay: the main plugin adds
// them as next hops of one destination, as the reference does (upstream row P26).
func TestRoutesToOneDestinationAreNotDeduplicated(t *testing.T) {
	got, err := Routes("ipam.routes", []Route{{Dst: "0.0.0.0/0", GW: "10.1.0.1"}, {Dst: "0.0.0.0/0", GW: "10.1.0.254"}})
	require.NoError(t, err)
	require.Len(t, got, 2)
	assert.Equal(t, netip.MustParseAddr("10.1.0.1"), got[0].GW)
	assert.Equal(t, netip.MustParseAddr("10.1.0.254"), got[1].GW)
}
