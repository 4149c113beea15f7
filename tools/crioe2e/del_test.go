//go:build crio

package crioe2e

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cnikit/cni/tools/crinode"
	"github.com/cnikit/cni/tools/crinode/podtest"
)

// oneAddressList is the standard chain on a /30: the gateway takes 10.88.0.1, so every
// pod gets 10.88.0.2 and the next pod needs the address the last one held.
var oneAddressList = strings.Replace(crioList, `"10.88.0.0/16"`, `"10.88.0.0/30"`, 1)

// TestDELThatFailsOnce: a pod's DEL fails once (the plugin that runs first in DEL is
// not there for it: a node mid-upgrade). CRI-O v1.34.0 reports it and keeps the
// sandbox (the cache entry too), so kubelet's next StopPodSandbox runs the DEL again:
// that one must free everything the first left, so that the next pod, given the same
// address, works and leaves nothing behind. (Where CRI-O drops the cache entry and
// never retries, GC at its next start frees the address: TestGCAtCRIOStartWithPodsGone.)
func TestDELThatFailsOnce(t *testing.T) {
	for _, side := range sides {
		t.Run(side.name, func(t *testing.T) {
			var o crinode.Options
			n := startCRIO(t, side, oneAddressList, func(opt *crinode.Options) { o = *opt })
			peer, base := withPeer(t, n)

			first := newPod("first", 8110, "1M")
			first.Run(t, n)
			require.Equal(t, "10.88.0.2", first.IP(t, n))
			hidden := hidePlugin(t, o)
			stopErr, removeErr := n.CRI.StopPod(first.ID), n.CRI.RemovePod(first.ID)
			require.Error(t, errors.Join(stopErr, removeErr), "CRI-O reports the failed DEL")
			require.NoError(t, os.Rename(hidden+".hidden", hidden))
			s, err := n.State()
			require.NoError(t, err)
			require.Equal(t, []string{"std/10.88.0.2"}, s.Reservations, "the failed DEL left the address reserved")

			// kubelet's next attempt: its StopPodSandbox runs the DEL again, which must
			// free the address.
			require.NoError(t, n.CRI.StopPod(first.ID))
			s, err = n.State()
			require.NoError(t, err)
			assert.Empty(t, s.Reservations, "the retried DEL frees the address")
			// CRI-O v1.34.0's own bookkeeping fails every later RemovePodSandbox after a
			// failed one ("failed to delete container ... from index: no such id"): the
			// sandbox stays listed, its network gone. That is CRI-O's, not the plugins'.
			if err := n.CRI.RemovePod(first.ID); err != nil {
				require.ErrorContains(t, err, "from index: no such id")
			}
			next := newPod("next", 8111, "1M")
			next.Run(t, n)
			assert.Equal(t, "10.88.0.2", next.IP(t, n), "the next pod on the address")
			next.Reach(t, peer)
			next.StopAndRemove(t, n)
			// CRI-O logged the failed DEL as an error: its own, not the plugins'.
			podtest.RequireNothingLeft(t, n, base, first.ID)
		})
	}
}

// hidePlugin renames away the binary of the list's last plugin, the one libcni runs
// first in DEL, and returns its path (the caller renames path.hidden back).
func hidePlugin(t *testing.T, o crinode.Options) string {
	t.Helper()
	var list struct {
		Plugins []struct {
			Type string `json:"type"`
		} `json:"plugins"`
	}
	require.NoError(t, json.Unmarshal(o.ConfList, &list))
	require.NotEmpty(t, list.Plugins)
	path := filepath.Join(o.BinDir, list.Plugins[len(list.Plugins)-1].Type)
	require.NoError(t, os.Rename(path, path+".hidden"))
	return path
}
