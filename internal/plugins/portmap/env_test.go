package portmap

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/nftables"
	"github.com/stretchr/testify/require"
	"github.com/vishvananda/netlink"

	"github.com/cnikit/cni/internal/host/nftexpr"
	"github.com/cnikit/cni/internal/host/sysctl"
	"github.com/cnikit/cni/internal/spec/skel"
	"github.com/cnikit/cni/internal/testbed/nfttest"
	"github.com/cnikit/cni/internal/testbed/testns"
)

// env is one test's world: a host netns, an external client netns behind veth "vx"
// (10.77.0.0/24, fd77::/64) and containers behind veths "vc<N>" (10.<N>.1.0/24).
type env struct {
	t      *testing.T
	host   *testns.NS
	client *testns.NS
	conts  int
	// cacheDir is the runtime's result cache the plugin is told of (CNI_CACHE_DIR),
	// empty but for the entries a test writes: never the machine's /var/lib/cni.
	cacheDir string
}

// container is one container netns with a TCP and a UDP server answering its name.
type container struct {
	ns   *testns.NS
	id   string
	ip4  string
	ip6  string
	host string // host side address of its veth
}

const (
	tcpPort = 8000
	udpPort = 8001
)

func newEnv(t *testing.T) *env {
	testns.RequireRoot(t)
	e := &env{t: t, host: testns.NewWithLoopback(t), client: testns.NewWithLoopback(t), cacheDir: t.TempDir()}
	require.NoError(t, os.Mkdir(filepath.Join(e.cacheDir, "results"), 0o700))
	e.host.Run(t, func() error {
		if err := sysctl.EnableForwarding(true, true); err != nil {
			return err
		}
		// Links created from now on skip DAD, so that their link-local addresses
		// (which neighbour discovery uses) are usable at once.
		if err := sysctl.Set("net/ipv6/conf/all/accept_dad", "0"); err != nil {
			return err
		}
		return sysctl.Set("net/ipv6/conf/default/accept_dad", "0")
	})
	e.veth("vx", e.client, "10.77.0.1/24", "fd77::1/64", "10.77.0.2/24", "fd77::2/64")
	return e
}

// veth connects ns to the host with a veth pair (eth0 in ns), addresses on both ends
// and default routes in ns via the host.
func (e *env) veth(hostName string, other *testns.NS, host4, host6, peer4, peer6 string) {
	testns.Veth(e.t, e.host, hostName, []string{host4, host6}, other, "eth0", []string{peer4, peer6})
	testns.DefaultRoutes(e.t, other, "eth0", strings.Split(host4, "/")[0], strings.Split(host6, "/")[0])
}

// container adds a container with its servers.
func (e *env) container(id string) *container {
	e.conts++
	n := e.conts
	c := &container{ns: testns.NewWithLoopback(e.t), id: id,
		ip4: fmt.Sprintf("10.%d.1.2", n), ip6: fmt.Sprintf("fd%02d::2", n), host: fmt.Sprintf("10.%d.1.1", n)}
	e.veth(fmt.Sprintf("vc%d", n), c.ns, c.host+"/24", fmt.Sprintf("fd%02d::1/64", n), c.ip4+"/24", c.ip6+"/64")
	c.serve(e.t)
	return c
}

// serve starts the servers. The listeners are created inside the netns (a socket keeps
// its netns) and served from ordinary goroutines.
func (c *container) serve(t *testing.T) {
	testns.ServeTCP(t, c.ns, "tcp", fmt.Sprintf(":%d", tcpPort), c.id)
	var pc net.PacketConn
	c.ns.Run(t, func() error {
		var err error
		pc, err = net.ListenPacket("udp", fmt.Sprintf(":%d", udpPort))
		return err
	})
	t.Cleanup(func() { pc.Close() })
	go func() {
		buf := make([]byte, 64)
		for {
			_, addr, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			_, _ = pc.WriteTo([]byte(c.id), addr)
		}
	}()
}

// dialTCP connects from inside ns and returns the server's answer, or "" and the error.
func dialTCP(ns *testns.NS, addr string) (string, error) {
	return testns.DialTCP(ns, addr, 2*time.Second)
}

// dialUDP sends one datagram from inside ns and returns the answer.
func dialUDP(ns *testns.NS, addr string) (string, error) {
	var got string
	err := ns.Do(func() error {
		conn, err := net.Dial("udp", addr)
		if err != nil {
			return err
		}
		defer conn.Close()
		buf := make([]byte, 64)
		for try := 0; try < 3; try++ {
			if _, err := conn.Write([]byte("ping")); err != nil {
				return err
			}
			_ = conn.SetReadDeadline(time.Now().Add(700 * time.Millisecond))
			n, err := conn.Read(buf)
			if err == nil {
				got = string(buf[:n])
				return nil
			}
		}
		return fmt.Errorf("no UDP answer from %s", addr)
	})
	return got, err
}

