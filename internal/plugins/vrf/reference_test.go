package vrf_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cnikit/cni/internal/testbed/kernelfeature"
	"github.com/cnikit/cni/internal/testbed/reftest"
)

// TestReferenceAttachmentIsCheckedAndDeletedByOurs: a pod whose interface the reference
// vrf (v1.9.1) put into a VRF, on a node where our binary took over. Our CHECK accepts
// the reference's VRF and membership; our DEL takes the interface out and deletes the
// VRF it leaves empty, with the netns alive, and succeeds with it gone.
func TestReferenceAttachmentIsCheckedAndDeletedByOurs(t *testing.T) {
	kernelfeature.Require(t, kernelfeature.VRF)
	t.Parallel()
	for _, netns := range []string{"alive", "gone"} {
		t.Run(netns, func(t *testing.T) {
			t.Parallel()
			w, prev := newNet1(t)
			c := conf(t, prev, `"vrfname":"blue","table":1001`)
			_, err := reftest.Exec(t, reftest.Call{Plugin: "vrf", Command: "ADD", ContainerID: "ctr1",
				Netns: w.cont.Path, IfName: "net1", Config: c})
			require.NoError(t, err)
			require.Equal(t, "blue", w.masterOf("net1"), "premise: the reference's VRF")

			_, err = w.invoke("CHECK", "net1", c)
			require.NoError(t, err, "CHECK of the reference's attachment")

			if netns == "gone" {
				path := w.cont.Path
				w.cont.Close()
				_, err = w.invokeIn(path, "DEL", "net1", c)
				require.NoError(t, err)
				return
			}
			for i := range 2 {
				_, err = w.invoke("DEL", "net1", c)
				require.NoError(t, err, "DEL %d", i+1)
			}
			assert.Equal(t, "", w.masterOf("net1"))
			assert.Nil(t, w.link("blue"), "the VRF the reference made is gone with its last member")
		})
	}
}
