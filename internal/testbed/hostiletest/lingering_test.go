package hostiletest

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cnikit/cni/internal/plugins/attachment/attachmenttest"
	"github.com/cnikit/cni/internal/result"
	"github.com/cnikit/cni/internal/spec/skel"
	"github.com/cnikit/cni/internal/testbed/plugintest"
	"github.com/cnikit/cni/internal/testbed/testns"
)

// TestDelWithTheNetnsPathGoneWhileTheNamespaceLingers: the runtime's netns path is gone
// but the namespace lives on, held by a process (here, the test). The veth pair lived
// on with it: its host end, the bandwidth qdisc on it, its routes, until that process
// exited (the reference too). DEL now deletes the host end from the host's side,
// found through the cached result, and only that link: a host link the cached result
// names that is not the pair's end stays.
func TestDelWithTheNetnsPathGoneWhileTheNamespaceLingers(t *testing.T) {
	t.Parallel()
	for _, plugin := range []string{"bridge", "ptp", "flannel", "chain"} {
		t.Run(plugin, func(t *testing.T) {
			t.Parallel()
			n := newNode(t)
			conf := n.mainConf(plugin)
			if plugin == "chain" {
				conf = n.conf(plugin, map[string]any{"plugins": []any{
					map[string]any{"type": "bridge", "bridge": "hbr0", "ipam": n.hostLocal(attachmenttest.Subnet)},
					map[string]any{"type": "bandwidth", "ingressRate": 8000000, "ingressBurst": 80000,
						"egressRate": 8000000, "egressBurst": 80000},
				}})
			}
			c := n.NewContainer()
			out, cerr := n.exec(plugin, skel.CmdAdd, c.ID, c.NS.Path, "eth0", conf)
			require.Nil(t, cerr, describe(cerr))
			res, err := result.Parse([]byte(out), "1.1.0")
			require.NoError(t, err)
			require.NotEmpty(t, hostVeths(n.hostLinks()), "premise: a host veth")

			// A host link of the node that the cached result names beside the pair's end:
			// a veth to elsewhere, as the pair's end is, but neither a port of the bridge
			// nor holding a route to the container.
			testns.Veth(t, n.Host, "vethdecoy", nil, testns.New(t), "decoyp", nil)
			decoy, err := n.Host.Handle(t).LinkByName("vethdecoy")
			require.NoError(t, err)
			res.AddInterface(result.Interface{Name: "vethdecoy", Mac: decoy.Attrs().HardwareAddr.String()})

			gone := filepath.Join(t.TempDir(), "netns-gone")
			withPrev := plugintest.WithPrev(t, conf, res)
			for i := range 2 {
				_, cerr = n.exec(plugin, skel.CmdDel, c.ID, gone, "eth0", withPrev)
				require.Nil(t, cerr, "DEL %d: %s", i+1, describe(cerr))
			}
			assert.Equal(t, []string{"vethdecoy"}, hostVeths(n.hostLinks()), "the pair's host end is gone, the decoy stays")
			for _, l := range n.hostLinks() {
				assert.False(t, strings.HasPrefix(l, "bwp"), "bandwidth's ifb %s is gone", l)
			}
			assert.Equal(t, []string{"lo"}, plugintest.Links(t, c.NS), "the container end went with the pair")
			assert.Empty(t, n.Reservations())
			assert.Empty(t, n.flannelStored())
		})
	}
}

// hostVeths picks the host veths (the reference's "veth<8 hex>" names and the decoy)
// out of a listing.
func hostVeths(links []string) []string {
	var out []string
	for _, l := range links {
		if strings.HasPrefix(l, "veth") {
			out = append(out, l)
		}
	}
	return out
}
