package upgradetest_test

import (
	"fmt"
	"net"
	"regexp"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/cnikit/cni/internal/host/netfilter"
	"github.com/cnikit/cni/internal/testbed/testns"
)

// TestReferenceAttachmentsAreAdopted is the matrix: for each runtime, main plugin and
// backend choice, the reference sets a pod up, ours CHECKs it and DELs it (netns alive,
// netns gone), after which nothing names the pod and our next ADD of its addresses
// gets its own traffic only; or ours GCs its network (gcOneOfTwoNetworks).
func TestReferenceAttachmentsAreAdopted(t *testing.T) {
	for rtName, newRuntime := range runtimes {
		for _, main := range []string{"bridge", "ptp"} {
			for _, backend := range []string{"", "iptables", "nftables"} {
				for _, end := range []string{"del", "del-netns-gone", "gc"} {
					t.Run(fmt.Sprintf("%s/%s/%s/%s", rtName, main, backendName(backend), end), func(t *testing.T) {
						t.Parallel()
						n := newNode(t)
						rt := newRuntime(t)
						nw := network{name: "upg", main: main, backend: backend}
						if end == "gc" {
							gcOneOfTwoNetworks(t, n, rt, nw)
							return
						}
						p := adopted(t, n, rt, nw, 47000)
						requireUnsetPicksNFTables(t, n, nw)
						if end == "del-netns-gone" {
							p.ns.Close()
						}
						require.NoError(t, rt.del(n, []string{n.ours}, nw.conflist(n), p), "our DEL")
						assert.Empty(t, n.naming(p, nw), "DEL leaves nothing of the pod")
						nextAdd(t, n, rt, nw, p)
					})
				}
			}
		}
	}
}

func backendName(b string) string {
	if b == "" {
		return "auto"
	}
	return b
}

// adopted is a pod with host ports from hostPorts on that the reference set up on nw
// (its ADD names the pod on the host) and ours CHECKed.
func adopted(t *testing.T, n *node, rt runtime, nw network, hostPorts int) *pod {
	t.Helper()
	p := n.newPod(hostPorts)
	conf := nw.conflist(n)
	require.NoError(t, rt.add(n, []string{n.ref}, conf, p), "the reference's ADD")
	require.NotEmpty(t, n.naming(p, nw), "the reference's ADD names the pod")
	require.NoError(t, rt.check(n, []string{n.ours}, conf, p), "our CHECK of the reference's attachment")
	return p
}

// requireUnsetPicksNFTables: with the backends unset (nw.backend ""), the node is one
// where, after the reference's ADD, our rule picks nftables for the plugins (its only
// iptables rules are the plugins' own), while the reference used iptables: the case
// where ours must find the reference's state in the backend it did not choose.
func requireUnsetPicksNFTables(t *testing.T, n *node, nw network) {
	t.Helper()
	if nw.backend != "" {
		return
	}
	var picked netfilter.Backend
	require.NoError(t, n.host.Do(func() error { picked = netfilter.Detect(); return nil }))
	require.Equal(t, netfilter.NFTables, picked, "the rule's pick for unset backends after the reference's ADD")
}

// nextAdd is our ADD of a new pod that gets old's addresses, with host ports of its
// own: it passes CHECK, answers on its ports, and old's host ports are closed (a
// mapping old left behind would hand their traffic to it). Its DEL leaves nothing.
func nextAdd(t *testing.T, n *node, rt runtime, nw network, old *pod) {
	t.Helper()
	next := n.newPod(48000)
	for _, a := range old.ips {
		next.wantIPs = append(next.wantIPs, a.String())
	}
	conf := nw.conflist(n)
	require.NoError(t, rt.add(n, []string{n.ours}, conf, next), "our next ADD")
	require.ElementsMatch(t, old.ips, next.ips, "the next pod has the old one's addresses")
	require.NoError(t, rt.check(n, []string{n.ours}, conf, next))
	testns.ServeTCP(t, next.ns, "tcp4", ":80", next.id)
	got, err := testns.DialTCP(n.client, net.JoinHostPort(uplinkHost, "48000"), dialTimeout)
	require.NoError(t, err, "the next pod's own host port")
	assert.Equal(t, next.id, got)
	_, err = testns.DialTCP(n.client, net.JoinHostPort(uplinkHost, "47000"), dialTimeout)
	assert.Error(t, err, "the old pod's host port reaches nobody")
	require.NoError(t, rt.del(n, []string{n.ours}, conf, next))
	assert.Empty(t, n.naming(next, nw), "our DEL of our own pod leaves nothing")
}

