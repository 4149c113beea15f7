package hostdevice

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

// execPlugin runs the host-device binary (a link to the cni binary) inside the host
// namespace as a runtime would: env and stdin in, result or error JSON out.
func (e *env) execPlugin(t testing.TB, dir, cmd string, config []byte) ([]byte, error) {
	t.Helper()
	o := e.execd(t, dir, cmd, config)
	return []byte(o.Stdout), o.Err
}

// execd is execPlugin's whole outcome, for a test of what a runtime sees of a failure.
func (e *env) execd(t testing.TB, dir, cmd string, config []byte) pt.Outcome {
	t.Helper()
	return pt.Exec(t, e.host, pt.Call{Bin: filepath.Join(dir, "host-device"), Command: cmd, ContainerID: "c1",
		Netns: e.netnsPath(), IfName: "eth0", Config: config})
}

func TestExecdBadInputIsACNIErrorNamingTheField(t *testing.T) {
	e := newEnv(t)
	orig := e.device(t, "hd0", 1500, true)
	dir := testns.LinkPluginDir(t, "host-device")
	for _, tc := range []struct {
		name  string
		conf  map[string]any
		field string
	}{
		{"two selectors", map[string]any{"device": "hd0", "hwaddr": "02:00:00:00:00:01"}, "device, hwaddr"},
		{"no selector", map[string]any{}, "exactly one"},
		{"missing device", map[string]any{"device": "nope0"}, "device"},
		{"bad hwaddr", map[string]any{"hwaddr": "nope"}, "hwaddr"},
		{"bad pciBusID", map[string]any{"pciBusID": "0000:zz:00.0"}, "pciBusID"},
		{"bad deviceID", map[string]any{"runtimeConfig": map[string]any{"deviceID": "../x"}}, "runtimeConfig.deviceID"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pt.AssertFailed(t, e.execd(t, dir, "ADD", e.config(t, tc.conf)), cnierror.CodeInvalidConfig, tc.field)
			assertUntouched(t, e, orig)
		})
	}
	assert.NotNil(t, pt.AttrsIn(t, e.host, "hd0"))
	assert.Equal(t, []string{"lo"}, pt.Links(t, e.cont))
	assert.Empty(t, e.states(t))
}

func TestExecdAddCheckDelDelAgain(t *testing.T) {
	e := newEnv(t)
	e.device(t, "hd0", 1400, true, "10.20.0.1/24")
	dir := testns.LinkPluginDir(t, "host-device", "host-local")
	conf := e.config(t, e.withIPAM(map[string]any{"device": "hd0"}, "10.20.0.0/24"))
	out, err := e.execPlugin(t, dir, "ADD", conf)
	require.NoError(t, err, string(out))
	out, err = e.execPlugin(t, dir, "CHECK", pt.WithPrevJSON(t, conf, out))
	require.NoError(t, err, string(out))
	for range 2 {
		out, err = e.execPlugin(t, dir, "DEL", conf)
		require.NoError(t, err, string(out))
	}
	back := pt.AttrsIn(t, e.host, "hd0")
	require.NotNil(t, back)
	assert.Equal(t, 1400, back.MTU)
	assert.Empty(t, e.reservations(t))
}

func TestLibcniAddCheckDelDelAgain(t *testing.T) {
	e := newEnv(t)
	orig := e.device(t, "hd0", 1400, true)
	dir := testns.LinkPluginDir(t, "host-device", "host-local")
	run := pt.Libcni(t, e.host, dir, `{"cniVersion":"1.1.0","name":"hdnet","plugins":[
		{"type":"host-device","device":"hd0","dataDir":"`+e.dataDir+`",
		 "ipam":{"type":"host-local","dataDir":"`+e.ipamDir+`","ranges":[[{"subnet":"10.20.0.0/24"}]]}}]}`,
		&libcni.RuntimeConf{ContainerID: "libcni-hd", NetNS: e.cont.Path, IfName: "net1"})
	r := run.Result
	require.NoError(t, run.AddErr)
	require.Len(t, r.Interfaces, 1)
	assert.Equal(t, "net1", r.Interfaces[0].Name)
	assert.Equal(t, e.cont.Path, r.Interfaces[0].Sandbox)
	assert.Equal(t, orig.HardwareAddr.String(), r.Interfaces[0].Mac)
	require.Len(t, r.IPs, 1)
	assert.NoError(t, run.CheckErr)
	assert.NoError(t, run.DelErr)
	assert.NoError(t, run.Del2Err, "DEL again")
	assert.NotNil(t, pt.AttrsIn(t, e.host, "hd0"))
	assert.Empty(t, e.reservations(t))
}
