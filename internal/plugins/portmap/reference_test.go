package portmap

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/cnikit/cni/internal/host/iptables"
	"github.com/cnikit/cni/internal/spec/skel"
	"github.com/cnikit/cni/internal/testbed/nftrecord"
	"github.com/cnikit/cni/internal/testbed/testns"
)

// referenceNFTables writes the reference plugin's (v1.9) nftables tables as its
// `"backend":"nftables"` leaves them, with rules (lines of one family's hostports or
// masquerading chain, "chain: rule") tagged with container ids.
func referenceNFTables(t *testing.T, e *env, rules map[string][]string) {
	t.Helper()
	testns.RequireFirewallBinaries(t, "writes the reference plugin's nftables state with nft -f")
	var script strings.Builder
	for _, fam := range []string{"ip", "ip6"} {
		fmt.Fprintf(&script, "table %[1]s cni_hostport {\n comment \"CNI portmap plugin\"\n chain hostports { }\n chain hostip_hostports { }\n"+
			" chain hostports_all { jump hostip_hostports; jump hostports; }\n"+
			" chain prerouting { type nat hook prerouting priority dstnat; fib daddr type local jump hostports_all; }\n"+
			" chain output { type nat hook output priority -100; fib daddr type local jump hostports_all; }\n"+
			" chain masquerading { type nat hook postrouting priority srcnat; }\n}\n", fam)
		for cid, lines := range rules {
			for _, l := range lines {
				if f, rule, _ := strings.Cut(l, " "); f == fam {
					chain, r, _ := strings.Cut(rule, ": ")
					fmt.Fprintf(&script, "add rule %s cni_hostport %s %s comment %q\n", fam, chain, r, cid)
				}
			}
		}
	}
	e.host.Run(t, func() error {
		cmd := exec.Command("nft", "-f", "-")
		cmd.Stdin = strings.NewReader(script.String())
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("%v: %s\n%s", err, out, script.String())
		}
		return nil
	})
}

// referenceRulesOf are the reference's rules of container c for standardMappings.
func referenceRulesOf(c *container) []string {
	return []string{
		fmt.Sprintf("ip hostports: tcp dport 8080 dnat to %s:%d", c.ip4, tcpPort),
		fmt.Sprintf("ip hostports: udp dport 8081 dnat to %s:%d", c.ip4, udpPort),
		fmt.Sprintf("ip masquerading: ip saddr %[1]s ip daddr %[1]s masquerade", c.ip4),
		fmt.Sprintf("ip masquerading: ip saddr 127.0.0.1 ip daddr %s masquerade", c.ip4),
		fmt.Sprintf("ip6 hostports: tcp dport 8080 dnat to [%s]:%d", c.ip6, tcpPort),
		fmt.Sprintf("ip6 hostports: udp dport 8081 dnat to [%s]:%d", c.ip6, udpPort),
		fmt.Sprintf("ip6 masquerading: ip6 saddr %[1]s ip6 daddr %[1]s masquerade", c.ip6),
	}
}

