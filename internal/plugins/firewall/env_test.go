package firewall_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cnikit/cni/internal/chain"
	"github.com/cnikit/cni/internal/dispatch"
	"github.com/cnikit/cni/internal/host/netfilter"
	"github.com/cnikit/cni/internal/host/sysctl"
	"github.com/cnikit/cni/internal/result"
	"github.com/cnikit/cni/internal/spec/skel"
	"github.com/cnikit/cni/internal/testbed/nfttest"
	"github.com/cnikit/cni/internal/testbed/testns"
)

// env is one test's world: a host netns, an external netns "ext" routed behind veth vx
// (10.99.0.2, fd99::2), and containers on bridges made by the bridge and host-local
// plugins through the chain runner. newEnv also sets the host's FORWARD policy to DROP
// (both families) with iptables, which the iptables backend's tests need.
type env struct {
	t       *testing.T
	host    *testns.NS
	ext     *testns.NS
	dataDir string
	runner  *chain.Runner
}

const (
	extAddr  = "10.99.0.2"
	echoPort = 7000
)

func newEnv(t *testing.T) *env {
	t.Helper()
	testns.RequireFirewallBinaries(t, "the iptables backend's own test: the host's FORWARD DROP policy and the rules are iptables'")
	e := newNFTEnv(t)
	for _, cmd := range []string{"iptables", "ip6tables"} {
		out, err := e.host.Exec(t, cmd, "-w", "-P", "FORWARD", "DROP")
		require.NoError(t, err, out)
	}
	return e
}

// newNFTEnv is the world without a host policy of iptables: nothing of the host's drops
// forwarded traffic, as on a node without iptables.
func newNFTEnv(t *testing.T) *env {
	t.Helper()
	testns.RequireRoot(t)
	e := &env{t: t, host: testns.NewWithLoopback(t), ext: testns.NewWithLoopback(t), dataDir: t.TempDir()}
	e.runner = &chain.Runner{Builtin: dispatch.Lookup, PluginPath: []string{t.TempDir()}, CacheDir: t.TempDir(), Timeout: time.Minute}
	e.host.Run(t, func() error {
		if err := sysctl.EnableForwarding(true, true); err != nil {
			return err
		}
		return sysctl.Set("net/ipv6/conf/default/accept_dad", "0")
	})
	e.vethToExt()
	serve(t, e.ext, "ext")
	return e
}

// vethToExt connects ext to the host, routed: ext's default route points at the host.
func (e *env) vethToExt() {
	testns.Veth(e.t, e.host, "vx", []string{"10.99.0.1/24", "fd99::1/64"}, e.ext, "vxp", []string{extAddr + "/24", "fd99::2/64"})
	testns.DefaultRoutes(e.t, e.ext, "vxp", "10.99.0.1", "fd99::1")
}

// serve answers every TCP connection on echoPort with name, from inside n.
func serve(t *testing.T, n *testns.NS, name string) {
	testns.ServeTCP(t, n, "tcp", fmt.Sprintf(":%d", echoPort), name)
}

// dial connects from inside n to addr:echoPort and returns the peer's name, giving up
// after a second: for connections that must fail.
func dial(n *testns.NS, addr string) (string, error) {
	return testns.DialTCP(n, net.JoinHostPort(addr, fmt.Sprint(echoPort)), time.Second)
}

// reach is dial for connections that must work: it waits out one lost SYN (TCP sends
// the second after a second), which a fresh bridge can cost on a loaded machine.
func reach(n *testns.NS, addr string) (string, error) {
	return testns.DialTCP(n, net.JoinHostPort(addr, fmt.Sprint(echoPort)), 3*time.Second)
}

// netOpts describe one network: its bridge, subnets and firewall keys (nil: no firewall
// in the chain).
type netOpts struct {
	name     string
	bridge   string
	subnets  []string
	firewall map[string]any
	version  string
}

