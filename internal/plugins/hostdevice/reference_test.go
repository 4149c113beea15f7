package hostdevice

import (
	"net"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cnikit/cni/internal/result"
	"github.com/cnikit/cni/internal/spec/skel"
	pt "github.com/cnikit/cni/internal/testbed/plugintest"
	"github.com/cnikit/cni/internal/testbed/reftest"
)

// TestReferenceAttachmentIsCheckedDeletedAndCollectedByOurs: a pod whose device the
// reference host-device (v1.9.1) moved in, its host name in the device's alias and
// its address from the reference host-local, on a node where our binary took over.
// Our CHECK accepts it; our DEL brings the device home by its alias (netns alive) or
// finds it died with a netns that is gone, and releases the address either way; GC of
// the network releases it too. Nothing of the pod is left.
func TestReferenceAttachmentIsCheckedDeletedAndCollectedByOurs(t *testing.T) {
	t.Parallel()
	for _, tc := range []string{"DEL, netns alive", "DEL, netns gone", "GC, netns gone"} {
		t.Run(tc, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			orig := e.device(t, "hd0", 1400, true)
			conf := e.config(t, e.withIPAM(map[string]any{"device": "hd0"}, "10.20.0.0/24"))
			var out []byte
			var err error
			e.host.Run(t, func() error {
				out, err = reftest.Exec(t, reftest.Call{Plugin: "host-device", Command: "ADD", ContainerID: "c1",
					Netns: e.cont.Path, IfName: "eth0", Config: conf})
				return nil
			})
			require.NoError(t, err)
			in := pt.AttrsIn(t, e.cont, "eth0")
			require.NotNil(t, in, "premise: moved in by the reference")
			require.Equal(t, "hd0", in.Alias)
			require.Len(t, e.reservations(t), 1)
			require.Empty(t, e.states(t), "the reference keeps no state file")

			res, err := result.Parse(out, "1.1.0")
			require.NoError(t, err)
			_, err = e.invoke(skel.CmdCheck, pt.WithPrev(t, conf, res))
			require.NoError(t, err, "CHECK of the reference's attachment")

			if tc != "DEL, netns alive" {
				e.cont.Close() // the veth device dies with it
				e.netns = filepath.Join(t.TempDir(), "gone")
			}
			if tc == "GC, netns gone" {
				_, err = e.invokeAs(skel.CmdGC, "", "", gcConf(t, conf))
				require.NoError(t, err)
			} else {
				for i := range 2 {
					_, err = e.invoke(skel.CmdDel, conf)
					require.NoError(t, err, "DEL %d", i+1)
				}
			}
			assert.Empty(t, e.reservations(t))
			assert.Empty(t, e.states(t))
			if tc == "DEL, netns alive" {
				back := pt.AttrsIn(t, e.host, "hd0")
				require.NotNil(t, back, "home under the name its alias kept")
				assert.Empty(t, back.Alias)
				assert.Equal(t, orig.HardwareAddr, back.HardwareAddr)
				assert.Zero(t, back.Flags&net.FlagUp, "down, as the reference's own DEL leaves it")
				assert.Equal(t, []string{"lo"}, pt.Links(t, e.cont))
			} else {
				assert.Nil(t, pt.AttrsIn(t, e.host, "hd0"), "the virtual device died with its netns")
			}
		})
	}
}