// TestTheReferencePluginsNftablesMappingsAreCheckedAndDeleted is a container the
// reference plugin mapped with its nftables backend before the node's plugins were
// replaced: CHECK passes on its rules while they are intact and fails without one; DEL
// removes them (and their flows), only those reaching the container's addresses when
// prevResult gives them, and leaves other containers' rules.
func TestTheReferencePluginsNftablesMappingsAreCheckedAndDeleted(t *testing.T) {
	testns.RequireFirewallBinaries(t, "writes the reference plugin's nftables state with nft -f")
	e := newEnv(t)
	c, other := e.container("ctr-ref"), e.container("ctr-other")
	elsewhere := "ip hostports: tcp dport 7070 dnat to 10.99.9.9:80" // the container on another network
	referenceNFTables(t, e, map[string][]string{
		c.id:     append(referenceRulesOf(c), elsewhere),
		other.id: {fmt.Sprintf("ip hostports: tcp dport 9090 dnat to %s:%d", other.ip4, tcpPort)},
	})
	for _, dial := range []func() (string, error){
		func() (string, error) { return dialTCP(e.client, "10.77.0.1:8080") },
		func() (string, error) { return dialUDP(e.client, "10.77.0.1:8081") },
		func() (string, error) { return dialTCP(e.client, "[fd77::1]:8080") },
	} {
		got, err := dial()
		require.NoError(t, err, "the reference's rules work")
		require.Equal(t, c.id, got)
	}
	require.NotEmpty(t, e.conntrackTo(c.ip4))

	for _, backend := range []any{"nftables", nil} {
		conf := c.netconf(t, "net1", map[string]any{"backend": backend}, standardMappings())
		require.NoError(t, e.invoke(skel.CmdCheck, c, conf), "backend %v", backend)
	}
	conf := c.netconf(t, "net1", map[string]any{"backend": "nftables"}, standardMappings())
	moved := c.netconf(t, "net1", map[string]any{"backend": "nftables"}, []PortMapping{{HostPort: 8082, ContainerPort: tcpPort, Protocol: "tcp"}})
	assert.ErrorContains(t, e.invoke(skel.CmdCheck, c, moved), "cni_hostport has no rule for port mapping tcp 8082")
	out, err := e.host.Exec(t, "nft", "flush", "chain", "ip6", "cni_hostport", "masquerading")
	require.NoError(t, err, out)
	assert.ErrorContains(t, e.invoke(skel.CmdCheck, c, conf), "does not masquerade")

	require.NoError(t, e.invoke(skel.CmdDel, c, conf))
	rules := e.ruleset()
	for _, gone := range []string{c.ip4, c.ip6, "dport 8080", "dport 8081"} {
		assert.NotContains(t, rules, gone)
	}
	assert.Contains(t, rules, "dport 7070", "the container's rule to an address of another network stays")
	assert.Contains(t, rules, other.ip4, "another container's rules stay")
	assert.Empty(t, e.conntrackTo(c.ip4), "the mapped flows are forgotten")
	got, err := dialTCP(e.client, "10.77.0.1:9090")
	require.NoError(t, err)
	assert.Equal(t, other.id, got)

	bare := []byte(`{"cniVersion":"1.1.0","name":"net1","type":"portmap"}`)
	require.NoError(t, e.invoke(skel.CmdDel, c, bare))
	assert.NotContains(t, e.ruleset(), "dport 7070", "without prevResult every rule of the container goes, as the reference's DEL does")
	assert.Contains(t, e.ruleset(), other.ip4)
}

// TestCheckFindsTheIPTablesLayoutWhereNftablesWasChosen: the reference picks iptables
// whenever iptables works, we pick nftables on a node without legacy tables; CHECK of
// its attachment, with the backend unset, finds the iptables layout (ours too, here
// made by our iptables backend) and checks it, and fails once its chain is gone.
func TestCheckFindsTheIPTablesLayoutWhereNftablesWasChosen(t *testing.T) {
	requireBackend(t, "iptables")
	e := newEnv(t)
	c := e.container("ctr-ipt")
	require.NoError(t, e.invoke(skel.CmdAdd, c, c.netconf(t, "net1", map[string]any{"backend": "iptables"}, standardMappings())))
	conf := c.netconf(t, "net1", map[string]any{"backend": "nftables"}, standardMappings())
	require.NoError(t, e.invoke(skel.CmdCheck, c, conf))

	dn := iptDNPrefix + attachment{net: "net1", cid: c.id}.hash()
	out, err := e.host.Exec(t, "ip6tables", "-t", "nat", "-F", dn)
	require.NoError(t, err, out)
	assert.ErrorContains(t, e.invoke(skel.CmdCheck, c, conf), "chain "+dn+" lacks rule")
}

// TestEntryPortsCountInAnyGroupingAndBeyondTheFamily: CHECK asks that the entry rules
// send each host port to the attachment's chain, however they group the ports; the
// reference's IPv6 entries also list the ports of IPv4-only mappings.
func TestEntryPortsCountInAnyGroupingAndBeyondTheFamily(t *testing.T) {
	entry := func(comment, ports string) iptables.Rule {
		return iptables.Rule{"-p", "tcp", "-m", "comment", "--comment", comment, "-m", "multiport", "--dports", ports, "-j", "CNI-DN-x"}
	}
	want := entry("dnat a", "80,443")
	for _, tc := range []struct {
		have []iptables.Rule
		ok   bool
	}{
		{[]iptables.Rule{entry("dnat a", "80,443")}, true},
		{[]iptables.Rule{entry("dnat a", "80,443,8443")}, true},
		{[]iptables.Rule{entry("dnat a", "443"), entry("dnat a", "80")}, true},
		{[]iptables.Rule{entry("dnat a", "80")}, false},
		{[]iptables.Rule{entry("dnat a", "80"), entry("dnat b", "443")}, false},
	} {
		assert.Equal(t, tc.ok, coveredBy(tc.have, want), "%v", tc.have)
	}
}

