package portmap

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/vishvananda/netlink"

	"github.com/cnikit/cni/internal/core/timing"
	pt "github.com/cnikit/cni/internal/testbed/plugintest"
	"github.com/cnikit/cni/internal/testbed/testns"
)

// execPlugin runs the cni binary as "portmap" inside the host netns and returns its
// stdout.
func execPlugin(tb testing.TB, host *testns.NS, plugin, command, cid, netnsPath string, conf []byte) ([]byte, error) {
	tb.Helper()
	out, _, err := execPluginCPU(tb, host, plugin, command, cid, netnsPath, conf, os.Getenv("PATH"))
	return out, err
}

// execPluginWithPath is execPlugin with the plugin's PATH set, which chooses the
// iptables and nft tools it runs.
func execPluginWithPath(tb testing.TB, host *testns.NS, path, plugin, command, cid, netnsPath string, conf []byte) ([]byte, error) {
	tb.Helper()
	out, _, err := execPluginCPU(tb, host, plugin, command, cid, netnsPath, conf, path)
	return out, err
}

// execPluginCPU is execPlugin that also returns the CPU time (user+system) of the
// plugin and of the processes it waited for.
func execPluginCPU(tb testing.TB, host *testns.NS, plugin, command, cid, netnsPath string, conf []byte, path string) ([]byte, time.Duration, error) {
	tb.Helper()
	o := pt.Exec(tb, host, pt.Call{Bin: plugin, Command: command, ContainerID: cid, Netns: netnsPath, IfName: "eth0",
		Config: conf, Env: []string{"PATH=" + path}})
	if o.Err != nil {
		return []byte(o.Stdout), o.CPU, fmt.Errorf("%s %s: %s", plugin, command, o)
	}
	return []byte(o.Stdout), o.CPU, nil
}

func TestExecAddForwardsAndDelRemoves(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env, backend string) {
		c := e.container("ctr-a")
		plugin := filepath.Join(testns.LinkPluginDir(t, "portmap"), "portmap")
		conf := c.netconf(t, "net1", map[string]any{"backend": backend}, standardMappings())
		out, err := execPlugin(t, e.host, plugin, "ADD", c.id, c.ns.Path, conf)
		require.NoError(t, err)
		var res map[string]any
		require.NoError(t, json.Unmarshal(out, &res))
		assert.Len(t, res["ips"], 2, "the prevResult is passed through")

		got, err := dialTCP(e.client, "10.77.0.1:8080")
		require.NoError(t, err)
		assert.Equal(t, "ctr-a", got)
		_, err = execPlugin(t, e.host, plugin, "CHECK", c.id, c.ns.Path, conf)
		require.NoError(t, err)

		bare := []byte(`{"cniVersion":"1.1.0","name":"net1","type":"portmap"}`)
		_, err = execPlugin(t, e.host, plugin, "DEL", c.id, "", bare)
		require.NoError(t, err)
		assert.NotContains(t, e.ruleset(), c.ip4)
	})
}

// BenchmarkExec measures exec'd ADD and DEL of one attachment on a host that already
// holds n attachments with mappings, per backend. It reports the medians.
func BenchmarkExec(b *testing.B) {
	for _, backend := range backends {
		for _, n := range []int{10, 300} {
			b.Run(fmt.Sprintf("%s/%d", backend, n), func(b *testing.B) { benchExec(b, backend, n) })
		}
	}
}

func benchExec(b *testing.B, backend string, n int) {
	testns.RequireRoot(b)
	host := testns.NewWithLoopback(b)
	cont := testns.New(b)
	// The container addresses only need a route (route_localnet looks it up).
	host.Run(b, func() error {
		return netlink.LinkAdd(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: "vb"}, PeerName: "vbp"})
	})
	testns.Up(b, host, "vbp")
	testns.Up(b, host, "vb", "10.200.0.1/16", "fdc8::1/64")
	plugin := filepath.Join(testns.LinkPluginDir(b, "portmap"), "portmap")
	conf := func(i int) []byte {
		c := &container{ns: cont, ip4: fmt.Sprintf("10.200.%d.%d", i/250, i%250+2), ip6: fmt.Sprintf("fdc8::%x", i+2)}
		return c.netconf(b, "bench", map[string]any{"backend": backend}, []PortMapping{
			{HostPort: 10000 + i, ContainerPort: 80, Protocol: "tcp"},
			{HostPort: 20000 + i, ContainerPort: 53, Protocol: "udp"},
		})
	}
	for i := 0; i < n; i++ {
		_, err := execPlugin(b, host, plugin, "ADD", fmt.Sprintf("present-%d", i), cont.Path, conf(i))
		require.NoError(b, err)
	}
	var adds, dels, addCPU, delCPU []time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		cfg := conf(n + 1)
		start := time.Now()
		_, cpu, err := execPluginCPU(b, host, plugin, "ADD", "bench-ctr", cont.Path, cfg, os.Getenv("PATH"))
		adds, addCPU = append(adds, time.Since(start)), append(addCPU, cpu)
		require.NoError(b, err)
		start = time.Now()
		_, cpu, err = execPluginCPU(b, host, plugin, "DEL", "bench-ctr", cont.Path, cfg, os.Getenv("PATH"))
		dels, delCPU = append(dels, time.Since(start)), append(delCPU, cpu)
		require.NoError(b, err)
	}
	b.StopTimer()
	b.ReportMetric(timing.MedianMs(adds), "add-ms")
	b.ReportMetric(timing.MedianMs(dels), "del-ms")
	b.ReportMetric(timing.MedianMs(addCPU), "add-cpu-ms")
	b.ReportMetric(timing.MedianMs(delCPU), "del-cpu-ms")
}

// TestExecAddWithoutARouteToTheContainerSucceeds: the host has no route to the
// container's address (so no interface to set route_localnet on). The reference goes on
// without localhost mapping; ADD used to fail with code 999 here.
func TestExecAddWithoutARouteToTheContainerSucceeds(t *testing.T) {
	for _, backend := range backends {
		t.Run(backend, func(t *testing.T) {
			requireBackend(t, backend)
			t.Parallel()
			testns.RequireRoot(t)
			e := &env{t: t, host: testns.NewWithLoopback(t)}
			c := &container{ns: testns.New(t), id: "ctr-noroute", ip4: "10.201.0.2", ip6: "fd01:201::2"}
			plugin := filepath.Join(testns.LinkPluginDir(t, "portmap"), "portmap")
			conf := c.netconf(t, "noroute", map[string]any{"backend": backend}, standardMappings())
			_, err := execPlugin(t, e.host, plugin, "ADD", c.id, c.ns.Path, conf)
			require.NoError(t, err)
			assert.Contains(t, e.ruleset(), "8080", "the mappings are installed")
			_, err = execPlugin(t, e.host, plugin, "CHECK", c.id, c.ns.Path, conf)
			require.NoError(t, err)
			_, err = execPlugin(t, e.host, plugin, "DEL", c.id, c.ns.Path, conf)
			require.NoError(t, err)
			assert.NotContains(t, e.ruleset(), c.ip4)
		})
	}
}