// netconf builds a chained portmap config for c; mappings nil means no runtimeConfig.
func (c *container) netconf(t testing.TB, netName string, extra map[string]any, mappings []PortMapping) []byte {
	conf := map[string]any{
		"cniVersion": "1.1.0", "name": netName, "type": "portmap",
		"capabilities": map[string]bool{"portMappings": true},
		"prevResult": map[string]any{
			"cniVersion": "1.1.0",
			"interfaces": []map[string]any{{"name": "eth0", "sandbox": c.ns.Path}},
			"ips": []map[string]any{
				{"address": c.ip4 + "/24", "interface": 0},
				{"address": c.ip6 + "/64", "interface": 0},
			},
		},
	}
	for k, v := range extra {
		conf[k] = v
	}
	if mappings != nil {
		conf["runtimeConfig"] = map[string]any{"portMappings": mappings}
	}
	b, err := json.Marshal(conf)
	require.NoError(t, err)
	return b
}

// mapped makes the container id and its config on net1 with the extra keys and
// mappings, for a test that runs ADD with it next.
func (e *env) mapped(t testing.TB, id string, extra map[string]any, mappings []PortMapping) (*container, []byte) {
	c := e.container(id)
	return c, c.netconf(t, "net1", extra, mappings)
}

// cached writes the runtime's cache entry of the attachment of container id on network
// in libcni's format (what the plugin reads of it: its name, containerId and netns):
// the container is alive while netns names a network namespace.
func (e *env) cached(network, id, netns string) {
	entry, err := json.Marshal(map[string]any{"kind": "cniCacheV1", "containerId": id, "networkName": network,
		"ifName": "eth0", "netns": netns, "config": []byte(`{}`)})
	require.NoError(e.t, err)
	require.NoError(e.t, os.WriteFile(filepath.Join(e.cacheDir, "results", network+"-"+id+"-eth0"), entry, 0o600))
}

// invoke runs a portmap command in-process inside the host netns.
func (e *env) invoke(command string, c *container, conf []byte) error {
	args := skel.Args{Command: command, ContainerID: c.id, IfName: "eth0", Path: []string{"/nonexistent"},
		Env: []string{"CNI_CACHE_DIR=" + e.cacheDir}}
	if command != skel.CmdGC {
		args.Netns = c.ns.Path
	} else {
		args.ContainerID, args.IfName = "", ""
	}
	return e.host.Do(func() error {
		_, err := skel.Invoke(context.Background(), Plugin(), args, conf, io.Discard)
		return err
	})
}

// ruleset returns everything a backend shows of the host's rules.
// ruleset is the host's nf_tables ruleset read over netlink and, where the firewall
// binaries are, the nat tables as iptables-save prints them (legacy tables too).
func (e *env) ruleset() string {
	var b strings.Builder
	b.WriteString(nfttest.Ruleset(e.t, e.host))
	if testns.FirewallBinariesHidden() {
		return b.String()
	}
	for _, cmd := range [][]string{{"iptables-save", "-t", "nat"}, {"ip6tables-save", "-t", "nat"}} {
		out, err := e.host.Exec(e.t, cmd[0], cmd[1:]...)
		require.NoError(e.t, err, out)
		for _, line := range strings.SplitAfter(out, "\n") {
			// iptables-save's "# Generated on <time>" lines differ between two calls.
			if !strings.HasPrefix(line, "#") {
				b.WriteString(line)
			}
		}
	}
	return b.String()
}

// requireBackend skips an iptables subtest where the firewall binaries are hidden.
func requireBackend(t testing.TB, backend string) {
	t.Helper()
	if backend == "iptables" {
		testns.RequireFirewallBinaries(t, "the iptables backend's own test")
	}
}

// deletePortsElement is `nft delete element ip cni_portmap ports { tcp . <port> }`.
func (e *env) deletePortsElement(port uint16) {
	e.t.Helper()
	nfttest.Apply(e.t, e.host, func(c *nftables.Conn) error {
		return c.SetDeleteElements(newNFTFamily(false).ports, []nftables.SetElement{{Key: nftexpr.Key([]byte{6}, nftexpr.Port(port))}})
	})
}

// conntrackTo lists the host's conntrack entries answered by addr.
func (e *env) conntrackTo(addr string) []string {
	var out []string
	e.host.Run(e.t, func() error {
		for _, fam := range []netlink.InetFamily{syscall.AF_INET, syscall.AF_INET6} {
			flows, err := netlink.ConntrackTableList(netlink.ConntrackTable, fam)
			if err != nil {
				return err
			}
			for _, f := range flows {
				if f.Reverse.SrcIP.Equal(net.ParseIP(addr)) {
					out = append(out, f.String())
				}
			}
		}
		return nil
	})
	return out
}
