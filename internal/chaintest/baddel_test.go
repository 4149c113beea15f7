package chaintest_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	pt "github.com/cnikit/cni/internal/plugintest"
	"github.com/cnikit/cni/internal/testns"
)

// TestChainDelGoesOnPastBadLimits runs a ptp + bandwidth network through the cni
// binary's runner, bandwidth's limits bad (a burst without a rate): ADD fails at
// bandwidth after ptp made its veth and host-local its reservation; DEL must get past
// bandwidth to ptp, which removes them.
func TestChainDelGoesOnPastBadLimits(t *testing.T) {
	testns.RequireRoot(t)
	t.Parallel()
	bin := testns.Binary(t)
	host := testns.NewWithLoopback(t)
	cont := testns.NewWithLoopback(t)
	confDir, cacheDir, dataDir := t.TempDir(), t.TempDir(), t.TempDir()
	list := fmt.Sprintf(`{"cniVersion":"1.1.0","name":"bwnet","plugins":[
		{"type":"ptp","ipam":{"type":"host-local","dataDir":%q,"ranges":[[{"subnet":"10.78.0.0/24"}]]}},
		{"type":"bandwidth","ingressBurst":400000,"egressRate":8000000,"egressBurst":1}]}`, dataDir)
	require.NoError(t, os.WriteFile(filepath.Join(confDir, "10-bw.conflist"), []byte(list), 0o644))
	cni := func(cmd string) (string, int) {
		o := pt.RunCommand(t, host, []string{"NETCONFPATH=" + confDir, "CNI_PATH=" + t.TempDir(), "CNI_CACHE_DIR=" + cacheDir},
			nil, bin, cmd, "bwnet", cont.Path)
		return o.Stdout + o.Stderr, o.Exit
	}

	out, code := cni("add")
	require.Equal(t, 1, code, out)
	assert.Contains(t, out, "ingressRate", "the bad limits are named")
	links, err := host.Handle(t).LinkList()
	require.NoError(t, err)
	require.Len(t, links, 2, "premise: ptp's host veth is left behind by the failed ADD")

	out, code = cni("del")
	require.Equal(t, 0, code, out)
	assert.Equal(t, []string{"lo"}, pt.Links(t, host), "ptp's DEL ran")
	left, err := filepath.Glob(filepath.Join(dataDir, "bwnet", "10.*"))
	require.NoError(t, err)
	assert.Empty(t, left, "host-local released the address")
	assert.False(t, strings.Contains(out, "error"), out)
}
