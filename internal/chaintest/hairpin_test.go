package chaintest_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/vishvananda/netlink"

	"github.com/cnikit/cni/internal/chain"
	"github.com/cnikit/cni/internal/dispatch"
	pt "github.com/cnikit/cni/internal/plugintest"
	"github.com/cnikit/cni/internal/sysctl"
	"github.com/cnikit/cni/internal/testns"
)

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
