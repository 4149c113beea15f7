package hostiletest

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cnikit/cni/internal/core/cnierror"
	"github.com/cnikit/cni/internal/plugins/attachment/attachmenttest"
	"github.com/cnikit/cni/internal/spec/skel"
	"github.com/cnikit/cni/internal/testbed/plugintest"
)

// TestIfNamesTheKernelReservesAreRefusedAndTheirDelSucceeds: "all" and "default" pass
// the spec's interface name rule, but the kernel refuses them for any link (they name
// the per-family defaults under /proc/sys/net/ipv{4,6}/conf). ADD answered the kernel's
// bare "invalid argument" as 999, and macvlan blamed its mode and master (code 7, "a
// master must be an Ethernet device"); now it is code 4 naming CNI_IFNAME before
// anything is made, and DEL, with nothing to delete, succeeds.
func TestIfNamesTheKernelReservesAreRefusedAndTheirDelSucceeds(t *testing.T) {
	t.Parallel()
	for _, ifName := range []string{"all", "default"} {
		for _, plugin := range []string{"bridge", "ptp", "macvlan", "ipvlan", "vlan", "dummy", "tap", "flannel", "chain"} {
			t.Run(ifName+"/"+plugin, func(t *testing.T) {
				t.Parallel()
				n := newNode(t)
				c := n.NewContainer()
				conf := n.mainConf(plugin)
				_, err := n.exec(plugin, skel.CmdAdd, c.ID, c.NS.Path, ifName, conf)
				require.NotNil(t, err, "ADD of %s", ifName)
				assert.Equal(t, cnierror.CodeInvalidEnv, err.Code, describe(err))
				assert.Contains(t, err.Msg, "CNI_IFNAME")
				for i := range 2 {
					_, err = n.exec(plugin, skel.CmdDel, c.ID, c.NS.Path, ifName, conf)
					assert.Nil(t, err, "DEL %d: %s", i+1, describe(err))
				}
				assert.Equal(t, []string{"lo"}, plugintest.Links(t, c.NS))
				assert.Empty(t, n.Reservations())
				assert.Empty(t, n.flannelStored())
				for _, l := range n.hostLinks() {
					assert.Contains(t, []string{"hbr0", "cni0"}, l, "only the network's bridge may stay in the host")
				}
			})
		}
	}
}

// TestLinkNamesTheKernelReservesAreInvalidConfig: a bridge or VRF the config names "all"
// or "default" is code 7 naming the key (it was the kernel's "invalid argument" as 999),
// and DEL, which reads only that name, finds nothing made and succeeds.
func TestLinkNamesTheKernelReservesAreInvalidConfig(t *testing.T) {
	t.Parallel()
	for _, name := range []string{"all", "default"} {
		for plugin, key := range map[string]string{"bridge": "bridge", "vrf": "vrfname"} {
			t.Run(name+"/"+plugin, func(t *testing.T) {
				t.Parallel()
				n := newNode(t)
				c := n.NewContainer()
				keys := map[string]any{key: name}
				if plugin == "bridge" {
					keys["ipam"] = n.hostLocal(attachmenttest.Subnet)
				} else {
					keys["prevResult"] = map[string]any{"cniVersion": "1.1.0",
						"interfaces": []any{map[string]any{"name": "eth0", "sandbox": c.NS.Path}}}
				}
				conf := n.conf(plugin, keys)
				_, err := n.exec(plugin, skel.CmdAdd, c.ID, c.NS.Path, "eth0", conf)
				require.NotNil(t, err, "ADD")
				assert.Equal(t, cnierror.CodeInvalidConfig, err.Code, describe(err))
				assert.Contains(t, err.Msg, key+":")
				_, err = n.exec(plugin, skel.CmdDel, c.ID, c.NS.Path, "eth0", conf)
				assert.Nil(t, err, "DEL: %s", describe(err))
				assert.Empty(t, n.hostLinks())
				assert.Empty(t, n.Reservations())
			})
		}
	}
}