// TestLookingForTheReferencesRulesCostsOneDump: DEL (and ADD) on a node that never ran the
// reference's nftables backend spends one table-list dump on finding that out, and with
// the reference's tables present, one rule dump per chain and one transaction.
func TestLookingForTheReferencesRulesCostsOneDump(t *testing.T) {
	testns.RequireFirewallBinaries(t, "writes the reference plugin's nftables state with nft -f")
	e := newEnv(t)
	c := e.container("ctr-ref")
	removeOf := func() []nftrecord.Request {
		t.Helper()
		var r nftrecord.Recorder
		defer r.Close()
		require.NoError(t, e.host.Do(func() error {
			_, err := nftBackend{conn: r.Option()}.removeReference(context.Background(), c.id, nil)
			return err
		}))
		return r.Sent()
	}
	assert.Equal(t, []nftrecord.Request{{Msg: unix.NFT_MSG_GETTABLE, Dump: true}}, removeOf())
	var r nftrecord.Recorder
	require.NoError(t, e.host.Do(func() error {
		_, err := nftBackend{conn: r.Option()}.removeStale(context.Background(), []netip.Addr{netip.MustParseAddr(c.ip4)}, func(string) bool { return true })
		return err
	}))
	r.Close()
	assert.Equal(t, []nftrecord.Request{{Msg: unix.NFT_MSG_GETTABLE, Dump: true}}, r.Sent(), "and so does ADD's look for stale rules")

	referenceNFTables(t, e, map[string][]string{c.id: referenceRulesOf(c)})
	sent := removeOf()
	assert.Equal(t, 1, nftrecord.Batches(sent), "%v", sent)
	assert.Len(t, sent, 1+2*len(refRuleChains)+1+len(referenceRulesOf(c)), "the table list, the chains' rules, one batch of deletions: %v", sent)
	assert.NotContains(t, e.ruleset(), c.ip4)
}

// TestAddRemovesTheReferencesStaleRulesToItsAddresses: GC cannot take the reference's
// nftables rules as its network's, so a pod gone without a DEL leaves them, still
// DNATing its host ports to its address. Our ADD of the next pod IPAM gives that
// address to removes every rule of the reference's reaching its addresses, whatever
// container id the rule names, with mappings of its own or none, in either backend,
// and forgets those rules' flows; the reference's rules to other addresses stay.
func TestAddRemovesTheReferencesStaleRulesToItsAddresses(t *testing.T) {
	testns.RequireFirewallBinaries(t, "writes the reference plugin's nftables state with nft -f")
	for name, tc := range map[string]struct {
		backend  any
		mappings []PortMapping
	}{
		"no mappings":         {nil, nil},
		"nftables":            {"nftables", []PortMapping{{HostPort: 9091, ContainerPort: tcpPort, Protocol: "tcp"}}},
		"iptables":            {"iptables", []PortMapping{{HostPort: 9091, ContainerPort: tcpPort, Protocol: "tcp"}}},
		"the same host ports": {"nftables", standardMappings()},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			c, other := e.container("ctr-next"), e.container("ctr-other")
			gone := *c
			gone.id = "ctr-gone"
			referenceNFTables(t, e, map[string][]string{
				gone.id:  referenceRulesOf(&gone),
				other.id: {fmt.Sprintf("ip hostports: tcp dport 9090 dnat to %s:%d", other.ip4, tcpPort)},
			})
			_, err := dialUDP(e.client, "10.77.0.1:8081")
			require.NoError(t, err, "the stale rule reaches the address")
			require.NotEmpty(t, e.conntrackTo(c.ip4))

			require.NoError(t, e.invoke(skel.CmdAdd, c, c.netconf(t, "net1", map[string]any{"backend": tc.backend}, tc.mappings)))
			assert.NotContains(t, e.ruleset(), gone.id, "no rule of the reference's reaches the pod's addresses")
			assert.Empty(t, e.conntrackTo(c.ip4), "the stale rules' flows are forgotten")
			if tc.mappings == nil {
				_, err := dialTCP(e.client, "10.77.0.1:8080")
				assert.Error(t, err, "the gone pod's host port reaches nobody")
			} else {
				got, err := dialTCP(e.client, fmt.Sprintf("10.77.0.1:%d", tc.mappings[0].HostPort))
				require.NoError(t, err)
				assert.Equal(t, c.id, got, "the pod's own host port")
			}
			got, err := dialTCP(e.client, "10.77.0.1:9090")
			require.NoError(t, err)
			assert.Equal(t, other.id, got, "the reference's rule of another address stays")
		})
	}
}

