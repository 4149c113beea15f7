package bandwidth

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cnikit/cni/internal/cnierror"
	"github.com/cnikit/cni/internal/link"
	pt "github.com/cnikit/cni/internal/plugintest"
	"github.com/cnikit/cni/internal/testns"
)

// badLimits are limits ADD refuses (a burst without a rate).
const badLimits = `"ingressBurst":400000,"egressRate":8000000,"egressBurst":1`

func TestExecdDelIgnoresTheLimits(t *testing.T) {
	testns.RequireRoot(t)
	t.Parallel()
	plugin := filepath.Join(testns.LinkPluginDir(t, "bandwidth"), "bandwidth")
	host := testns.NewWithLoopback(t)
	a := attach(t, host, "ctr-bad", 1)

	o := execBandwidth(t, host, plugin, "ADD", a.cid, a.cont.Path, conf("net1", badLimits, a.prev))
	require.True(t, pt.AssertFailed(t, o, cnierror.CodeInvalidConfig))

	o = execBandwidth(t, host, plugin, "DEL", a.cid, a.cont.Path, conf("net1", badLimits, ""))
	assert.Equal(t, 0, o.Exit, "DEL of the failed attachment: %s", o)

	// An attachment shaped with good limits is cleaned by a DEL whose limits went bad.
	o = execBandwidth(t, host, plugin, "ADD", a.cid, a.cont.Path, conf("net1", bothLimits, a.prev))
	require.Equal(t, 0, o.Exit, o.String())
	o = execBandwidth(t, host, plugin, "DEL", a.cid, a.cont.Path,
		conf("net1", `"ingressRate":"fast","egressBurst":-1`, `{"not":"a result"}`))
	assert.Equal(t, 0, o.Exit, o.String())
	_, err := host.Handle(t).LinkByName(ifbName("net1", a.cid))
	assert.True(t, link.IsNotFound(err), "ifb gone after DEL: %v", err)
}

// TestChainDelGoesOnPastBadLimits runs a ptp + bandwidth network through the cni
// binary's runner: ADD fails at bandwidth after ptp made its veth and host-local its
// reservation; DEL must get past bandwidth to ptp, which removes them.
func TestChainDelGoesOnPastBadLimits(t *testing.T) {
	testns.RequireRoot(t)
	t.Parallel()
	bin := testns.Binary(t)
	host := testns.NewWithLoopback(t)
	cont := testns.NewWithLoopback(t)
	confDir, cacheDir, dataDir := t.TempDir(), t.TempDir(), t.TempDir()
	list := fmt.Sprintf(`{"cniVersion":"1.1.0","name":"bwnet","plugins":[
		{"type":"ptp","ipam":{"type":"host-local","dataDir":%q,"ranges":[[{"subnet":"10.78.0.0/24"}]]}},
		{"type":"bandwidth",%s}]}`, dataDir, badLimits)
	require.NoError(t, os.WriteFile(filepath.Join(confDir, "10-bw.conflist"), []byte(list), 0o644))
	cni := func(cmd string) (string, int) {
		var out bytes.Buffer
		c := exec.Command(bin, cmd, "bwnet", cont.Path)
		c.Env = []string{"NETCONFPATH=" + confDir, "CNI_PATH=" + t.TempDir(), "CNI_CACHE_DIR=" + cacheDir}
		c.Stdout, c.Stderr = &out, &out
		var err error
		require.NoError(t, host.Do(func() error { err = c.Run(); return nil }))
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return out.String(), ee.ExitCode()
		}
		require.NoError(t, err)
		return out.String(), 0
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
