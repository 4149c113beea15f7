package tap

import (
	"path/filepath"
	"testing"

	"github.com/containernetworking/cni/libcni"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cnikit/cni/internal/core/cnierror"
	pt "github.com/cnikit/cni/internal/testbed/plugintest"
	"github.com/cnikit/cni/internal/testbed/testns"
)

// execPlugin runs the tap binary (a link to the cni binary) inside the host namespace as
// a runtime would, with PATH empty: nothing but the binary itself can be exec'd.
func (e *env) execPlugin(t testing.TB, dir, cmd, cniArgs string, config []byte) ([]byte, error) {
	t.Helper()
	o := e.execd(t, dir, cmd, cniArgs, config)
	return []byte(o.Stdout), o.Err
}

// execd is execPlugin's whole outcome, for a test of what a runtime sees of a failure.
func (e *env) execd(t testing.TB, dir, cmd, cniArgs string, config []byte) pt.Outcome {
	t.Helper()
	return pt.Exec(t, e.host, pt.Call{Bin: filepath.Join(dir, "tap"), Command: cmd, ContainerID: "c1",
		Netns: e.netnsPath(), IfName: "tap0", Args: cniArgs, Config: config, Env: []string{"PATH="}})
}

func TestExecdBadInputIsACNIErrorNamingTheField(t *testing.T) {
	e := newEnv(t)
	dir := testns.LinkPluginDir(t, "tap")
	for _, tc := range []struct {
		name    string
		conf    map[string]any
		cniArgs string
		field   string
	}{
		{"bad mac", map[string]any{"mac": "nope"}, "", "mac"},
		{"bad CNI_ARGS MAC", nil, "MAC=02:00", "CNI_ARGS MAC"},
		{"mtu out of range", map[string]any{"mtu": 65536}, "", "mtu"},
		{"missing bridge", map[string]any{"bridge": "br0"}, "", "bridge"},
		{"owner of the wrong type", map[string]any{"owner": "root"}, "", "owner"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pt.AssertFailed(t, e.execd(t, dir, "ADD", tc.cniArgs, e.config(t, tc.conf)), cnierror.CodeInvalidConfig, tc.field)
		})
	}
	assert.Equal(t, []string{"lo"}, pt.Links(t, e.cont))
	assert.Equal(t, []string{"lo"}, pt.Links(t, e.host))
}

func TestExecdAddWithoutBothOwnerAndGroupNeedsNoIPTool(t *testing.T) {
	e := newEnv(t)
	dir := testns.LinkPluginDir(t, "tap")
	// The reference execs `ip tuntap` unless both owner and group are set; with PATH
	// empty that would fail.
	conf := e.config(t, map[string]any{"owner": 1000, "multiQueue": true, "mtu": 1500})
	out, err := e.execPlugin(t, dir, "ADD", "MAC=02:00:00:00:00:11", conf)
	require.NoError(t, err, string(out))
	tap := tapIn(t, e.cont, "tap0")
	require.NotNil(t, tap)
	assert.Equal(t, "02:00:00:00:00:11", tap.HardwareAddr.String())
	for range 2 {
		out, err = e.execPlugin(t, dir, "DEL", "", conf)
		require.NoError(t, err, string(out))
	}
	assert.Equal(t, []string{"lo"}, pt.Links(t, e.cont))
}

func TestLibcniAddCheckDelDelAgain(t *testing.T) {
	e := newEnv(t)
	dir := testns.LinkPluginDir(t, "tap", "host-local")
	run := pt.Libcni(t, e.host, dir, `{"cniVersion":"1.1.0","name":"tapnet","plugins":[
		{"type":"tap","multiQueue":true,"capabilities":{"mac":true},
		 "ipam":{"type":"host-local","dataDir":"`+e.ipamDir+`","ranges":[[{"subnet":"10.40.0.0/24"}]]}}]}`,
		&libcni.RuntimeConf{ContainerID: "libcni-tap", NetNS: e.cont.Path, IfName: "tap0",
			CapabilityArgs: map[string]any{"mac": "02:00:00:00:00:21"}})
	r := run.Result
	require.NoError(t, run.AddErr)
	require.Len(t, r.Interfaces, 1)
	assert.Equal(t, "tap0", r.Interfaces[0].Name)
	assert.Equal(t, e.cont.Path, r.Interfaces[0].Sandbox)
	assert.Equal(t, "02:00:00:00:00:21", r.Interfaces[0].Mac, "the mac capability")
	require.Len(t, r.IPs, 1)
	assert.NoError(t, run.CheckErr)
	assert.NoError(t, run.DelErr)
	assert.NoError(t, run.Del2Err, "DEL again")
	assert.Equal(t, []string{"lo"}, pt.Links(t, e.cont))
	assert.Empty(t, e.reservations(t))
}