// TestAddKeepsTheReferencesRulesOfALivePodAtTheSameAddress: the same address can be two
// live pods' at once, on two networks with overlapping ranges (or static IPAM, or the
// ips capability). Our ADD of the second must not take down the host ports the
// reference mapped for the first, whose cache entry names a network namespace that
// exists (it removed them, silently, whatever container they named); it says on stderr
// that it kept them and why. Stale rules at that address still go, with a line saying
// why: of a container no cache entry names, of one whose entry names a network
// namespace that is gone, of one whose entry names the new pod's own namespace (a
// path reused). Without a readable cache nothing proves a container gone: all stays.
func TestAddKeepsTheReferencesRulesOfALivePodAtTheSameAddress(t *testing.T) {
	testns.RequireFirewallBinaries(t, "writes the reference plugin's nftables state with nft -f")
	e := newEnv(t)
	c := e.container("ctr-new")
	live := *c
	live.id = "ctr-live"
	rule := func(port int) []string {
		return []string{fmt.Sprintf("ip hostports: tcp dport %d dnat to %s:%d", port, c.ip4, tcpPort)}
	}
	referenceNFTables(t, e, map[string][]string{
		live.id:     referenceRulesOf(&live),
		"ctr-gone":  rule(9191),
		"ctr-dead":  rule(9192),
		"ctr-reuse": rule(9193),
	})
	e.cached("net2", live.id, e.client.Path) // any namespace that exists
	e.cached("net2", "ctr-dead", filepath.Join(t.TempDir(), "netns-gone"))
	e.cached("net2", "ctr-reuse", c.ns.Path)

	var stderr strings.Builder
	conf := c.netconf(t, "net1", map[string]any{"backend": "nftables"}, []PortMapping{{HostPort: 9092, ContainerPort: tcpPort, Protocol: "tcp"}})
	args := skel.Args{Command: skel.CmdAdd, ContainerID: c.id, Netns: c.ns.Path, IfName: "eth0", Path: []string{"/nonexistent"},
		Env: []string{"CNI_CACHE_DIR=" + e.cacheDir}}
	require.NoError(t, e.host.Do(func() error {
		_, err := skel.Invoke(context.Background(), Plugin(), args, conf, &stderr)
		return err
	}))
	rules, log := e.ruleset(), stderr.String()
	assert.Contains(t, rules, live.id, "the live pod's mappings stay")
	assert.Contains(t, log, "kept the reference's cni_hostport rules of container ctr-live")
	assert.Contains(t, log, "net2-ctr-live-eth0, whose network namespace "+e.client.Path+" exists")
	for _, gone := range []string{"ctr-gone", "ctr-dead", "ctr-reuse"} {
		assert.NotContains(t, rules, gone)
		assert.Contains(t, log, "removed the reference's cni_hostport rules of container "+gone)
	}
	assert.Contains(t, log, "no entry of the result cache")
	assert.Contains(t, log, "netns-gone, which no longer exists")
	assert.Contains(t, log, "now the new pod's")
	got, err := dialUDP(e.client, "10.77.0.1:8081")
	require.NoError(t, err, "the live pod's host port still answers")
	assert.Equal(t, c.id, got, "(the test's two pods share one netns: the address answers)")

	require.NoError(t, os.RemoveAll(filepath.Join(e.cacheDir, "results")))
	require.NoError(t, e.invoke(skel.CmdAdd, c, conf))
	assert.Contains(t, e.ruleset(), live.id, "an unreadable cache proves nothing gone")
}
