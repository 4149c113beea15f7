package chaintest_test

import (
	"context"
	"fmt"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/containernetworking/cni/libcni"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/vishvananda/netlink"

	"github.com/cnikit/cni/internal/testbed/nfttest"
	"github.com/cnikit/cni/internal/testbed/testns"
)

const (
	hostAddr      = "10.99.0.1"
	clientAddr    = "10.99.0.2"
	containerPort = 80
	hostPort      = 8080
)

// podmanConf is podman's default network (87-podman-bridge.conflist) with the
// host-local (and tuning) data dirs moved into the test's temp dirs.
const podmanConf = `{
  "cniVersion": "0.4.0",
  "name": "podman",
  "plugins": [
    {
      "type": "bridge",
      "bridge": "cni-podman0",
      "isGateway": true,
      "ipMasq": true,
      "hairpinMode": true,
      "ipam": {
        "type": "host-local",
        "dataDir": %q,
        "routes": [{ "dst": "0.0.0.0/0" }],
        "ranges": [[{ "subnet": "10.88.0.0/16", "gateway": "10.88.0.1" }]]
      }
    },
    { "type": "portmap", "capabilities": { "portMappings": true } },
    { "type": "firewall" },
    { "type": "tuning", "dataDir": %q }
  ]
}`

// nomadConf is the chain Nomad writes for a task group in bridge networking mode.
const nomadConf = `{
  "cniVersion": "0.4.0",
  "name": "nomad",
  "plugins": [
    { "type": "loopback" },
    {
      "type": "bridge",
      "bridge": "nomad",
      "ipMasq": true,
      "isGateway": true,
      "forceAddress": true,
      "hairpinMode": true,
      "ipam": {
        "type": "host-local",
        "dataDir": %q,
        "ranges": [[{ "subnet": "172.26.64.0/20" }]],
        "routes": [{ "dst": "0.0.0.0/0" }]
      }
    },
    { "type": "firewall", "backend": "iptables", "iptablesAdminChainName": "NOMAD-ADMIN" },
    { "type": "portmap", "capabilities": { "portMappings": true }, "snat": true }
  ]
}`

func TestPodmanDefaultNetworkThroughLibcni(t *testing.T) {
	// Keep the auto-detected firewall backend away from any firewalld of the machine:
	// the exec'd plugins inherit this environment.
	t.Setenv("DBUS_SYSTEM_BUS_ADDRESS", "unix:path="+filepath.Join(t.TempDir(), "no-system-bus"))
	conf := fmt.Sprintf(podmanConf, t.TempDir(), t.TempDir())
	lifecycle(t, conf, "cni-podman0", "CNI-ADMIN",
		[]string{"bridge", "host-local", "portmap", "firewall", "tuning"})
}

func TestNomadBridgeModeThroughLibcni(t *testing.T) {
	conf := fmt.Sprintf(nomadConf, t.TempDir())
	lifecycle(t, conf, "nomad", "NOMAD-ADMIN",
		[]string{"loopback", "bridge", "host-local", "firewall", "portmap"})
}

// lifecycle runs ADD, CHECK and DEL of conf through libcni in a host netns, with a
// client netns routed to the host, and checks that the mapped port answers from the
// container and that DEL leaves no firewall rule of the container.
func lifecycle(t *testing.T, conf, bridge, adminChain string, plugins []string) {
	testns.RequireRoot(t)
	host, client, cont := testns.NewWithLoopback(t), testns.NewWithLoopback(t), testns.New(t)
	connect(t, host, client)
	serve(t, cont, "container")

	list, err := libcni.ConfListFromBytes([]byte(conf))
	require.NoError(t, err)
	cni := libcni.NewCNIConfigWithCacheDir([]string{testns.LinkPluginDir(t, plugins...)}, t.TempDir(), nil)
	rt := &libcni.RuntimeConf{
		ContainerID: "ctr-" + list.Name, NetNS: cont.Path, IfName: "eth0",
		CapabilityArgs: map[string]any{"portMappings": []map[string]any{
			{"hostPort": hostPort, "containerPort": containerPort, "protocol": "tcp"}}},
	}
	ctx := context.Background()

	host.Run(t, func() error {
		_, err := cni.AddNetworkList(ctx, list, rt)
		return err
	})
	host.Run(t, func() error { return cni.CheckNetworkList(ctx, list, rt) })

	got, err := dialName(client, net.JoinHostPort(hostAddr, fmt.Sprint(hostPort)))
	require.NoError(t, err, "the mapped port must answer from the container")
	assert.Equal(t, "container", got)

	// Either rule backend, as the node's rule says: iptables where the host keeps its
	// rules there and the tools are installed, nftables otherwise.
	rules := firewallState(t, host)
	iptablesLayout := strings.Contains(rules, `-A FORWARD -m comment --comment "CNI firewall plugin rules" -j CNI-FORWARD`) &&
		strings.Contains(rules, "-j "+adminChain) && strings.Contains(rules, `id: \"`+rt.ContainerID+`\"`)
	nftablesLayout := strings.Contains(rules, "table inet cni_firewall\n") &&
		strings.Contains(rules, "\tjump "+adminChain+" comment") && strings.Contains(rules, "id="+rt.ContainerID+`"`)
	assert.True(t, iptablesLayout || nftablesLayout, "the firewall lets the container through, jumping to %s: %s", adminChain, rules)
	links, err := host.Handle(t).LinkList()
	require.NoError(t, err)
	assert.True(t, hasLink(links, bridge), "bridge %s must exist", bridge)

	host.Run(t, func() error { return cni.DelNetworkList(ctx, list, rt) })
	host.Run(t, func() error { return cni.DelNetworkList(ctx, list, rt) })
	assert.NotContains(t, firewallState(t, host), rt.ContainerID, "DEL must leave no firewall rule of the container")
	_, err = dialName(client, net.JoinHostPort(hostAddr, fmt.Sprint(hostPort)))
	assert.Error(t, err, "the mapped port must be gone after DEL")
}

// firewallState is the host's nf_tables ruleset read over netlink and, where the
// firewall binaries are, the filter and nat tables as iptables-save prints them.
func firewallState(t *testing.T, host *testns.NS) string {
	t.Helper()
	var b strings.Builder
	b.WriteString(nfttest.Ruleset(t, host))
	if testns.FirewallBinariesHidden() {
		return b.String()
	}
	for _, cmd := range []string{"iptables-save", "ip6tables-save"} {
		out, err := host.Exec(t, cmd)
		require.NoError(t, err, out)
		b.WriteString(out)
	}
	return b.String()
}

func hasLink(links []netlink.Link, name string) bool {
	for _, l := range links {
		if l.Attrs().Name == name {
			return true
		}
	}
	return false
}

// connect links client to host with a veth: hostAddr on the host, clientAddr in the
// client, whose default route points at the host.
func connect(t *testing.T, host, client *testns.NS) {
	testns.Veth(t, host, "vclient", []string{hostAddr + "/24"}, client, "vclientp", []string{clientAddr + "/24"})
	testns.DefaultRoutes(t, client, "vclientp", hostAddr)
}

// serve answers TCP connections on containerPort inside n with name. The listener is
// made before the network exists; a socket bound to the wildcard address keeps working
// once the interface arrives.
func serve(t *testing.T, n *testns.NS, name string) {
	testns.ServeTCP(t, n, "tcp4", fmt.Sprintf(":%d", containerPort), name)
}

func dialName(n *testns.NS, addr string) (string, error) {
	return testns.DialTCP(n, addr, 2*time.Second)
}
