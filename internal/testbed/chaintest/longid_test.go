package chaintest_test

import (
	"context"
	"fmt"
	"net"
	"strings"
	"testing"

	"github.com/containernetworking/cni/libcni"
	"github.com/containernetworking/cni/pkg/types"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cnikit/cni/internal/host/owner"
	pt "github.com/cnikit/cni/internal/testbed/plugintest"
	"github.com/cnikit/cni/internal/testbed/testns"
)

// TestLongContainerIDsKeepTheirRulesApart runs, through libcni, two containers whose
// 240-character ids differ only in their last character: masquerade, port mappings and
// firewall rules, in both backends, and the MAC spoof check. Their rule comments (`name: "<net>" id: "<cid>"`)
// exceed the 255 bytes iptables keeps, which iptables-nft used to cut silently so that
// DEL left the firewall rules behind; cut to one shared prefix, DEL or GC of one would
// also have hit the other. Now each is tagged with its own hashed id: DEL and GC remove
// exactly one container's state.
func TestLongContainerIDsKeepTheirRulesApart(t *testing.T) {
	pt.ForEachBackend(t, func(t *testing.T, backend string) {
		testns.RequireRoot(t)
		host, client := testns.NewWithLoopback(t), testns.NewWithLoopback(t)
		connect(t, host, client)
		conf := fmt.Sprintf(`{"cniVersion":"1.1.0","name":"long","plugins":[
			{"type":"bridge","bridge":"cni-long","isGateway":true,"ipMasq":true,"ipMasqBackend":%q,"macspoofchk":true,
			 "ipam":{"type":"host-local","dataDir":%q,"ranges":[[{"subnet":"10.89.0.0/24"}]],"routes":[{"dst":"0.0.0.0/0"}]}},
			{"type":"portmap","backend":%q,"capabilities":{"portMappings":true}},
			{"type":"firewall","backend":"iptables"}]}`, backend, t.TempDir(), backend)
		list, err := libcni.ConfListFromBytes([]byte(conf))
		require.NoError(t, err)
		cni := libcni.NewCNIConfigWithCacheDir([]string{testns.LinkPluginDir(t, "bridge", "host-local", "portmap", "firewall")}, t.TempDir(), nil)
		ctx := context.Background()

		rts := make([]*libcni.RuntimeConf, 2)
		for i := range rts {
			cont := testns.New(t)
			name := fmt.Sprintf("container-%d", i)
			serve(t, cont, name)
			rts[i] = &libcni.RuntimeConf{
				ContainerID: strings.Repeat("a", 239) + fmt.Sprint(i), NetNS: cont.Path, IfName: "eth0",
				CapabilityArgs: map[string]any{"portMappings": []map[string]any{
					{"hostPort": hostPort + i, "containerPort": containerPort, "protocol": "tcp"}}},
			}
			host.Run(t, func() error { _, err := cni.AddNetworkList(ctx, list, rts[i]); return err })
			got, err := dialName(client, net.JoinHostPort(hostAddr, fmt.Sprint(hostPort+i)))
			require.NoError(t, err)
			require.Equal(t, name, got)
		}
		state := func() string { return firewallState(t, host) }
		tag := func(i int) string { return owner.Hashed(rts[i].ContainerID) }
		require.Contains(t, state(), tag(0))
		require.Contains(t, state(), tag(1))

		host.Run(t, func() error { return cni.DelNetworkList(ctx, list, rts[0]) })
		assert.NotContains(t, state(), tag(0), "DEL leaves nothing of the container")
		host.Run(t, func() error { return cni.CheckNetworkList(ctx, list, rts[1]) })
		got, err := dialName(client, net.JoinHostPort(hostAddr, fmt.Sprint(hostPort+1)))
		require.NoError(t, err, "the other container's mapping survives")
		assert.Equal(t, "container-1", got)

		valid := &libcni.GCArgs{ValidAttachments: []types.GCAttachment{{ContainerID: rts[1].ContainerID, IfName: "eth0"}}}
		host.Run(t, func() error { return cni.GCNetworkList(ctx, list, valid) })
		host.Run(t, func() error { return cni.CheckNetworkList(ctx, list, rts[1]) })
		host.Run(t, func() error { return cni.GCNetworkList(ctx, list, &libcni.GCArgs{}) })
		assert.NotContains(t, state(), tag(1), "GC removes what no valid attachment holds")
		host.Run(t, func() error { return cni.DelNetworkList(ctx, list, rts[1]) })
	})
}
