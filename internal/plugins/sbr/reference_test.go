package sbr_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cnikit/cni/internal/testbed/reftest"
	"github.com/cnikit/cni/internal/testbed/testns"
)

// TestReferenceAttachmentIsCheckedAndDeletedByOurs: a pod whose interface the reference
// sbr (v1.9.1) routed, on a node where our binary took over. Our CHECK accepts the
// reference's rule and table (its default route and the routes it copied); our DEL
// removes them, with the netns alive (and puts back into main what the reference moved
// out of it, which the reference's own DEL never does) or gone.
func TestReferenceAttachmentIsCheckedAndDeletedByOurs(t *testing.T) {
	t.Parallel()
	for _, netns := range []string{"alive", "gone"} {
		t.Run(netns, func(t *testing.T) {
			t.Parallel()
			w := newWorld(t)
			prev := w.iface("net1", ipGw{"10.60.0.2/24", "10.60.0.1"}, ipGw{"fd60::2/64", "fd60::1"})
			mainBefore := w.mainRoutes("net1")
			c := conf(t, prev, "")
			_, err := reftest.Exec(t, reftest.Call{Plugin: "sbr", Command: "ADD", ContainerID: "ctr1",
				Netns: w.cont.Path, IfName: "net1", Config: c})
			require.NoError(t, err)
			require.ElementsMatch(t, []string{"from 10.60.0.2/32 lookup 100", "from fd60::2/128 lookup 101"}, w.rules(),
				"premise: the reference's rules")
			require.Contains(t, w.routes(100, "net1"), "default via 10.60.0.1")

			_, err = w.invoke("CHECK", w.cont.Path, "net1", c)
			require.NoError(t, err, "CHECK of the reference's attachment")

			path := w.cont.Path
			if netns == "gone" {
				w.cont.Close()
			}
			for i := range 2 {
				_, err = w.invoke("DEL", path, "net1", c)
				require.NoError(t, err, "DEL %d", i+1)
			}
			if netns == "gone" {
				return // the rules and tables died with the namespace
			}
			assert.Empty(t, w.rules())
			assert.Empty(t, w.routes(100, "net1"))
			assert.Empty(t, w.routes(101, "net1"))
			assert.ElementsMatch(t, mainBefore, w.mainRoutes("net1"), "main is as before the reference's ADD")
		})
	}
}

// The reference sbr (v1.9.1) accepts a prevResult whose addresses are all on other
// interfaces for an interface without addresses, and routes nothing: but it still takes
// every route of the interface out of main, into no table, so the container loses them.
// Ours leaves them (TestAddOfAnInterfaceWithoutAddressesPassesPrevResultThrough).
func TestReferenceEmptiesMainOfAnInterfaceWithoutAddresses(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	prev := prevResult("net1", w.cont.Path, ipGw{"10.60.0.2/24", ""})
	w.iface("net2")
	testns.Route(t, w.cont, "net2", "10.77.0.0/16", "")
	require.Equal(t, []string{"10.77.0.0/16 proto 3 metric 0"}, w.mainRoutes("net2"), "premise")
	_, err := reftest.Exec(t, reftest.Call{Plugin: "sbr", Command: "ADD", ContainerID: "ctr1",
		Netns: w.cont.Path, IfName: "net2", Config: conf(t, prev, "")})
	require.NoError(t, err, "the reference accepts the shape")
	assert.Empty(t, w.rules())
	assert.Empty(t, w.mainRoutes("net2"), "the reference took the route out of main")
	assert.Empty(t, w.routes(100, "net2"), "and put it in no table")
}
