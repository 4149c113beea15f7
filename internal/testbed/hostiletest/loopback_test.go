package hostiletest

import (
	"net"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cnikit/cni/internal/core/cnierror"
	"github.com/cnikit/cni/internal/spec/skel"
	"github.com/cnikit/cni/internal/testbed/plugintest"
)

// TestLoopbackAsIfNameIsRefusedAndItsDelSucceeds: every container has lo from its birth,
// so no ADD of ours can have made it. ADD refuses it (code 4) before making anything,
// and DEL, which used to fail for ever on the kernel's refusal to delete lo ("operation
// not supported"), succeeds and leaves lo as it was.
func TestLoopbackAsIfNameIsRefusedAndItsDelSucceeds(t *testing.T) {
	t.Parallel()
	for _, plugin := range []string{"bridge", "ptp", "macvlan", "ipvlan", "vlan", "dummy", "tap", "flannel", "chain"} {
		t.Run(plugin, func(t *testing.T) {
			t.Parallel()
			n := newNode(t)
			c := n.NewContainer()
			conf := n.mainConf(plugin)
			_, err := n.exec(plugin, skel.CmdAdd, c.ID, c.NS.Path, "lo", conf)
			require.NotNil(t, err, "ADD of lo")
			assert.Equal(t, cnierror.CodeInvalidEnv, err.Code, describe(err))
			assert.Contains(t, err.Msg, "loopback")
			for i := range 2 {
				_, err = n.exec(plugin, skel.CmdDel, c.ID, c.NS.Path, "lo", conf)
				assert.Nil(t, err, "DEL %d: %s", i+1, describe(err))
			}
			assert.Equal(t, []string{"lo"}, plugintest.Links(t, c.NS))
			lo, lerr := c.NS.Handle(t).LinkByName("lo")
			require.NoError(t, lerr)
			assert.NotZero(t, lo.Attrs().Flags&net.FlagUp, "lo stays up")
			assert.Empty(t, n.Reservations())
			assert.Empty(t, n.flannelStored())
			for _, l := range n.hostLinks() {
				assert.Contains(t, []string{"hbr0", "cni0"}, l, "only the network's bridge may stay in the host")
			}
		})
	}
}
