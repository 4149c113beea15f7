package hostiletest

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/cnikit/cni/internal/plugins/attachment/attachmenttest"
	"github.com/cnikit/cni/internal/result"
	"github.com/cnikit/cni/internal/spec/skel"
	"github.com/cnikit/cni/internal/testbed/kernelfeature"
	"github.com/cnikit/cni/internal/testbed/plugintest"
	"github.com/cnikit/cni/internal/testbed/testns"
)

// subject is one plugin of the second wave as the kill and failed-ADD matrices drive it.
type subject struct {
	plugin string
	needs  []kernelfeature.Feature
	// prepare readies the node and the container for this plugin's ADDs (a device to
	// move, an interface and the prevResult of the main plugin before a meta plugin)
	// and returns the config and CNI_IFNAME.
	prepare func(n *node, c *attachmenttest.Container) ([]byte, string)
	// failing is a config whose ADD fails late, after the plugin made things ("":
	// none here).
	failing func(n *node, c *attachmenttest.Container, conf []byte) []byte
}

// unroutable is an IPAM route through a gateway no interface reaches: configuring it
// is the last step of an ADD that made its link and reserved its address.
var unroutable = []any{map[string]any{"dst": "192.168.0.0/16", "gw": "10.99.0.1"}}

func withUnroutable(n *node, keys map[string]any) map[string]any {
	ipam := n.hostLocal(attachmenttest.Subnet)
	ipam["routes"] = unroutable
	keys["ipam"] = ipam
	return keys
}

func subjects() []subject {
	oneLink := func(plugin string, keys map[string]any, needs ...kernelfeature.Feature) subject {
		return subject{plugin: plugin, needs: needs,
			prepare: func(n *node, _ *attachmenttest.Container) ([]byte, string) { return n.mainConf(plugin), "eth0" },
			failing: func(n *node, _ *attachmenttest.Container, _ []byte) []byte {
				k := map[string]any{}
				for key, v := range keys {
					k[key] = v
				}
				return n.conf(plugin, withUnroutable(n, k))
			}}
	}
	chained := func(plugin string, needs []kernelfeature.Feature, keys string, failing string) subject {
		return subject{plugin: plugin, needs: needs,
			prepare: func(n *node, c *attachmenttest.Container) ([]byte, string) {
				return plugintest.WithPrev(n.T, n.confJSON(plugin, keys), n.secondInterface(c)), "net1"
			},
			failing: func(n *node, c *attachmenttest.Container, _ []byte) []byte {
				return plugintest.WithPrev(n.T, n.confJSON(plugin, strings.Trim(keys+","+failing, ",")), n.prev)
			}}
	}
	master := map[string]any{"master": attachmenttest.Master}
	return []subject{
		oneLink("macvlan", master, kernelfeature.Macvlan),
		oneLink("ipvlan", master, kernelfeature.IPVLAN),
		oneLink("vlan", map[string]any{"master": attachmenttest.Master, "vlanId": 7}, kernelfeature.VLAN),
		oneLink("dummy", map[string]any{}, kernelfeature.Dummy),
		oneLink("tap", map[string]any{}),
		{plugin: "host-device",
			prepare: func(n *node, _ *attachmenttest.Container) ([]byte, string) {
				testns.Veth(n.T, n.Host, "hd0", nil, n.Peer, "hd0p", nil)
				return n.conf("host-device", map[string]any{"device": "hd0", "dataDir": n.hostDeviceDir(),
					"ipam": n.hostLocal(attachmenttest.Subnet)}), "eth0"
			},
			failing: func(n *node, _ *attachmenttest.Container, _ []byte) []byte {
				return n.conf("host-device", withUnroutable(n, map[string]any{"device": "hd0", "dataDir": n.hostDeviceDir()}))
			}},
		{plugin: "flannel",
			prepare: func(n *node, _ *attachmenttest.Container) ([]byte, string) { return n.mainConf("flannel"), "eth0" },
			failing: func(n *node, _ *attachmenttest.Container, _ []byte) []byte {
				// A link called like the delegate's bridge that is no bridge: the
				// delegate's ADD fails once flannel stored its config.
				testns.Veth(n.T, n.Host, "notbr", nil, testns.New(n.T), "notbrp", nil)
				return n.conf("flannel", map[string]any{"subnetFile": n.subnetFile, "dataDir": n.flannelDir,
					"ipam": map[string]any{"dataDir": n.DataDir}, "delegate": map[string]any{"bridge": "notbr"}})
			}},
		// A gateway no interface reaches: the rule is in place when its default route
		// fails.
		chained("sbr", nil, ``, `"gateways":["10.99.0.1"]`),
		// Another master on the interface: the VRF is made when enslaving fails.
		{plugin: "vrf", needs: []kernelfeature.Feature{kernelfeature.VRF},
			prepare: func(n *node, c *attachmenttest.Container) ([]byte, string) {
				return plugintest.WithPrev(n.T, n.confJSON("vrf", `"vrfname":"blue"`), n.secondInterface(c)), "net1"
			},
			failing: func(n *node, c *attachmenttest.Container, conf []byte) []byte {
				h := c.NS.Handle(n.T)
				require.NoError(n.T, h.LinkAdd(&netlink.Bridge{LinkAttrs: netlink.LinkAttrs{Name: "br9"}}))
				br, err := h.LinkByName("br9")
				require.NoError(n.T, err)
				l, err := h.LinkByName("net1")
				require.NoError(n.T, err)
				require.NoError(n.T, h.LinkSetMaster(l, br))
				return conf
			}},
	}
}

