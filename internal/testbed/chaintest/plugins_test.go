package chaintest_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/containernetworking/cni/libcni"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/vishvananda/netlink"

	"github.com/cnikit/cni/internal/chain"
	"github.com/cnikit/cni/internal/dispatch"
	"github.com/cnikit/cni/internal/host/sysctl"
	pt "github.com/cnikit/cni/internal/testbed/plugintest"
	"github.com/cnikit/cni/internal/testbed/testns"
)

// The tests here are where plugins meet in one chain: what each plugin does alone is
// tested in its package.

// TestContainerReachesAnotherThroughAHostAddressWithoutBrNetfilter is podman's case on a
// plain host: container B connects to a host address's mapped port, which is DNATed to
// container A on the same bridge. With bridged frames not passing netfilter
// (bridge-nf-call-iptables=0, or br_netfilter not loaded), A's replies go straight to B
// over the bridge and skip the host's un-DNAT, unless the host masquerades B. Both
// backends must, in both families (the nftables one masqueraded only A itself).
func TestContainerReachesAnotherThroughAHostAddressWithoutBrNetfilter(t *testing.T) {
	pt.ForEachBackend(t, func(t *testing.T, backend string) {
		t.Parallel()
		testns.RequireRoot(t)
		host := testns.NewWithLoopback(t)
		host.Run(t, func() error {
			for _, name := range []string{"net/bridge/bridge-nf-call-iptables", "net/bridge/bridge-nf-call-ip6tables"} {
				if _, err := os.Stat("/proc/sys/" + name); err == nil {
					if err := sysctl.Set(name, "0"); err != nil {
						return err
					}
				}
			}
			if err := sysctl.Set("net/ipv6/conf/default/accept_dad", "0"); err != nil {
				return err
			}
			lo, err := netlink.LinkByName("lo")
			if err != nil {
				return err
			}
			// The host's own addresses the containers connect to.
			for _, a := range []string{"192.0.2.10/32", "2001:db8::10/128"} {
				addr, err := netlink.ParseAddr(a)
				if err != nil {
					return err
				}
				if err := netlink.AddrAdd(lo, addr); err != nil {
					return err
				}
			}
			return nil
		})
		runner := &chain.Runner{Builtin: dispatch.Lookup, PluginPath: []string{t.TempDir()}, CacheDir: t.TempDir(), Timeout: time.Minute}
		conf, err := json.Marshal(map[string]any{
			"cniVersion": "1.1.0", "name": "hairpin", "plugins": []any{
				map[string]any{"type": "bridge", "bridge": "cni-hp", "isGateway": true,
					"ipam": map[string]any{"type": "host-local", "dataDir": t.TempDir(),
						"ranges": []any{[]any{map[string]any{"subnet": "10.66.0.0/24"}}, []any{map[string]any{"subnet": "fd66::/64"}}},
						"routes": []any{map[string]any{"dst": "0.0.0.0/0"}, map[string]any{"dst": "::/0"}}}},
				map[string]any{"type": "portmap", "backend": backend, "capabilities": map[string]bool{"portMappings": true}},
			}})
		require.NoError(t, err)
		n, err := chain.Parse(conf)
		require.NoError(t, err)
		attach := func(id string, mappings any) *testns.NS {
			c := testns.NewWithLoopback(t)
			c.Run(t, func() error { return sysctl.Set("net/ipv6/conf/default/accept_dad", "0") })
			att := chain.Attachment{ContainerID: id, Netns: c.Path, IfName: "eth0"}
			if mappings != nil {
				att.CapabilityArgs = map[string]any{"portMappings": mappings}
			}
			host.Run(t, func() error {
				_, err := runner.Add(context.Background(), n, att)
				return err
			})
			t.Cleanup(func() {
				_ = host.Do(func() error { return runner.Del(context.Background(), n, att) })
			})
			return c
		}
		a := attach("ctr-a", []map[string]any{{"hostPort": 8080, "containerPort": 7000, "protocol": "tcp"}})
		testns.ServeTCP(t, a, "tcp", ":7000", "ctr-a")
		b := attach("ctr-b", nil)
		for _, addr := range []string{"192.0.2.10", "2001:db8::10"} {
			got, err := testns.DialTCP(b, net.JoinHostPort(addr, "8080"), 3*time.Second)
			if assert.NoError(t, err, "from B to %s", addr) {
				assert.Equal(t, "ctr-a", got, fmt.Sprintf("from B to %s", addr))
			}
		}
	})
}

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

// TestChainDelGoesOnPastBadLimits runs a ptp + bandwidth network through the cni
// binary's runner, bandwidth's limits bad (a burst without a rate): ADD fails at
// bandwidth after ptp made its veth and host-local its reservation; DEL must get past
// bandwidth to ptp, which removes them.
func TestChainDelGoesOnPastBadLimits(t *testing.T) {
	testns.RequireRoot(t)
	t.Parallel()
	bin := testns.Binary(t)
	host := testns.NewWithLoopback(t)
	cont := testns.NewWithLoopback(t)
	confDir, cacheDir, dataDir := t.TempDir(), t.TempDir(), t.TempDir()
	list := fmt.Sprintf(`{"cniVersion":"1.1.0","name":"bwnet","plugins":[
		{"type":"ptp","ipam":{"type":"host-local","dataDir":%q,"ranges":[[{"subnet":"10.78.0.0/24"}]]}},
		{"type":"bandwidth","ingressBurst":400000,"egressRate":8000000,"egressBurst":1}]}`, dataDir)
	require.NoError(t, os.WriteFile(filepath.Join(confDir, "10-bw.conflist"), []byte(list), 0o644))
	cni := func(cmd string) (string, int) {
		o := pt.RunCommand(t, host, []string{"NETCONFPATH=" + confDir, "CNI_PATH=" + t.TempDir(), "CNI_CACHE_DIR=" + cacheDir},
			nil, bin, cmd, "bwnet", cont.Path)
		return o.Stdout + o.Stderr, o.Exit
	}

	out, code := cni("add")
	require.Equal(t, 1, code, out)
	assert.Contains(t, out, "ingressRate", "the bad limits are named")
	links, err := host.Handle(t).LinkList()
	require.NoError(t, err)
	require.Len(t, links, 2, "premise: ptp's host veth is left behind by the failed ADD")

	out, code = cni("del")
	require.Equal(t, 0, code, out)
	assert.Equal(t, []string{"lo"}, pt.Links(t, host), "ptp's DEL ran")
	left, err := filepath.Glob(filepath.Join(dataDir, "bwnet", "10.*"))
	require.NoError(t, err)
	assert.Empty(t, left, "host-local released the address")
	assert.False(t, strings.Contains(out, "error"), out)
}
