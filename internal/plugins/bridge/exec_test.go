package bridge_test

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/containernetworking/cni/libcni"
	types100 "github.com/containernetworking/cni/pkg/types/100"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	pt "github.com/cnikit/cni/internal/testbed/plugintest"
	"github.com/cnikit/cni/internal/testbed/testns"
)

func TestExecdBridgeAddCheckDel(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	dir := testns.LinkPluginDir(t, "bridge", "host-local")
	conf := w.conf(map[string]any{"isGateway": true, "ipMasq": true})
	a, b := testns.NewWithLoopback(t), testns.NewWithLoopback(t)

	out, err := w.execPlugin(dir, "bridge", "ADD", "exec-a", a.Path, conf)
	require.NoError(t, err)
	// Decoded as a runtime decodes it, with the reference library's result type.
	var res types100.Result
	require.NoError(t, json.Unmarshal([]byte(out), &res))
	assert.Equal(t, "1.1.0", res.CNIVersion)
	require.Len(t, res.Interfaces, 3)
	require.Len(t, res.IPs, 1)
	assert.Equal(t, types100.Int(2), res.IPs[0].Interface)
	_, err = w.execPlugin(dir, "bridge", "ADD", "exec-b", b.Path, conf)
	require.NoError(t, err)
	assert.NoError(t, ping(t, b, res.IPs[0].Address.IP.String()))

	_, err = w.execPlugin(dir, "bridge", "CHECK", "exec-a", a.Path, pt.WithPrevJSON(t, conf, []byte(out)))
	require.NoError(t, err)
	for range 2 {
		_, err = w.execPlugin(dir, "bridge", "DEL", "exec-a", a.Path, conf)
		require.NoError(t, err)
	}
	assert.Len(t, w.reservations(), 1)
}

func TestLibcniChainLoopbackBridgeHostLocal(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	dir := testns.LinkPluginDir(t, "loopback", "bridge", "host-local")
	ctr := testns.New(t)
	run := pt.Libcni(t, w.host, dir, fmt.Sprintf(`{
		"cniVersion": "1.1.0", "name": "testnet",
		"plugins": [
			{"type": "loopback"},
			{"type": "bridge", "bridge": "cnibr0", "isDefaultGateway": true, "ipMasq": true,
			 "ipam": {"type": "host-local", "dataDir": %q, "ranges": [[{"subnet": "10.81.0.0/24"}]]}}
		]}`, w.dataDir), &libcni.RuntimeConf{ContainerID: "libcni-bridge", NetNS: ctr.Path, IfName: "eth0"})
	require.NoError(t, run.AddErr)
	r := run.Result
	require.Len(t, r.Interfaces, 3)
	assert.Equal(t, "eth0", r.Interfaces[2].Name)
	require.Len(t, r.IPs, 1)
	assert.Equal(t, "10.81.0.1", r.IPs[0].Gateway.String())
	assert.NoError(t, run.CheckErr)
	assert.NoError(t, run.DelErr)
	assert.NoError(t, run.Del2Err, "DEL twice")
	assert.Empty(t, w.reservations())
}

// TestMistypedKeyIsWarnedOfAndAccepted: a key bridge does not know ("isGatway") is
// accepted, as runtimes add keys of their own, but the ADD says so once on stderr,
// naming the key it most likely meant, and in its invocation log line; stdout holds the
// result alone and the exit status is 0.
func TestMistypedKeyIsWarnedOfAndAccepted(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	dir := testns.LinkPluginDir(t, "bridge", "host-local")
	logFile := filepath.Join(t.TempDir(), "cni.log")
	conf := w.conf(map[string]any{"isGatway": true})
	ctr := testns.NewWithLoopback(t)
	o := pt.Exec(t, w.host, pt.Call{Bin: filepath.Join(dir, "bridge"), Command: "ADD", ContainerID: "typo-1", Netns: ctr.Path,
		IfName: "eth0", Config: conf, Env: []string{"CNI_LOG_FILE=" + logFile}})
	require.Equal(t, 0, o.Exit, "%s", o)
	const warning = `bridge: unknown config key "isGatway" (did you mean "isGateway"?); ignored`
	assert.Equal(t, warning+"\n", o.Stderr)
	var res types100.Result
	require.NoError(t, json.Unmarshal([]byte(o.Stdout), &res), "stdout is the result alone")
	assert.Len(t, res.IPs, 1)

	lines := pt.Records[struct {
		Plugin   string   `json:"plugin"`
		Warnings []string `json:"warnings"`
	}](t, logFile)
	require.NotEmpty(t, lines)
	var warned []string
	for _, l := range lines {
		if l.Plugin == "bridge" {
			warned = append(warned, l.Warnings...)
		} else {
			assert.Empty(t, l.Warnings, "%s warns of nothing: the key is bridge's", l.Plugin)
		}
	}
	assert.Equal(t, []string{warning}, warned)
}
