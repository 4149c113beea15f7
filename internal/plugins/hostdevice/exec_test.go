package hostdevice

import (
	"bytes"
	"context"
	"encoding/json"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/containernetworking/cni/libcni"
	types100 "github.com/containernetworking/cni/pkg/types/100"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cnikit/cni/internal/testns"
)

// execTimeout bounds an exec'd call: a plugin hanging on a FIFO fails the test.
const execTimeout = 30 * time.Second

// execPlugin runs the host-device binary (a link to the cni binary) inside the host
// namespace as a runtime would: env and stdin in, result or error JSON out.
func (e *env) execPlugin(t testing.TB, dir, cmd string, config []byte) ([]byte, error) {
	t.Helper()
	var stdout bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), execTimeout)
	defer cancel()
	err := e.host.Do(func() error {
		c := exec.CommandContext(ctx, filepath.Join(dir, "host-device"))
		c.Env = []string{"CNI_COMMAND=" + cmd, "CNI_CONTAINERID=c1", "CNI_NETNS=" + e.netnsPath(),
			"CNI_IFNAME=eth0", "CNI_PATH=" + dir}
		c.Stdin, c.Stdout = bytes.NewReader(config), &stdout
		return c.Run()
	})
	require.NoError(t, ctx.Err(), "%s did not finish within %v", cmd, execTimeout)
	return stdout.Bytes(), err
}

func TestExecdBadInputIsACNIErrorNamingTheField(t *testing.T) {
	e := newEnv(t)
	e.device(t, "hd0", 1500, true)
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
			out, err := e.execPlugin(t, dir, "ADD", e.config(t, tc.conf))
			require.Error(t, err, "non-zero exit")
			var ce struct {
				Code uint
				Msg  string
			}
			require.NoError(t, json.Unmarshal(out, &ce), string(out))
			assert.Equal(t, uint(7), ce.Code)
			assert.Contains(t, ce.Msg, tc.field)
		})
	}
	assert.NotNil(t, linkIn(t, e.host, "hd0"))
	assert.Equal(t, []string{"lo"}, names(t, e.cont))
	assert.Empty(t, e.states(t))
}

func TestExecdAddCheckDelDelAgain(t *testing.T) {
	e := newEnv(t)
	e.device(t, "hd0", 1400, true, "10.20.0.1/24")
	dir := testns.LinkPluginDir(t, "host-device", "host-local")
	conf := e.config(t, e.withIPAM(map[string]any{"device": "hd0"}, "10.20.0.0/24"))
	out, err := e.execPlugin(t, dir, "ADD", conf)
	require.NoError(t, err, string(out))
	var c map[string]any
	require.NoError(t, json.Unmarshal(conf, &c))
	c["prevResult"] = json.RawMessage(out)
	withPrev, err := json.Marshal(c)
	require.NoError(t, err)
	out, err = e.execPlugin(t, dir, "CHECK", withPrev)
	require.NoError(t, err, string(out))
	for range 2 {
		out, err = e.execPlugin(t, dir, "DEL", conf)
		require.NoError(t, err, string(out))
	}
	back := linkIn(t, e.host, "hd0")
	require.NotNil(t, back)
	assert.Equal(t, 1400, back.MTU)
	assert.Empty(t, e.reservations(t))
}

func TestLibcniAddCheckDelDelAgain(t *testing.T) {
	e := newEnv(t)
	orig := e.device(t, "hd0", 1400, true)
	dir := testns.LinkPluginDir(t, "host-device", "host-local")
	cni := libcni.NewCNIConfigWithCacheDir([]string{dir}, t.TempDir(), nil)
	list, err := libcni.ConfListFromBytes([]byte(`{"cniVersion":"1.1.0","name":"hdnet","plugins":[
		{"type":"host-device","device":"hd0","dataDir":"` + e.dataDir + `",
		 "ipam":{"type":"host-local","dataDir":"` + e.ipamDir + `","ranges":[[{"subnet":"10.20.0.0/24"}]]}}]}`))
	require.NoError(t, err)
	rt := &libcni.RuntimeConf{ContainerID: "libcni-hd", NetNS: e.cont.Path, IfName: "net1"}
	ctx := context.Background()

	var r *types100.Result
	var addErr, checkErr, delErr, del2Err error
	e.host.Run(t, func() error {
		res, err := cni.AddNetworkList(ctx, list, rt)
		if addErr = err; err != nil {
			return nil
		}
		if r, err = types100.GetResult(res); err != nil {
			return err
		}
		checkErr = cni.CheckNetworkList(ctx, list, rt)
		delErr = cni.DelNetworkList(ctx, list, rt)
		del2Err = cni.DelNetworkList(ctx, list, rt)
		return nil
	})
	require.NoError(t, addErr)
	require.Len(t, r.Interfaces, 1)
	assert.Equal(t, "net1", r.Interfaces[0].Name)
	assert.Equal(t, e.cont.Path, r.Interfaces[0].Sandbox)
	assert.Equal(t, orig.HardwareAddr.String(), r.Interfaces[0].Mac)
	require.Len(t, r.IPs, 1)
	assert.NoError(t, checkErr)
	assert.NoError(t, delErr)
	assert.NoError(t, del2Err, "DEL again")
	assert.NotNil(t, linkIn(t, e.host, "hd0"))
	assert.Empty(t, e.reservations(t))
}
