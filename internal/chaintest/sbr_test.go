package chaintest_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/containernetworking/cni/libcni"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	pt "github.com/cnikit/cni/internal/plugintest"
	"github.com/cnikit/cni/internal/sysctl"
	"github.com/cnikit/cni/internal/testns"
)

// A container on two bridges: eth0 carries its default route, net1 is the second
// network. A client behind the host reaches the container's net1 address; the host
// drops packets that arrive on the wrong bridge for their source (strict rp_filter), so
// the reply gets through only if it leaves by net1, as sbr makes it.
func TestLibcniRepliesLeaveByTheInterfaceTheyArrivedOn(t *testing.T) {
	t.Parallel()
	host, ctr := pt.HostAndContainer(t)
	client := testns.NewWithLoopback(t)
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
	dataDir := t.TempDir()
	bridgeConf := func(br, subnet, extra string) string {
		return fmt.Sprintf(`{"type":"bridge","bridge":%q%s,"ipam":{"type":"host-local","dataDir":%q,"ranges":[[{"subnet":%q}]]}}`,
			br, extra, dataDir, subnet)
	}
	network := func(name, ifName string, plugins ...string) *pt.LibcniClient {
		return pt.NewLibcni(t, host, dir, fmt.Sprintf(`{"cniVersion":"1.1.0","name":%q,"plugins":[%s]}`,
			name, strings.Join(plugins, ",")), &libcni.RuntimeConf{ContainerID: "sbr-ctr", NetNS: ctr.Path, IfName: ifName})
	}
	netA := network("neta", "eth0", bridgeConf("sbra0", "10.10.1.0/24", `,"isDefaultGateway":true`))
	plainB := network("netb", "net1", bridgeConf("sbrb0", "10.10.2.0/24", `,"isGateway":true`))
	routedB := network("netb", "net1", bridgeConf("sbrb0", "10.10.2.0/24", `,"isGateway":true`), `{"type":"sbr"}`)
	addB := func(c *pt.LibcniClient) string {
		r, err := c.Add()
		require.NoError(t, err)
		return r.IPs[0].Address.IP.String()
	}
	_, err := netA.Add()
	require.NoError(t, err)

	addrB := addB(plainB)
	_, err = testns.DialTCP(client, fmt.Sprintf("%s:%d", addrB, port), time.Second)
	require.Error(t, err, "without sbr the reply leaves by eth0 and the host drops it")
	require.NoError(t, plainB.Del())

	addrB = addB(routedB)
	got, err := testns.DialTCP(client, fmt.Sprintf("%s:%d", addrB, port), 2*time.Second)
	require.NoError(t, err)
	assert.Equal(t, "ctr", got)
	assert.Equal(t, []string{"from " + addrB + "/32 lookup 100"}, pt.SourceRules(t, ctr))

	require.NoError(t, routedB.Check())
	require.NoError(t, routedB.Del())
	require.NoError(t, routedB.Del())
	assert.Empty(t, pt.SourceRules(t, ctr), "DEL leaves no rule")
	require.NoError(t, netA.Del())
}
