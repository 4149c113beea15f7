//go:build crio

package crioe2e

import (
	"testing"

	"github.com/cnikit/cni/tools/crinode/podtest"
)

// TestTwentyPodsAtOnce: twenty pods run and are deleted at once, as kubelet's pod
// workers do, half of them shaped, each with a host port CRI-O maps: each CHECKed,
// each with an address of its own, each reached, nothing left.
func TestTwentyPodsAtOnce(t *testing.T) {
	for _, side := range sides {
		t.Run(side.name, func(t *testing.T) {
			n := startCRIO(t, side, crioList, nil)
			peer, base := withPeer(t, n)

			podtest.ManyAtOnce(t, n, peer, podNamespace, 20)
			requireNothingLeft(t, n, base)
		})
	}
}
