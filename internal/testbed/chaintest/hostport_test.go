package chaintest_test

import (
	"context"
	"fmt"
	"net"
	"testing"

	"github.com/containernetworking/cni/libcni"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	pt "github.com/cnikit/cni/internal/testbed/plugintest"
	"github.com/cnikit/cni/internal/testbed/testns"
)

// recreateConf is a bridge network with portmap on a given backend.
const recreateConf = `{
  "cniVersion": "1.0.0",
  "name": "recreate",
  "plugins": [
    {
      "type": "bridge", "bridge": "cni-recreate", "isGateway": true,
      "ipam": { "type": "host-local", "dataDir": %q, "ranges": [[{ "subnet": "10.89.0.0/24" }]],
                "routes": [{ "dst": "0.0.0.0/0" }] }
    },
    { "type": "portmap", "backend": %q, "capabilities": { "portMappings": true } }
  ]
}`

// TestSandboxRecreatedBeforeTheOldDelThroughLibcni is a runtime re-creating a pod's
// sandbox before the old sandbox's DEL came: the new one maps the same host port. Both
// ADDs succeed on both backends, as with the reference; the old sandbox keeps the port
// until its DEL, after which the new one answers; the new one passes CHECK throughout.
func TestSandboxRecreatedBeforeTheOldDelThroughLibcni(t *testing.T) {
	pt.ForEachBackend(t, func(t *testing.T, backend string) {
		t.Parallel()
		testns.RequireRoot(t)
		host, client := testns.NewWithLoopback(t), testns.NewWithLoopback(t)
		connect(t, host, client)
		list, err := libcni.ConfListFromBytes([]byte(fmt.Sprintf(recreateConf, t.TempDir(), backend)))
		require.NoError(t, err)
		cni := libcni.NewCNIConfigWithCacheDir([]string{testns.LinkPluginDir(t, "bridge", "host-local", "portmap")}, t.TempDir(), nil)
		ctx := context.Background()
		sandbox := func(id string) *libcni.RuntimeConf {
			ns := testns.New(t)
			serve(t, ns, id)
			return &libcni.RuntimeConf{ContainerID: id, NetNS: ns.Path, IfName: "eth0",
				CapabilityArgs: map[string]any{"portMappings": []map[string]any{
					{"hostPort": hostPort, "containerPort": containerPort, "protocol": "tcp"}}}}
		}
		old, recreated := sandbox("sandbox-old"), sandbox("sandbox-new")
		for _, rt := range []*libcni.RuntimeConf{old, recreated} {
			host.Run(t, func() error {
				_, err := cni.AddNetworkList(ctx, list, rt)
				return err
			})
		}
		host.Run(t, func() error { return cni.CheckNetworkList(ctx, list, recreated) })
		addr := net.JoinHostPort(hostAddr, fmt.Sprint(hostPort))
		got, err := dialName(client, addr)
		require.NoError(t, err)
		assert.Equal(t, "sandbox-old", got, "the first mapping answers until its DEL")

		host.Run(t, func() error { return cni.DelNetworkList(ctx, list, old) })
		got, err = dialName(client, addr)
		require.NoError(t, err)
		assert.Equal(t, "sandbox-new", got, "the old sandbox's DEL leaves the new mapping")
		host.Run(t, func() error { return cni.CheckNetworkList(ctx, list, recreated) })

		host.Run(t, func() error { return cni.DelNetworkList(ctx, list, recreated) })
		_, err = dialName(client, addr)
		assert.Error(t, err, "the host port is closed after both DELs")
	})
}