func (e *env) conflist(o netOpts) *chain.Network {
	var ranges []any
	for _, s := range o.subnets {
		ranges = append(ranges, []any{map[string]any{"subnet": s}})
	}
	plugins := []any{map[string]any{
		"type": "bridge", "bridge": o.bridge, "isGateway": true,
		"ipam": map[string]any{"type": "host-local", "dataDir": e.dataDir, "ranges": ranges,
			"routes": []any{map[string]any{"dst": "0.0.0.0/0"}}},
	}}
	if o.firewall != nil {
		fw := map[string]any{"type": "firewall"}
		for k, v := range o.firewall {
			fw[k] = v
		}
		plugins = append(plugins, fw)
	}
	v := o.version
	if v == "" {
		v = "1.1.0"
	}
	b, err := json.Marshal(map[string]any{"cniVersion": v, "name": o.name, "plugins": plugins})
	require.NoError(e.t, err)
	n, err := chain.Parse(b)
	require.NoError(e.t, err)
	return n
}

// ctr is one container attached to a network.
type ctr struct {
	ns  *testns.NS
	id  string
	res *result.Result
	att chain.Attachment
}

func (c *ctr) ip4() string {
	for _, ip := range c.res.IPs {
		if ip.Address.Addr().Is4() {
			return ip.Address.Addr().String()
		}
	}
	return ""
}

// add attaches a new container (serving its id) to the network.
func (e *env) add(n *chain.Network, id string) *ctr {
	e.t.Helper()
	c := &ctr{ns: testns.NewWithLoopback(e.t), id: id}
	c.att = chain.Attachment{ContainerID: id, Netns: c.ns.Path, IfName: "eth0"}
	e.host.Run(e.t, func() error {
		var err error
		c.res, err = e.runner.Add(context.Background(), n, c.att)
		return err
	})
	serve(e.t, c.ns, id)
	return c
}

func (e *env) inHost(fn func() error) error { return e.host.Do(fn) }

// requirePicks stops the test unless the backend rule picks want in the host (why says
// on what kind of node).
func (e *env) requirePicks(want netfilter.Backend, why string) {
	e.t.Helper()
	require.NoError(e.t, e.inHost(func() error {
		if b := netfilter.Detect(); b != want {
			return fmt.Errorf("the rule picks %s, not %s, %s", b, want, why)
		}
		return nil
	}))
}

// ruleset is the host's nf_tables ruleset, read over netlink, and, where the firewall
// binaries are, the filter tables as iptables-save prints them (legacy tables too).
func (e *env) ruleset() string {
	e.t.Helper()
	out := nfttest.Ruleset(e.t, e.host)
	if !testns.FirewallBinariesHidden() {
		for _, l := range strings.Split(e.save("iptables")+e.save("ip6tables"), "\n") {
			if !strings.HasPrefix(l, "#") { // "# Generated on <time>" differs between calls
				out += l + "\n"
			}
		}
	}
	return out
}

// save is the host's filter table of one family as iptables-save prints it.
func (e *env) save(cmd string) string {
	e.t.Helper()
	out, err := e.host.Exec(e.t, cmd+"-save", "-t", "filter")
	require.NoError(e.t, err, out)
	return out
}

// invoke runs the firewall plugin in-process in the host netns.
func (e *env) invoke(command string, conf map[string]any, c *ctr, env ...string) (*result.Result, error) {
	e.t.Helper()
	b, err := json.Marshal(conf)
	require.NoError(e.t, err)
	args := skel.Args{Command: command, ContainerID: c.id, Netns: c.ns.Path, IfName: "eth0", Path: e.runner.PluginPath, Env: env}
	var res *result.Result
	err = e.host.Do(func() error {
		var err error
		res, err = skel.Invoke(context.Background(), dispatch.Lookup("firewall"), args, b, nil)
		return err
	})
	return res, err
}

// fwConf is a standalone firewall config for network name, with prev as prevResult
// when it is not nil.
func fwConf(t *testing.T, name string, keys map[string]any, prev *result.Result) map[string]any {
	c := map[string]any{"cniVersion": "1.1.0", "name": name, "type": "firewall"}
	for k, v := range keys {
		c[k] = v
	}
	if prev != nil {
		var raw map[string]any
		b, err := json.Marshal(prev)
		require.NoError(t, err)
		require.NoError(t, json.Unmarshal(b, &raw))
		c["prevResult"] = raw
	}
	return c
}
