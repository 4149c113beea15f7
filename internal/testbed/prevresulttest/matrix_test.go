package prevresulttest_test

import (
	"encoding/json"
	"fmt"
	"iter"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cnikit/cni/internal/core/version"
	"github.com/cnikit/cni/internal/testbed/kernelfeature"
	pt "github.com/cnikit/cni/internal/testbed/plugintest"
	"github.com/cnikit/cni/internal/testbed/reftest"
	"github.com/cnikit/cni/internal/testbed/testns"
)

// sides is what one shape gives with one plugin: the reference's outcome and ours
// ("" when it is the same), each "ok: <what it did>" or "error <code>: <msg>" (see
// outcome).
type sides struct{ ref, ours string }

// A shape is a prevResult as a main plugin hands it on, in the version of the config
// it comes with (NETNS stands for the container's netns path), and what each plugin,
// keyed by the reference binary's name, makes of it.
type shape struct {
	name, version, prev string
	want                map[string]sides
}

// Outcomes that recur. The world's container interface has 10.99.0.2/24,
// 10.99.0.3/24 and fd00:99::2/64 whatever prevResult says; see world_test.go.
const (
	mapped46 = "ok: 10.99.0.2:80 [fd00:99::2]:80"
	mapped4  = "ok: 10.99.0.2:80"
	mappedNo = "ok: "
	shaped   = "ok: veth0 ingress+tbf, 1 ifb"
	routed46 = "ok: 10.99.0.2>100 fd00:99::2>101"
	routed4  = "ok: 10.99.0.2>100"
	// routedAll is every address the kernel has on the interface.
	routedAll = "ok: 10.99.0.2>100 10.99.0.3>101 fd00:99::2>102"
	inVRF     = "ok: master blue"
	tooOld    = "error 1: incompatible CNI versions"
	noVethRef = "error 999: no veth peer of container interface found in host ns"
)

func firewalled(addrs, iface string) string { return "ok: " + addrs + "; isolates " + iface }
func tuned(indexes string) string           { return "ok: eth0 " + mac + "; result interfaces [" + indexes + "]" }

