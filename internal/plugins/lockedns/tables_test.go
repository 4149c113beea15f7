package lockedns_test

import (
	"net/netip"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/vishvananda/netlink"

	"github.com/cnikit/cni/internal/host/link"
	"github.com/cnikit/cni/internal/plugins/lockedns"
	"github.com/cnikit/cni/internal/testbed/testns"
)

// A configured table must be one the kernel has and does not keep for itself.
func TestCheckTableRefusesReservedAndOutOfRange(t *testing.T) {
	for _, bad := range []int64{-1, 0, 253, 254, 255, 1 << 32} {
		assert.Error(t, lockedns.CheckTable(bad), "table %d", bad)
	}
	for _, good := range []int64{1, 100, 252, 256, 1<<32 - 1} {
		assert.NoError(t, lockedns.CheckTable(good), "table %d", good)
	}
}

// The search skips used tables and the reserved ones, and starts where it is told.
func TestFreeTableSkipsUsedAndReserved(t *testing.T) {
	assert.Equal(t, 1, lockedns.FreeTable(map[int]bool{}, 1))
	assert.Equal(t, 102, lockedns.FreeTable(map[int]bool{100: true, 101: true, 103: true}, 100))
	assert.Equal(t, 257, lockedns.FreeTable(map[int]bool{252: true, 256: true}, 252))
}

// A table only a rule points at, and one only a route is in, are both used.
func TestUsedTablesSeesRulesAndRoutes(t *testing.T) {
	testns.RequireRoot(t)
	n := testns.NewWithLoopback(t)
	ns, err := link.Open(n.Path)
	require.NoError(t, err)
	defer ns.Close()
	h := ns.Handle()
	rule := netlink.NewRule()
	rule.Table = 1000
	require.NoError(t, h.RuleAdd(rule))
	lo, err := h.LinkByName("lo")
	require.NoError(t, err)
	require.NoError(t, h.RouteAdd(&netlink.Route{LinkIndex: lo.Attrs().Index, Dst: link.IPNet(netip.MustParsePrefix("10.9.0.0/24")), Table: 1001}))

	used, err := lockedns.UsedTables(h)
	require.NoError(t, err)
	assert.True(t, used[1000], "the rule's table")
	assert.True(t, used[1001], "the route's table")
	assert.False(t, used[1002])
	assert.Equal(t, 1002, lockedns.FreeTable(used, 1000))
}
