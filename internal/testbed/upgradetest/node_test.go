package upgradetest_test

import (
	"crypto/rand"
	"crypto/sha512"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/netip"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/vishvananda/netlink"

	"github.com/cnikit/cni/internal/host/sysctl"
	"github.com/cnikit/cni/internal/testbed/reftest"
	"github.com/cnikit/cni/internal/testbed/testns"
)

// The uplink joins the host to a client netns; mappings with a hostIP use its address.
const (
	uplinkHost = "10.99.0.1"
	uplinkPeer = "10.99.0.2"
)

// dialTimeout bounds a connection through a mapped port.
const dialTimeout = 3 * time.Second

// ourPlugins are the plugin names linked to the cni binary.
var ourPlugins = []string{"bridge", "ptp", "host-local", "portmap", "firewall", "bandwidth", "tuning"}

// node is one test's host: a netns with an uplink to a client netns, the reference
// plugins' dir, a dir of links to the cni binary, and the state dirs of host-local and
// tuning (never the machine's).
type node struct {
	t            *testing.T
	host, client *testns.NS
	ref, ours    string
	ipamDir      string
	tuningDir    string
}

func newNode(t *testing.T) *node {
	t.Helper()
	testns.RequireRoot(t)
	n := &node{
		t: t, host: testns.NewWithLoopback(t), client: testns.NewWithLoopback(t),
		ref: reftest.Dir(t), ours: testns.LinkPluginDir(t, ourPlugins...),
		ipamDir: t.TempDir(), tuningDir: t.TempDir(),
	}
	testns.Veth(t, n.host, "uplink", []string{uplinkHost + "/24"}, n.client, "uplinkp", []string{uplinkPeer + "/24"})
	return n
}

// network is one network configuration list of the matrix: a main plugin that
// masquerades, then portmap, firewall, bandwidth and tuning, dual stack.
type network struct {
	name string
	// main is "bridge" or "ptp".
	main string
	// backend is given as ipMasqBackend and as portmap's backend, and "iptables" as the
	// firewall's (the reference's firewall has no nftables backend); "" leaves all three
	// unset for each plugin to pick its own, which is where the reference and we differ
	// (iptables for the reference whenever iptables works, nftables for us when no legacy
	// table is in use).
	backend string
	// index picks the subnets 10.66.<index>.0/24 and fd66:<index>::/64.
	index int
	// firewalld leaves the firewall plugin's backend unset whatever backend says, for
	// firewalld to be found.
	firewalld bool
}

func (nw network) subnets() (string, string) {
	return fmt.Sprintf("10.66.%d.0/24", nw.index), fmt.Sprintf("fd66:%d::/64", nw.index)
}

// conflist is the network's configuration list, with the node's state dirs.
func (nw network) conflist(n *node) []byte {
	v4, v6 := nw.subnets()
	mainConf := map[string]any{
		"type": nw.main, "ipMasq": true, "capabilities": map[string]any{"ips": true},
		"ipam": map[string]any{
			"type": "host-local", "dataDir": n.ipamDir,
			"ranges": []any{[]any{map[string]any{"subnet": v4}}, []any{map[string]any{"subnet": v6}}},
			"routes": []any{map[string]any{"dst": "0.0.0.0/0"}, map[string]any{"dst": "::/0"}},
		},
	}
	if nw.main == "bridge" {
		mainConf["bridge"] = fmt.Sprintf("cni-upg%d", nw.index)
		mainConf["isGateway"] = true
	}
	portmap := map[string]any{"type": "portmap", "capabilities": map[string]any{"portMappings": true}}
	if nw.backend != "" {
		mainConf["ipMasqBackend"] = nw.backend
		portmap["backend"] = nw.backend
	}
	firewall := map[string]any{"type": "firewall"}
	if nw.backend != "" && !nw.firewalld {
		firewall["backend"] = "iptables"
	}
	list := map[string]any{
		"cniVersion": "1.1.0", "name": nw.name,
		"plugins": []any{
			mainConf,
			portmap,
			firewall,
			map[string]any{"type": "bandwidth",
				"ingressRate": 100_000_000, "ingressBurst": 1_000_000, "egressRate": 50_000_000, "egressBurst": 800_000},
			map[string]any{"type": "tuning", "dataDir": n.tuningDir,
				"mtu": 1400, "promisc": true, "txQLen": 500,
				"sysctl": map[string]string{"net.ipv4.conf.IFNAME.arp_ignore": "1"}},
		},
	}
	b, err := json.Marshal(list)
	require.NoError(n.t, err)
	return b
}

// mapping is one entry of the pods' portMappings capability.
type mapping struct {
	HostPort      int    `json:"hostPort"`
	ContainerPort int    `json:"containerPort"`
	Protocol      string `json:"protocol"`
	HostIP        string `json:"hostIP,omitempty"`
}

// pod is one container attached to one network as eth0.
type pod struct {
	id     string
	ns     *testns.NS
	ifName string
	ports  []mapping
	// wantIPs are the addresses its ADD asks for (capability ips), none for any.
	wantIPs []string
	// ips are the addresses ADD gave it.
	ips []netip.Addr
}