var shapes = []shape{
	{"bridge: bridge, host veth, container interface", "1.0.0", `{"cniVersion":"1.0.0",
		"interfaces":[{"name":"br0","mac":"02:00:00:00:00:01"},{"name":"veth0","mac":"02:00:00:00:00:02"},{"name":"eth0","mac":"02:00:00:00:00:03","sandbox":"NETNS"}],
		"ips":[{"address":"10.99.0.2/24","gateway":"10.99.0.1","interface":2},{"address":"fd00:99::2/64","gateway":"fd00:99::1","interface":2}]}`,
		map[string]sides{
			"portmap": {mapped46, ""}, "bandwidth": {shaped, ""}, "firewall": {firewalled("10.99.0.2 fd00:99::2", "br0"), ""},
			"tuning": {tuned("2"), ""}, "sbr": {routed46, ""}, "vrf": {inVRF, ""},
		}},
	// The example. Calico lists its host veth and gives addresses no index.
	{"Calico: host veth only, no interface index", "1.0.0", `{"cniVersion":"1.0.0",
		"interfaces":[{"name":"veth0"}],
		"ips":[{"address":"10.99.0.2/32"},{"address":"fd00:99::2/128"}]}`,
		map[string]sides{
			"portmap": {mapped46, ""}, "bandwidth": {shaped, ""}, "firewall": {firewalled("10.99.0.2 fd00:99::2", "veth0"), ""},
			"tuning": {tuned(""), ""}, "sbr": {routed46, ""}, "vrf": {inVRF, ""},
		}},
	// Calico's conflists are 0.3.1; the result is converted up inside each plugin.
	{"Calico at 0.3.1", "0.3.1", `{"cniVersion":"0.3.1",
		"interfaces":[{"name":"veth0"}],
		"ips":[{"version":"4","address":"10.99.0.2/32"},{"version":"6","address":"fd00:99::2/128"}]}`,
		map[string]sides{
			"portmap": {mapped46, ""}, "bandwidth": {shaped, ""}, "firewall": {tooOld, ""},
			"tuning": {tuned(""), ""}, "sbr": {routed46, ""}, "vrf": {inVRF, ""},
		}},
	// Bandwidth: the reference wants the host veth listed; ours finds it from the
	// kernel (the container end's peer). Firewall: the reference polices interfaces[0]
	// whatever it is, here the container's "eth0", a name that on a node is usually
	// the uplink's; ours polices the bridge the container's veth is a port of.
	{"Cilium: container interface only", "1.0.0", `{"cniVersion":"1.0.0",
		"interfaces":[{"name":"eth0","mac":"02:00:00:00:00:03","sandbox":"NETNS"}],
		"ips":[{"address":"10.99.0.2/32","interface":0},{"address":"fd00:99::2/128","interface":0}]}`,
		map[string]sides{
			"portmap": {mapped46, ""}, "bandwidth": {noVethRef, shaped},
			"firewall": {firewalled("10.99.0.2 fd00:99::2", "eth0"), firewalled("10.99.0.2 fd00:99::2", "br0")},
			"tuning":   {tuned("0"), ""}, "sbr": {routed46, ""}, "vrf": {inVRF, ""},
		}},
	// Portmap: the reference takes an interface without sandbox for the host's and
	// silently maps no port; ours maps to the addresses listed on the interface called
	// CNI_IFNAME when nothing else names the container's.
	{"interfaces without sandbox", "1.0.0", `{"cniVersion":"1.0.0",
		"interfaces":[{"name":"veth0"},{"name":"eth0"}],
		"ips":[{"address":"10.99.0.2/24","interface":1},{"address":"fd00:99::2/64","interface":1}]}`,
		map[string]sides{
			"portmap": {mappedNo, mapped46}, "bandwidth": {shaped, ""}, "firewall": {firewalled("10.99.0.2 fd00:99::2", "veth0"), ""},
			"tuning": {tuned("1"), ""}, "sbr": {routed46, ""}, "vrf": {inVRF, ""},
		}},
	// The addresses are listed on a host interface, so the container has none in
	// prevResult: the reference's portmap maps nothing and its sbr routes nothing,
	// both without a word; ours use the addresses the kernel has on the container's
	// interface.
	{"host-side interface only, addresses on it", "1.0.0", `{"cniVersion":"1.0.0",
		"interfaces":[{"name":"veth0"}],
		"ips":[{"address":"10.99.0.2/24","interface":0}]}`,
		map[string]sides{
			"portmap": {mappedNo, mapped46}, "bandwidth": {shaped, ""}, "firewall": {firewalled("10.99.0.2", "veth0"), ""},
			"tuning": {tuned(""), ""}, "sbr": {"ok: ", routedAll}, "vrf": {inVRF, ""},
		}},
	// An IPAM plugin's result handed on as it is. Bandwidth and firewall's
	// same-bridge policy find the host side from the kernel, where the reference
	// refuses.
	{"addresses only (IPAM result)", "1.0.0", `{"cniVersion":"1.0.0",
		"ips":[{"address":"10.99.0.2/24","gateway":"10.99.0.1"},{"address":"fd00:99::2/64"}]}`,
		map[string]sides{
			"portmap": {mapped46, ""}, "bandwidth": {"error 999: no interfaces provided", shaped},
			"firewall": {`error 999: interface needs to be set for ingress policy "same-bridge", make sure to chain "firewall" plugin with "bridge"`,
				firewalled("10.99.0.2 fd00:99::2", "br0")},
			"tuning": {tuned(""), ""}, "sbr": {routed46, ""}, "vrf": {inVRF, ""},
		}},
	// An index naming no interface counts as no index, as in the reference.
	{"interface index out of range", "1.0.0", `{"cniVersion":"1.0.0",
		"interfaces":[{"name":"eth0","sandbox":"NETNS"}],
		"ips":[{"address":"10.99.0.2/24","interface":3}]}`,
		map[string]sides{
			"portmap": {mapped4, ""}, "bandwidth": {noVethRef, shaped},
			"firewall": {firewalled("10.99.0.2", "eth0"), firewalled("10.99.0.2", "br0")},
			"tuning":   {tuned("0"), ""}, "sbr": {routed4, ""}, "vrf": {inVRF, ""},
		}},
	// Two container interfaces: portmap maps to the first address of each family on
	// CNI_IFNAME, sbr routes every address of CNI_IFNAME and none of net1's, firewall
	// lets every address through, as in the reference.
	{"several interfaces and addresses", "1.0.0", `{"cniVersion":"1.0.0",
		"interfaces":[{"name":"br0"},{"name":"veth0"},{"name":"net1","sandbox":"NETNS"},{"name":"eth0","sandbox":"NETNS"}],
		"ips":[{"address":"10.98.0.5/24","interface":2},{"address":"fd00:98::5/64","interface":2},
			{"address":"10.99.0.2/24","interface":3},{"address":"10.99.0.3/24","interface":3},{"address":"fd00:99::2/64","interface":3}]}`,
		map[string]sides{
			"portmap": {mapped46, ""}, "bandwidth": {shaped, ""},
			"firewall": {firewalled("10.98.0.5 10.99.0.2 10.99.0.3 fd00:98::5 fd00:99::2", "br0"), ""},
			"tuning":   {tuned("3"), ""}, "sbr": {routedAll, ""}, "vrf": {inVRF, ""},
		}},
	// A main plugin that leaves addressing to someone else (host-device without
	// ipam, a DHCP client in the container): the reference's portmap maps nothing
	// and its sbr refuses; ours act on the kernel's addresses.
	{"no addresses", "1.0.0", `{"cniVersion":"1.0.0",
		"interfaces":[{"name":"br0"},{"name":"veth0"},{"name":"eth0","sandbox":"NETNS"}]}`,
		map[string]sides{
			"portmap": {mappedNo, mapped46}, "bandwidth": {shaped, ""}, "firewall": {"ok: ", ""},
			"tuning": {tuned("2"), ""}, "sbr": {"error 999: No IP addresses supplied on interface: eth0", routedAll}, "vrf": {inVRF, ""},
		}},
	{"bridge at 0.4.0", "0.4.0", `{"cniVersion":"0.4.0",
		"interfaces":[{"name":"br0"},{"name":"veth0"},{"name":"eth0","sandbox":"NETNS"}],
		"ips":[{"version":"4","address":"10.99.0.2/24","gateway":"10.99.0.1","interface":2},{"version":"6","address":"fd00:99::2/64","interface":2}]}`,
		map[string]sides{
			"portmap": {mapped46, ""}, "bandwidth": {shaped, ""}, "firewall": {firewalled("10.99.0.2 fd00:99::2", "br0"), ""},
			"tuning": {tuned("2"), ""}, "sbr": {routed46, ""}, "vrf": {inVRF, ""},
		}},
	{"bridge at 0.3.0", "0.3.0", `{"cniVersion":"0.3.0",
		"interfaces":[{"name":"br0"},{"name":"veth0"},{"name":"eth0","sandbox":"NETNS"}],
		"ips":[{"version":"4","address":"10.99.0.2/24","interface":2}]}`,
		map[string]sides{
			"portmap": {mapped4, ""}, "bandwidth": {shaped, ""}, "firewall": {tooOld, ""},
			"tuning": {tuned("2"), ""}, "sbr": {routed4, ""}, "vrf": {tooOld, ""},
		}},
	{"IPAM result at 0.2.0", "0.2.0", `{"cniVersion":"0.2.0","ip4":{"ip":"10.99.0.2/24","gateway":"10.99.0.1"}}`,
		map[string]sides{
			"portmap": {mapped4, ""}, "bandwidth": {tooOld, ""}, "firewall": {tooOld, ""},
			"tuning": {tuned(""), ""}, "sbr": {routed4, ""}, "vrf": {tooOld, ""},
		}},
}