func (n *node) hostDeviceDir() string { return filepath.Join(n.DataDir, "host-device") }

// confJSON is conf with extra keys given as JSON members.
func (n *node) confJSON(plugin, members string) []byte {
	s := fmt.Sprintf(`{"cniVersion":"1.1.0","name":"testnet","type":%q`, plugin)
	if members != "" {
		s += "," + members
	}
	return []byte(s + "}")
}

// secondInterface gives the container net1, a veth to the peer namespace with
// 10.60.0.2/24 (the peer end holds the gateway, .1), and returns the prevResult a main
// plugin would have returned for it, keeping it as n.prev.
func (n *node) secondInterface(c *attachmenttest.Container) *result.Result {
	testns.Veth(n.T, c.NS, "net1", []string{"10.60.0.2/24"}, n.Peer, "net1p", []string{"10.60.0.1/24"})
	res := &result.Result{CNIVersion: "1.1.0"}
	idx := res.AddInterface(result.Interface{Name: "net1", Sandbox: c.NS.Path})
	res.IPs = []result.IPConfig{{Interface: &idx, Address: netip.MustParsePrefix("10.60.0.2/24"),
		Gateway: netip.MustParseAddr("10.60.0.1")}}
	n.prev = res
	return res
}

// snapshot is what the node and the container hold that any plugin may have touched:
// links (with what a plugin changes about them), rules, routes of every table but
// local, reservations and the plugins' state files.
func (n *node) snapshot(c *attachmenttest.Container) []string {
	n.T.Helper()
	var out []string
	for _, side := range []struct {
		name string
		ns   *testns.NS
	}{{"host", n.Host}, {"container", c.NS}} {
		h := side.ns.Handle(n.T)
		links, err := h.LinkList()
		require.NoError(n.T, err)
		for _, l := range links {
			a := l.Attrs()
			s := fmt.Sprintf("%s link %s master %d", side.name, a.Name, a.MasterIndex)
			if l.Type() != "bridge" { // a bridge's MTU and MAC follow its ports
				s += fmt.Sprintf(" mtu %d up %v alias %q mac %s", a.MTU, a.Flags&net.FlagUp != 0, a.Alias, a.HardwareAddr)
			}
			out = append(out, s)
		}
		rules, err := h.RuleList(netlink.FAMILY_ALL)
		require.NoError(n.T, err)
		for _, r := range rules {
			out = append(out, fmt.Sprintf("%s rule %v", side.name, r))
		}
		routes, err := h.RouteListFiltered(netlink.FAMILY_ALL, &netlink.Route{Table: unix.RT_TABLE_UNSPEC}, netlink.RT_FILTER_TABLE)
		require.NoError(n.T, err)
		for _, r := range routes {
			// IPv6 link-local routes come and go with the kernel's address
			// configuration, a moment after a link comes up.
			if r.Table != unix.RT_TABLE_LOCAL && !isLinkLocal(r.Dst) {
				out = append(out, fmt.Sprintf("%s route table %d %v via %v src %v proto %d dev %d", side.name, r.Table, r.Dst, r.Gw, r.Src, r.Protocol, r.LinkIndex))
			}
		}
	}
	for _, r := range n.Reservations() {
		out = append(out, "reserved "+r)
	}
	for _, dir := range []string{n.hostDeviceDir(), n.flannelDir} {
		entries, _ := os.ReadDir(dir)
		for _, e := range entries {
			out = append(out, "state "+filepath.Join(dir, e.Name()))
		}
	}
	slices.Sort(out)
	return out
}

