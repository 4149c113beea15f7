package sbr_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/containernetworking/cni/libcni"
	types100 "github.com/containernetworking/cni/pkg/types/100"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cnikit/cni/internal/sysctl"
	"github.com/cnikit/cni/internal/testns"
)

// A container on two bridges: eth0 carries its default route, net1 is the second
// network. A client behind the host reaches the container's net1 address; the host
// drops packets that arrive on the wrong bridge for their source (strict rp_filter), so
// the reply gets through only if it leaves by net1, as sbr makes it.
func TestLibcniRepliesLeaveByTheInterfaceTheyArrivedOn(t *testing.T) {
	t.Parallel()
	testns.RequireRoot(t)
	host, ctr, client := testns.NewWithLoopback(t), testns.NewWithLoopback(t), testns.NewWithLoopback(t)
	host.Run(t, func() error {
		if err := sysctl.EnableForwarding(true, false); err != nil {
			return err
		}
		return sysctl.Set("net/ipv4/conf/all/rp_filter", "1")
	})
	testns.Veth(t, host, "vcl", []string{"10.99.0.1/24"}, client, "eth0", []string{"10.99.0.2/24"})
	testns.DefaultRoutes(t, client, "eth0", "10.99.0.1")
	port := testns.ServeTCP(t, ctr, "tcp", ":0", "ctr")

	dir := testns.LinkPluginDir(t, "bridge", "host-local", "sbr")
	cni := libcni.NewCNIConfigWithCacheDir([]string{dir}, t.TempDir(), nil)
	dataDir := t.TempDir()
	bridgeConf := func(br, subnet, extra string) string {
		return fmt.Sprintf(`{"type":"bridge","bridge":%q%s,"ipam":{"type":"host-local","dataDir":%q,"ranges":[[{"subnet":%q}]]}}`,
			br, extra, dataDir, subnet)
	}
	list := func(name string, plugins ...string) *libcni.NetworkConfigList {
		l, err := libcni.ConfListFromBytes([]byte(fmt.Sprintf(`{"cniVersion":"1.1.0","name":%q,"plugins":[%s]}`,
			name, strings.Join(plugins, ","))))
		require.NoError(t, err)
		return l
	}
	netA := list("neta", bridgeConf("sbra0", "10.10.1.0/24", `,"isDefaultGateway":true`))
	plainB := list("netb", bridgeConf("sbrb0", "10.10.2.0/24", `,"isGateway":true`))
	routedB := list("netb", bridgeConf("sbrb0", "10.10.2.0/24", `,"isGateway":true`), `{"type":"sbr"}`)
	rtA := &libcni.RuntimeConf{ContainerID: "sbr-ctr", NetNS: ctr.Path, IfName: "eth0"}
	rtB := &libcni.RuntimeConf{ContainerID: "sbr-ctr", NetNS: ctr.Path, IfName: "net1"}
	ctx := context.Background()
	w := &world{t: t, host: host, cont: ctr}

	var addrB string
	addB := func(l *libcni.NetworkConfigList) {
		host.Run(t, func() error {
			res, err := cni.AddNetworkList(ctx, l, rtB)
			if err != nil {
				return err
			}
			r, err := types100.GetResult(res)
			if err != nil {
				return err
			}
			addrB = r.IPs[0].Address.IP.String()
			return nil
		})
	}
	host.Run(t, func() error { _, err := cni.AddNetworkList(ctx, netA, rtA); return err })

	addB(plainB)
	_, err := testns.DialTCP(client, fmt.Sprintf("%s:%d", addrB, port), time.Second)
	require.Error(t, err, "without sbr the reply leaves by eth0 and the host drops it")
	host.Run(t, func() error { return cni.DelNetworkList(ctx, plainB, rtB) })

	addB(routedB)
	got, err := testns.DialTCP(client, fmt.Sprintf("%s:%d", addrB, port), 2*time.Second)
	require.NoError(t, err)
	assert.Equal(t, "ctr", got)
	assert.Equal(t, []string{"from " + addrB + "/32 lookup 100"}, w.rules())

	host.Run(t, func() error { return cni.CheckNetworkList(ctx, routedB, rtB) })
	host.Run(t, func() error { return cni.DelNetworkList(ctx, routedB, rtB) })
	host.Run(t, func() error { return cni.DelNetworkList(ctx, routedB, rtB) })
	assert.Empty(t, w.rules(), "DEL leaves no rule")
	host.Run(t, func() error { return cni.DelNetworkList(ctx, netA, rtA) })
}