// bareShapes run on the world whose container interface has no address
// (newBareWorld), so that the kernel cannot stand in for what prevResult leaves out.
var bareShapes = []shape{
	// The addresses are on another container interface: the reference's sbr accepts
	// it and routes nothing, and so does ours, where it used to refuse; portmap has
	// nothing to map either. (The reference's sbr also takes the interface's routes
	// out of main, which ours does not: the sbr package's
	// TestReferenceEmptiesMainOfAnInterfaceWithoutAddresses.)
	{"addresses on another interface, none in the kernel", "1.0.0", `{"cniVersion":"1.0.0",
		"interfaces":[{"name":"br0"},{"name":"veth0"},{"name":"net1","sandbox":"NETNS"},{"name":"eth0","sandbox":"NETNS"}],
		"ips":[{"address":"10.98.0.5/24","interface":2},{"address":"fd00:98::5/64","interface":2}]}`,
		map[string]sides{
			"portmap": {mappedNo, ""}, "bandwidth": {shaped, ""}, "firewall": {firewalled("10.98.0.5 fd00:98::5", "br0"), ""},
			"tuning": {tuned("3"), ""}, "sbr": {"ok: ", ""}, "vrf": {inVRF, ""},
		}},
}

// allShapes yields every shape with the world it runs on.
func allShapes() iter.Seq2[shape, func(*testing.T) *world] {
	return func(yield func(shape, func(*testing.T) *world) bool) {
		for _, set := range []struct {
			shapes   []shape
			newWorld func(*testing.T) *world
		}{{shapes, newWorld}, {bareShapes, newBareWorld}} {
			for _, s := range set.shapes {
				if !yield(s, set.newWorld) {
					return
				}
			}
		}
	}
}

