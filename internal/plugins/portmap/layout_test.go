package portmap

import (
	"github.com/cnikit/cni/internal/testbed/nfttest"
	"github.com/cnikit/cni/internal/testbed/testns"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cnikit/cni/internal/spec/skel"
)

// TestNFTablesLayoutReadsAsTheCodeSays: `nft list` shows each rule as the comment of the
// helper that builds it says, so the code and the ruleset read side by side.
func TestNFTablesLayoutReadsAsTheCodeSays(t *testing.T) {
	testns.RequireFirewallBinaries(t, "compares with nft's own listing")
	e := newEnv(t)
	c, all := e.container("ctr-a"), e.container("ctr-all")
	require.NoError(t, e.invoke(skel.CmdAdd, c, c.netconf(t, "net1", map[string]any{"backend": "nftables"}, []PortMapping{
		{HostPort: 8080, ContainerPort: tcpPort, Protocol: "tcp"},
		{HostPort: 8083, ContainerPort: tcpPort, Protocol: "tcp", HostIP: "10.77.0.1"},
	})))
	require.NoError(t, e.invoke(skel.CmdAdd, all, all.netconf(t, "net1", map[string]any{"backend": "nftables", "masqAll": true},
		[]PortMapping{{HostPort: 8090, ContainerPort: udpPort, Protocol: "udp"}})))
	hash, hashAll := attachment{net: "net1", cid: c.id}.hash(), attachment{net: "net1", cid: all.id}.hash()
	chains := map[string][]string{
		"prerouting":  {"fib daddr type local jump hostports"},
		"output":      {"fib daddr type local jump hostports"},
		"hostports":   {"meta l4proto . ip daddr . th dport vmap @hostip_ports", "meta l4proto . th dport vmap @ports"},
		"postrouting": {"ct status dnat ip daddr vmap @masq"},
		"dn-" + hash: {
			`tcp dport 8080 dnat to 10.1.1.2:8000 comment "dnat net=net1 id=ctr-a"`,
			`tcp dport 8083 ip daddr 10.77.0.1 dnat to 10.1.1.2:8000 comment "dnat net=net1 id=ctr-a"`,
		},
		"mq-" + hash: {
			`ip saddr 10.1.1.0/24 masquerade comment "dnat net=net1 id=ctr-a"`,
			`ip saddr 127.0.0.0/8 masquerade comment "dnat net=net1 id=ctr-a"`,
		},
		"mq-" + hashAll: {
			`meta l4proto udp ct original proto-dst 8090 masquerade comment "dnat net=net1 id=ctr-all"`,
			`ip saddr 127.0.0.0/8 masquerade comment "dnat net=net1 id=ctr-all"`,
		},
	}
	for chain, want := range chains {
		out, err := e.host.Exec(t, "nft", "list", "chain", "ip", nftTableName, chain)
		require.NoError(t, err, out)
		got := nfttest.ListedRules(out)
		if len(got) > 0 && (chain == "prerouting" || chain == "output" || chain == "postrouting") {
			got = got[1:] // the `type nat hook ...` line
		}
		assert.Equal(t, want, got, chain)
	}
}

// TestNFTablesListingReadsBack: `nft list ruleset` of the mappings can be fed back to
// `nft -f` (an operator's save and restore of the ruleset). Comments in the reference's
// quoted form could not: nft prints them inside quotes without escaping theirs.
func TestNFTablesListingReadsBack(t *testing.T) {
	testns.RequireFirewallBinaries(t, "compares with nft's own listing")
	e := newEnv(t)
	c := e.container("ctr-a")
	require.NoError(t, e.invoke(skel.CmdAdd, c, c.netconf(t, "net1", map[string]any{"backend": "nftables"}, standardMappings())))
	listing, err := e.host.Exec(t, "nft", "list", "table", "ip", nftTableName)
	require.NoError(t, err, listing)
	out, err := e.host.Exec(t, "nft", "delete", "table", "ip", nftTableName)
	require.NoError(t, err, out)
	file := filepath.Join(t.TempDir(), "ruleset.nft")
	require.NoError(t, os.WriteFile(file, []byte(listing), 0o600))
	out, err = e.host.Exec(t, "nft", "-f", file)
	require.NoError(t, err, out)
	again, err := e.host.Exec(t, "nft", "list", "table", "ip", nftTableName)
	require.NoError(t, err, again)
	assert.Equal(t, listing, again)
	// nft drops the userdata it does not know (the rules' mapping records), so what it
	// restored is removed the slow way, by the chains the elements jump to.
	require.NoError(t, e.invoke(skel.CmdDel, c, c.netconf(t, "net1", map[string]any{"backend": "nftables"}, nil)))
	assert.NotContains(t, e.ruleset(), c.ip4)
}