// newPod makes a container netns (lo up, no DAD on its new interfaces, so that a
// dual-stack ADD need not wait for it) and a pod with host ports from base on.
func (n *node) newPod(base int) *pod {
	n.t.Helper()
	ns := testns.NewWithLoopback(n.t)
	ns.Run(n.t, func() error { return sysctl.Set("net/ipv6/conf/default/accept_dad", "0") })
	return &pod{
		id: "upg-" + rand.Text()[:16], ns: ns, ifName: "eth0",
		ports: []mapping{
			{HostPort: base, ContainerPort: 80, Protocol: "tcp"},
			{HostPort: base + 1, ContainerPort: 53, Protocol: "udp"},
			{HostPort: base + 2, ContainerPort: 443, Protocol: "tcp", HostIP: uplinkHost},
		},
	}
}

// capabilityArgs are what a runtime offers the network's plugins for the pod.
func (p *pod) capabilityArgs() map[string]any {
	args := map[string]any{"portMappings": p.ports}
	if len(p.wantIPs) > 0 {
		args["ips"] = p.wantIPs
	}
	return args
}

// needles are the patterns that name the pod on network nw: its id, its addresses, its
// host ports, and the hash of network and id that the reference (and we) name the
// pod's iptables chains and ifb after.
func (p *pod) needles(nw network) []*regexp.Regexp {
	sum := sha512.Sum512([]byte(nw.name + p.id))
	words := []string{p.id, hex.EncodeToString(sum[:])[:12]}
	for _, a := range p.ips {
		words = append(words, a.String())
	}
	for _, m := range p.ports {
		words = append(words, fmt.Sprint(m.HostPort))
	}
	out := make([]*regexp.Regexp, len(words))
	for i, w := range words {
		// Not part of a longer number or address: 10.66.0.2 is not 10.66.0.23.
		out[i] = regexp.MustCompile(`(^|[^0-9a-fA-F.:])` + regexp.QuoteMeta(w) + `($|[^0-9a-fA-F:])`)
	}
	return out
}

// counters are the packet and byte counts iptables-save and nft print, which are no
// names but could spell a port number.
var counters = regexp.MustCompile(`\[\d+:\d+\]|packets \d+ bytes \d+`)

// state is everything of the host that could name a pod, one line per item: both
// iptables families' rules, the nftables ruleset, the links, their qdiscs and ingress
// filters, and the files (with their contents) of the state dirs. host-local's
// last_reserved_ip.* is left out: it is the allocator's cursor, which the reference
// keeps too, not the pod's.
func (n *node) state() []string {
	n.t.Helper()
	var lines []string
	add := func(what, out string) {
		for _, l := range strings.Split(counters.ReplaceAllString(out, ""), "\n") {
			if l = strings.TrimSpace(l); l != "" {
				lines = append(lines, what+": "+l)
			}
		}
	}
	for _, cmd := range [][]string{
		{"iptables-save"}, {"ip6tables-save"}, {"nft", "list", "ruleset"},
		{"ip", "-d", "link", "show"}, {"tc", "qdisc", "show"},
	} {
		out, err := n.host.Exec(n.t, cmd[0], cmd[1:]...)
		require.NoError(n.t, err, "%v: %s", cmd, out)
		add(cmd[0], out)
	}
	h := n.host.Handle(n.t)
	links, err := h.LinkList()
	require.NoError(n.t, err)
	for _, l := range links {
		out, err := n.host.Exec(n.t, "tc", "filter", "show", "dev", l.Attrs().Name, "ingress")
		if err != nil {
			// A veth whose peer's netns was closed goes on its own, a moment later.
			if _, lerr := h.LinkByName(l.Attrs().Name); errors.As(lerr, new(netlink.LinkNotFoundError)) {
				continue
			}
		}
		require.NoError(n.t, err, out)
		add("tc filter "+l.Attrs().Name, out)
	}
	for _, dir := range []string{n.ipamDir, n.tuningDir} {
		err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || strings.HasPrefix(d.Name(), "last_reserved_ip.") || d.Name() == "lock" {
				return err
			}
			var data []byte
			if d.Type()&fs.ModeSymlink != 0 {
				// host-local's index entries are links whose target text is the record.
				target, err := os.Readlink(path)
				data = []byte(target)
				if err != nil {
					return err
				}
			} else if data, err = os.ReadFile(path); err != nil {
				return err
			}
			add("file "+path, path+" "+string(data))
			return nil
		})
		require.NoError(n.t, err)
	}
	return lines
}

// naming returns the lines of the host's state that name the pod on network nw.
func (n *node) naming(p *pod, nw network) []string {
	n.t.Helper()
	var out []string
	for _, l := range n.state() {
		for _, re := range p.needles(nw) {
			if re.MatchString(l) {
				out = append(out, l)
				break
			}
		}
	}
	return out
}