// A meta plugin under test: its config keys, and what it did to the world.
type meta struct {
	name   string // the reference binary of the same job
	keys   string
	effect func(t *testing.T, w *world, out []byte) string
	// chain wraps the plugin in our chain plugin, whose child gets the chain's
	// prevResult (the reference has no chain plugin, so its side runs the plugin
	// alone).
	chain bool
	needs []kernelfeature.Feature
}

const portMappings = `[{"hostPort":8080,"containerPort":80,"protocol":"tcp"}]`

var metas = []meta{
	{name: "portmap", keys: `"backend":"iptables","runtimeConfig":{"portMappings":` + portMappings + `}`,
		effect: func(t *testing.T, w *world, _ []byte) string { return w.dnatTargets(t) }},
	{name: "bandwidth", keys: `"ingressRate":8000000,"ingressBurst":100000,"egressRate":8000000,"egressBurst":100000`,
		effect: func(t *testing.T, w *world, _ []byte) string { return w.shaped(t) }},
	{name: "firewall", keys: `"backend":"iptables","ingressPolicy":"same-bridge"`,
		effect: func(t *testing.T, w *world, _ []byte) string { return w.firewalled(t) }},
	{name: "tuning", keys: `"mac":"` + mac + `","dataDir":"STATE"`,
		effect: func(t *testing.T, w *world, out []byte) string { return w.tuned(t, out) }},
	{name: "sbr",
		effect: func(t *testing.T, w *world, _ []byte) string { return w.sourceRouted(t) }},
	{name: "vrf", keys: `"vrfname":"blue"`, needs: []kernelfeature.Feature{kernelfeature.VRF},
		effect: func(t *testing.T, w *world, _ []byte) string { return w.vrfMember(t) }},
	{name: "portmap", chain: true, keys: `"backend":"iptables"`,
		effect: func(t *testing.T, w *world, _ []byte) string { return w.dnatTargets(t) }},
}