// gcLeaves are the reference's objects of a pod that name no network, which GC of
// one network therefore cannot take as its own: the firewall plugin's rules (they name
// the address only), portmap's nftables rules (the container id only), bandwidth's ifb
// (a hash of network and id, no alias) and tuning's backup (id and interface). The
// runtime's DEL of the pod removes them.
var gcLeaves = []*regexp.Regexp{
	regexp.MustCompile(`^ip6?tables-save: -A CNI-FORWARD (-d \S+ -m conntrack --ctstate RELATED,ESTABLISHED|-s \S+) -j ACCEPT$`),
	regexp.MustCompile(`^nft: ip6? [sd]addr \S+ (ct state related,established )?counter +accept$`),
	regexp.MustCompile(`^nft: .* comment "upg-[A-Z2-7]{16}"$`),
	regexp.MustCompile(`bwp[0-9a-f]{12}`),
	regexp.MustCompile(`^file .*/upg-[A-Z2-7]{16}_eth0\.json:`),
}

// gcOneOfTwoNetworks: the reference set up a pod on each of two networks; ours GCs
// the first with an empty valid list while its pod's netns is gone. What names the
// network (masquerade, portmap's iptables chains, the address reservation) goes; what
// names no network stays (gcLeaves) until the runtime's DEL. The other network's pod
// keeps everything and passes our CHECK, and our next ADD of the pod's addresses gets
// its own traffic only (nextAdd).
func gcOneOfTwoNetworks(t *testing.T, n *node, rt runtime, nw network) {
	other := nw
	other.name, other.index = "upg-other", 1
	p, q := adopted(t, n, rt, nw, 47000), adopted(t, n, rt, other, 49000)
	requireUnsetPicksNFTables(t, n, nw)
	before := n.naming(q, other)
	netnsGone(t, p)
	require.NoError(t, rt.gc(n, []string{n.ours}, nw.conflist(n)), "our GC")
	for _, l := range n.naming(p, nw) {
		assert.True(t, matchesAny(gcLeaves, l), "GC leaves %q", l)
	}
	assert.Equal(t, before, n.naming(q, other), "the other network's pod keeps all it had")
	require.NoError(t, rt.check(n, []string{n.ours}, other.conflist(n), q), "and passes CHECK")
	// GC gave p's addresses back: the next pod to get them must not receive p's host-port
	// traffic through what GC left (the reference's cni_hostport rules).
	nextAdd(t, n, rt, nw, p)

	require.NoError(t, rt.del(n, []string{n.ours}, nw.conflist(n), p), "the runtime's DEL after GC")
	assert.Empty(t, n.naming(p, nw))
	require.NoError(t, rt.del(n, []string{n.ours}, other.conflist(n), q))
	assert.Empty(t, n.naming(q, other))
}

// netnsGone drops the pod's network namespace, as the end of a pod does, and keeps its
// path naming none. The path is an fd of this process (/proc/<pid>/fd/<n>), whose
// number the kernel would hand to the next file opened, another parallel test's
// namespace among them, where a runtime's path (a bind mount, a pid) stays gone: the
// fd becomes /dev/null in one step (dup3), which the namespace's cleanup closes.
func netnsGone(t *testing.T, p *pod) {
	t.Helper()
	var pid, fd int
	_, err := fmt.Sscanf(p.ns.Path, "/proc/%d/fd/%d", &pid, &fd)
	require.NoError(t, err, "the netns path of %s", p.id)
	null, err := unix.Open("/dev/null", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	require.NoError(t, err)
	defer unix.Close(null)
	require.NoError(t, unix.Dup3(null, fd, unix.O_CLOEXEC))
}

func matchesAny(res []*regexp.Regexp, s string) bool {
	for _, re := range res {
		if re.MatchString(s) {
			return true
		}
	}
	return false
}
