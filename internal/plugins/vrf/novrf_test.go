package vrf_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/containernetworking/cni/libcni"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cnikit/cni/internal/chain"
	"github.com/cnikit/cni/internal/core/cnierror"
	"github.com/cnikit/cni/internal/dispatch"
	"github.com/cnikit/cni/internal/testbed/kernelfeature"
	pt "github.com/cnikit/cni/internal/testbed/plugintest"
	"github.com/cnikit/cni/internal/testbed/testns"
)

// On a kernel without VRF support, ADD is "try again later" naming the missing
// support, and it changes nothing: no link, the interface keeps its addresses.
func TestNoVRFSupportIsTryAgainLaterAndLeavesNothing(t *testing.T) {
	requireNoVRF(t)
	t.Parallel()
	w, prev := newNet1(t)
	before := w.routes(254, "net1")
	_, err := w.invoke("ADD", "net1", conf(t, prev, `"vrfname":"blue"`))
	pt.RequireRefused(t, err, cnierror.CodeTryAgainLater, "no VRF support")
	assert.Nil(t, w.link("blue"))
	assert.Equal(t, "", w.masterOf("net1"))
	assert.Equal(t, before, w.routes(254, "net1"))
	_, err = w.invoke("DEL", "net1", conf(t, prev, `"vrfname":"blue"`))
	assert.NoError(t, err, "DEL after the failed ADD")
}

// chainConf is bridge (host-local) then vrf, as a conflist.
func chainConf(dataDir string) string {
	return fmt.Sprintf(`{"cniVersion":"1.1.0","name":"vrfchain","plugins":[
		{"type":"bridge","bridge":"vrfbr0","isGateway":true,
		 "ipam":{"type":"host-local","dataDir":%q,"ranges":[[{"subnet":"10.81.0.0/24"}]]}},
		{"type":"vrf","vrfname":"blue"}]}`, dataDir)
}

// leftovers lists what an attachment left: veths on the host, links in the container
// but lo, and host-local reservations.
func leftovers(t *testing.T, host, ctr *testns.NS, dataDir string) []string {
	t.Helper()
	var out []string
	links, err := host.Handle(t).LinkList()
	require.NoError(t, err)
	for _, l := range links {
		if l.Type() == "veth" {
			out = append(out, "host veth "+l.Attrs().Name)
		}
	}
	links, err = ctr.Handle(t).LinkList()
	require.NoError(t, err)
	for _, l := range links {
		if l.Attrs().Name != "lo" {
			out = append(out, "container link "+l.Attrs().Name)
		}
	}
	for _, r := range pt.Reservations(t, filepath.Join(dataDir, "vrfchain")) {
		out = append(out, "reservation "+r)
	}
	return out
}

// The chain runner sees vrf fail with code 11 after bridge succeeded; the DEL a runtime
// then sends (through the runner, as always) undoes bridge and host-local.
func TestRunnerUndoesTheChainWhenVRFIsMissing(t *testing.T) {
	requireNoVRF(t)
	t.Parallel()
	host, ctr := pt.HostAndContainer(t)
	dataDir := t.TempDir()
	n, err := chain.Parse([]byte(chainConf(dataDir)))
	require.NoError(t, err)
	r := &chain.Runner{Builtin: dispatch.Lookup, PluginPath: []string{t.TempDir()}, CacheDir: t.TempDir(), Env: os.Environ()}
	att := chain.Attachment{ContainerID: "vrf-ctr", Netns: ctr.Path, IfName: "eth0"}
	ctx := context.Background()

	var addErr, delErr error
	host.Run(t, func() error {
		_, addErr = r.Add(ctx, n, att)
		delErr = r.Del(ctx, n, att)
		return nil
	})
	require.Error(t, addErr)
	assert.Equal(t, cnierror.CodeTryAgainLater, cnierror.Code(addErr), "%v", addErr)
	assert.Contains(t, addErr.Error(), `type="vrf"`)
	require.NoError(t, delErr)
	assert.Empty(t, leftovers(t, host, ctr, dataDir))
}

func TestLibcniNoVRFSupportThenDelLeavesNothing(t *testing.T) {
	requireNoVRF(t)
	t.Parallel()
	host, ctr := pt.HostAndContainer(t)
	dataDir := t.TempDir()
	run := pt.Libcni(t, host, testns.LinkPluginDir(t, "bridge", "host-local", "vrf"), chainConf(dataDir),
		&libcni.RuntimeConf{ContainerID: "vrf-libcni", NetNS: ctr.Path, IfName: "eth0"})
	require.Error(t, run.AddErr)
	assert.True(t, strings.Contains(run.AddErr.Error(), "no VRF support"), "%v", run.AddErr)
	require.NoError(t, run.DelErr)
	require.NoError(t, run.Del2Err)
	assert.Empty(t, leftovers(t, host, ctr, dataDir))
}

// With VRF support, the same chain through libcni puts the bridge's interface into the
// VRF and DEL removes everything.
func TestLibcniBridgeIntoVRF(t *testing.T) {
	kernelfeature.Require(t, kernelfeature.VRF)
	t.Parallel()
	host, ctr := pt.HostAndContainer(t)
	dataDir := t.TempDir()
	c := pt.NewLibcni(t, host, testns.LinkPluginDir(t, "bridge", "host-local", "vrf"), chainConf(dataDir),
		&libcni.RuntimeConf{ContainerID: "vrf-libcni", NetNS: ctr.Path, IfName: "eth0"})
	w := &world{t: t, host: host, cont: ctr}

	_, err := c.Add()
	require.NoError(t, err)
	require.NoError(t, c.Check())
	assert.Equal(t, "blue", w.masterOf("eth0"))
	require.NoError(t, c.Del())
	assert.Empty(t, leftovers(t, host, ctr, dataDir))
}