// config is the network config of m with the shape as its prevResult, for the world w
// (STATE in the keys stands for its state directory).
func (m meta) config(s shape, w *world, ours bool) []byte {
	prev := strings.ReplaceAll(s.prev, "NETNS", w.ctr.Path)
	plugin := fmt.Sprintf(`"type":%q`, m.name)
	if m.keys != "" {
		plugin += "," + strings.ReplaceAll(m.keys, "STATE", w.state)
	}
	if m.chain && ours {
		return fmt.Appendf(nil, `{"cniVersion":%q,"name":"prevnet","type":"chain",
			"capabilities":{"portMappings":true},"runtimeConfig":{"portMappings":%s},
			"plugins":[{%s,"capabilities":{"portMappings":true}}],"prevResult":%s}`, s.version, portMappings, plugin, prev)
	}
	if m.chain {
		plugin += `,"runtimeConfig":{"portMappings":` + portMappings + `}`
	}
	return fmt.Appendf(nil, `{"cniVersion":%q,"name":"prevnet",%s,"prevResult":%s}`, s.version, plugin, prev)
}

func (m meta) label() string {
	if m.chain {
		return "chain[" + m.name + "]"
	}
	return m.name
}

// outcome runs ADD of m on a fresh world and says what came of it: "ok: <effect>" or
// "error <code>: <msg>". After an ADD that succeeded, CHECK runs with the ADD's output
// as prevResult, as a runtime's would, and its failure is part of the outcome.
func outcome(t *testing.T, newW func(*testing.T) *world, m meta, s shape, bin string, ours bool) string {
	w := newW(t)
	conf := m.config(s, w, ours)
	r := w.exec(t, bin, "ADD", conf)
	if r.code != 0 {
		return fmt.Sprintf("error %d: %s", r.code, r.msg)
	}
	got := "ok: " + m.effect(t, w, r.out)
	if !version.AtLeast(s.version, "0.4.0") {
		return got // no CHECK before 0.4.0
	}
	check := pt.WithKeys(t, conf, map[string]any{"prevResult": json.RawMessage(r.out)})
	if r := w.exec(t, bin, "CHECK", check); r.code != 0 {
		got += fmt.Sprintf("; CHECK error %d: %s", r.code, r.msg)
	}
	return got
}

// TestPrevResultShapesThroughOursAndTheReference runs every shape through each meta
// plugin, ours and the reference's (v1.9.1), exec'd as a runtime execs them on a
// fresh world each: ours accepts every shape the reference accepts, does what the
// reference does with it, and where the shape's comment says so does more (acts on
// the addresses and interfaces the kernel shows) instead of doing nothing or
// refusing.
func TestPrevResultShapesThroughOursAndTheReference(t *testing.T) {
	testns.RequireRoot(t)
	ourDir := testns.LinkPluginDir(t, "portmap", "bandwidth", "firewall", "tuning", "sbr", "vrf", "chain")
	for _, m := range metas {
		for s, newW := range allShapes() {
			t.Run(m.label()+"/"+s.name, func(t *testing.T) {
				for _, f := range m.needs {
					kernelfeature.Require(t, f)
				}
				want, ok := s.want[m.name]
				require.True(t, ok, "the shape lists no outcome for %s", m.name)
				if want.ours == "" {
					want.ours = want.ref
				}
				bin := filepath.Join(ourDir, m.name)
				if m.chain {
					bin = filepath.Join(ourDir, "chain")
				}
				ref := outcome(t, newW, m, s, reftest.Bin(t, m.name), false)
				ours := outcome(t, newW, m, s, bin, true)
				assert.Equal(t, want.ref, ref, "the reference")
				assert.Equal(t, want.ours, ours, "ours")
				if strings.HasPrefix(ref, "ok") {
					assert.True(t, strings.HasPrefix(ours, "ok"), "the reference accepts the shape, so must ours")
				}
			})
		}
	}
}
