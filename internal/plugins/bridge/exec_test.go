package bridge_test

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/containernetworking/cni/libcni"
	types100 "github.com/containernetworking/cni/pkg/types/100"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cnikit/cni/internal/testns"
)

func TestExecdBridgeAddCheckDel(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	dir := testns.LinkPluginDir(t, "bridge", "host-local")
	conf := w.conf(map[string]any{"isGateway": true, "ipMasq": true})
	a, b := testns.NewWithLoopback(t), testns.NewWithLoopback(t)

	out, err := w.execPlugin(dir, "bridge", "ADD", "exec-a", a.Path, conf)
	require.NoError(t, err)
	var res struct {
		CNIVersion string `json:"cniVersion"`
		Interfaces []struct{ Name, Sandbox string }
		IPs        []struct {
			Address   string
			Interface int
		}
	}
	require.NoError(t, json.Unmarshal([]byte(out), &res))
	assert.Equal(t, "1.1.0", res.CNIVersion)
	require.Len(t, res.Interfaces, 3)
	require.Len(t, res.IPs, 1)
	assert.Equal(t, 2, res.IPs[0].Interface)
	_, err = w.execPlugin(dir, "bridge", "ADD", "exec-b", b.Path, conf)
	require.NoError(t, err)
	assert.NoError(t, ping(t, b, res.IPs[0].Address[:len(res.IPs[0].Address)-3]))

	var c map[string]any
	require.NoError(t, json.Unmarshal(conf, &c))
	c["prevResult"] = json.RawMessage(out)
	withPrev, _ := json.Marshal(c)
	_, err = w.execPlugin(dir, "bridge", "CHECK", "exec-a", a.Path, withPrev)
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
	cni := libcni.NewCNIConfigWithCacheDir([]string{dir}, t.TempDir(), nil)
	list, err := libcni.ConfListFromBytes([]byte(fmt.Sprintf(`{
		"cniVersion": "1.1.0", "name": "testnet",
		"plugins": [
			{"type": "loopback"},
			{"type": "bridge", "bridge": "cnibr0", "isDefaultGateway": true, "ipMasq": true,
			 "ipam": {"type": "host-local", "dataDir": %q, "ranges": [[{"subnet": "10.81.0.0/24"}]]}}
		]}`, w.dataDir)))
	require.NoError(t, err)
	ctr := testns.New(t)
	rt := &libcni.RuntimeConf{ContainerID: "libcni-bridge", NetNS: ctr.Path, IfName: "eth0"}
	ctx := context.Background()

	var addErr, checkErr, delErr, del2Err error
	var r *types100.Result
	w.host.Run(t, func() error {
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
	require.Len(t, r.Interfaces, 3)
	assert.Equal(t, "eth0", r.Interfaces[2].Name)
	require.Len(t, r.IPs, 1)
	assert.Equal(t, "10.81.0.1", r.IPs[0].Gateway.String())
	assert.NoError(t, checkErr)
	assert.NoError(t, delErr)
	assert.NoError(t, del2Err, "DEL twice")
	entries, _ := filepath.Glob(filepath.Join(w.dataDir, "testnet", "10.*"))
	assert.Empty(t, entries)
}