func requireFeatures(t *testing.T, needs []kernelfeature.Feature) {
	t.Helper()
	for _, f := range needs {
		kernelfeature.Require(t, f)
	}
}

// mustExec runs cmd and fails the test unless it succeeds.
func (n *node) mustExec(plugin, cmd string, c *attachmenttest.Container, ifName string, conf []byte) string {
	n.T.Helper()
	out, err := n.exec(plugin, cmd, c.ID, c.NS.Path, ifName, conf)
	require.Nil(n.T, err, "%s %s: %s", plugin, cmd, describe(err))
	return out
}

// killedAdd starts ADD and kills it with SIGKILL after delay (it may have finished).
func (n *node) killedAdd(plugin string, c *attachmenttest.Container, ifName string, conf []byte, delay time.Duration) {
	n.T.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), plugintest.Timeout)
	defer cancel()
	cmd := plugintest.Command(ctx, plugintest.Call{Bin: filepath.Join(n.dir, plugin), Command: skel.CmdAdd,
		ContainerID: c.ID, Netns: c.NS.Path, IfName: ifName, Config: conf})
	n.Host.Run(n.T, cmd.Start) // the child is born in the host namespace
	time.Sleep(delay)
	_ = cmd.Process.Signal(syscall.SIGKILL)
	_ = cmd.Wait()
}

// ready makes a node and a container for s, and runs one whole ADD and DEL: it times the
// ADD and makes what outlives every attachment (flannel's bridge), so that a snapshot
// taken now is what every later DEL must leave.
func ready(t *testing.T, s subject) (n *node, c *attachmenttest.Container, conf []byte, ifName string, took time.Duration) {
	t.Helper()
	requireFeatures(t, s.needs)
	n = newNode(t)
	c = n.NewContainer()
	conf, ifName = s.prepare(n, c)
	start := time.Now()
	n.mustExec(s.plugin, skel.CmdAdd, c, ifName, conf)
	took = time.Since(start)
	n.mustExec(s.plugin, skel.CmdDel, c, ifName, conf)
	return n, c, conf, ifName, took
}

// TestAddKilledAnywhereLeavesNothingAfterDel: ADD killed with SIGKILL at points spread
// over its run (a node rebooting, a runtime's timeout), then the runtime's DEL: DEL
// succeeds, and the node and the container are as they were before the ADD.
func TestAddKilledAnywhereLeavesNothingAfterDel(t *testing.T) {
	t.Parallel()
	const points = 10
	for _, s := range subjects() {
		t.Run(s.plugin, func(t *testing.T) {
			t.Parallel()
			n, c, conf, ifName, took := ready(t, s)
			before := n.snapshot(c)
			for i := range points {
				delay := took * time.Duration(i) / points
				n.killedAdd(s.plugin, c, ifName, conf, delay)
				n.mustExec(s.plugin, skel.CmdDel, c, ifName, conf)
				if !assert.Equal(t, before, n.snapshot(c), "ADD killed %v into its %v", delay, took) {
					return
				}
			}
		})
	}
}

// TestDelAfterAFailedAddLeavesNothing: an ADD that fails late (its link made, its
// address reserved, its rule or VRF in place) undoes itself, and the runtime's DEL that
// follows succeeds and finds nothing left either.
func TestDelAfterAFailedAddLeavesNothing(t *testing.T) {
	t.Parallel()
	for _, s := range subjects() {
		t.Run(s.plugin, func(t *testing.T) {
			t.Parallel()
			n, c, conf, ifName, _ := ready(t, s)
			failing := s.failing(n, c, conf)
			before := n.snapshot(c)
			_, err := n.exec(s.plugin, skel.CmdAdd, c.ID, c.NS.Path, ifName, failing)
			require.NotNil(t, err, "premise: the ADD fails")
			assert.Equal(t, before, n.snapshot(c), "after the failed ADD (%s)", describe(err))
			for i := range 2 {
				n.mustExec(s.plugin, skel.CmdDel, c, ifName, failing)
				assert.Equal(t, before, n.snapshot(c), "after DEL %d", i+1)
			}
			assert.False(t, strings.Contains(err.Msg, "rollback also failed"), err.Msg)
		})
	}
}

func isLinkLocal(dst *net.IPNet) bool {
	return dst != nil && dst.IP.IsLinkLocalUnicast()
}
