package flannel_test

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/containernetworking/cni/libcni"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cnikit/cni/internal/host/sysctl"
	pt "github.com/cnikit/cni/internal/testbed/plugintest"
	"github.com/cnikit/cni/internal/testbed/testns"
)

// k3s's flannel conflist (flannel delegating to bridge, then portmap) run by libcni:
// a mapped host port answers a client in another namespace, and DEL removes it all.
func TestLibcniFlannelWithPortmapServesAMappedPort(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	w.writeEnv(fmt.Sprintf(v4Env, "false"))
	client, ctr := testns.NewWithLoopback(t), testns.NewWithLoopback(t)
	w.host.Run(t, func() error { return sysctl.EnableForwarding(true, false) })
	testns.Veth(t, w.host, "vcl", []string{"10.99.0.1/24"}, client, "eth0", []string{"10.99.0.2/24"})
	testns.DefaultRoutes(t, client, "eth0", "10.99.0.1")
	testns.ServeTCP(t, ctr, "tcp", ":8080", "flannel-pod")

	c := pt.NewLibcni(t, w.host, testns.LinkPluginDir(t, "flannel", "portmap"), fmt.Sprintf(`{"cniVersion":"1.0.0","name":"flnet","plugins":[
		{"type":"flannel","subnetFile":%q,"dataDir":%q,"ipam":{"dataDir":%q},
		 "delegate":{"hairpinMode":true,"forceAddress":true,"isDefaultGateway":true}},
		{"type":"portmap","capabilities":{"portMappings":true}}]}`, w.subnetFile, w.dataDir, w.ipamDataDir),
		&libcni.RuntimeConf{ContainerID: "flannel-pod", NetNS: ctr.Path, IfName: "eth0",
			CapabilityArgs: map[string]any{"portMappings": []map[string]any{{"hostPort": 18080, "containerPort": 8080, "protocol": "tcp"}}}})

	_, err := c.Add()
	require.NoError(t, err)
	require.NoError(t, c.Check())
	got, err := testns.DialTCP(client, "10.99.0.1:18080", 2*time.Second)
	require.NoError(t, err)
	assert.Equal(t, "flannel-pod", got)

	require.NoError(t, c.Del())
	require.NoError(t, c.Del())
	_, err = testns.DialTCP(client, "10.99.0.1:18080", 500*time.Millisecond)
	assert.Error(t, err, "the mapping is gone")
	assert.Empty(t, w.reservations())
	assert.Empty(t, w.stored())
	assert.Empty(t, w.hostVeths()[1:], "only the client's veth is left")
}

// A delegate type that is not built in is exec'd from CNI_PATH with the delegate config
// on stdin, for ADD and DEL alike.
func TestExternalDelegateIsExecd(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	w.writeEnv(fmt.Sprintf(v4Env, "true"))
	w.linkRecorder()
	records := filepath.Join(t.TempDir(), "records")
	ctr := testns.NewWithLoopback(t)
	c := w.conf(fmt.Sprintf(`"delegate":{"type":"recorder","recordFile":%q}`, records))

	res, err := w.invoke("ADD", "ctr-a", ctr.Path, c)
	require.NoError(t, err)
	require.Len(t, res.Interfaces, 1, "the recorder's own interface")
	_, err = w.invoke("DEL", "ctr-a", ctr.Path, c)
	require.NoError(t, err)

	recs := pt.Records[struct{ Command, Stdin string }](t, records)
	require.Len(t, recs, 2)
	add, del := recs[0], recs[1]
	assert.Equal(t, "ADD", add.Command)
	assert.Equal(t, "DEL", del.Command)
	assert.Equal(t, add.Stdin, del.Stdin, "DEL runs with the stored config")
	var deleg map[string]any
	require.NoError(t, json.Unmarshal([]byte(add.Stdin), &deleg))
	assert.Equal(t, "flnet", deleg["name"])
	assert.Equal(t, "recorder", deleg["type"])
	assert.Nil(t, deleg["isGateway"], "isGateway is a bridge default only")
	assert.Equal(t, 1400.0, deleg["mtu"])
}

// The binary exec'd as flannel: a missing subnet file is code 11, a partial one code 7
// naming the keys, a bad delegate object code 7, each with exit status 1.
func TestExecdBadInputIsACNIError(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	plugin := testns.LinkPlugin(t, "flannel")
	ctr := testns.NewWithLoopback(t)
	run := func(config []byte) (uint, string) {
		o := pt.Exec(t, nil, pt.Call{Bin: plugin, Command: "ADD", ContainerID: "ctr1", Netns: ctr.Path, IfName: "eth0",
			Config: config})
		assert.Equal(t, 1, o.Exit, o)
		require.NotNil(t, o.CNIError(), o)
		return o.Code(), o.CNIError().Msg
	}
	code, msg := run(w.conf(""))
	assert.Equal(t, uint(11), code, msg)
	w.writeEnv("FLANNEL_SUBNET=10.244.3.1/24\nFLANNEL_MTU=1400\n")
	code, msg = run(w.conf(""))
	assert.Equal(t, uint(7), code, msg)
	assert.Contains(t, msg, "missing FLANNEL_NETWORK, FLANNEL_IPMASQ")
	w.writeEnv(fmt.Sprintf(v4Env, "true"))
	code, msg = run(w.conf(`"delegate":{"name":"x"}`))
	assert.Equal(t, uint(7), code, msg)
	assert.Empty(t, w.stored())
	assert.Empty(t, w.reservations())
}
