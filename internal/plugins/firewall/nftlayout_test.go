package firewall

import (
	"net/netip"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cnikit/cni/internal/testbed/nfttest"
	"github.com/cnikit/cni/internal/testbed/testns"
)

// TestNFTablesLayoutReadsAsTheCodeSays: `nft list` shows the table as the layout comment
// of nftables.go and each rule as the comment of the helper that builds it say, so the
// code and the ruleset read side by side.
func TestNFTablesLayoutReadsAsTheCodeSays(t *testing.T) {
	testns.RequireFirewallBinaries(t, "compares with nft's own listing")
	testns.RequireRoot(t)
	host := testns.New(t)
	att := attachment{network: "net1", containerID: "c1"}
	conf := &Config{AdminChain: DefaultAdminChain, IngressPolicy: PolicyIsolated}
	ips := []netip.Addr{netip.MustParseAddr("10.1.0.5"), netip.MustParseAddr("fd01::5")}
	host.Run(t, func() error { return nftAdd(conf, att, ips, "cni0") })
	for chain, want := range map[string][]string{
		nftForwardChain: {
			"type filter hook forward priority filter; policy accept;",
			`jump isolation comment "CNI firewall plugin rules (ingressPolicy)"`,
			`jump CNI-ADMIN comment "CNI firewall plugin admin overrides"`,
			`ip daddr @ctr4 ct state established,related accept comment "CNI firewall plugin rules"`,
			`ip saddr @ctr4 accept comment "CNI firewall plugin rules"`,
			`ip6 daddr @ctr6 ct state established,related accept comment "CNI firewall plugin rules"`,
			`ip6 saddr @ctr6 accept comment "CNI firewall plugin rules"`,
		},
		nftIsolationChain: {
			"iifname . oifname @isolated drop",
			"iifname . oifname @same_bridge return",
			"iifname @policed oifname @policed drop",
		},
		DefaultAdminChain: nil,
	} {
		out, err := host.Exec(t, "nft", "list", "chain", "inet", nftTableName, chain)
		require.NoError(t, err, out)
		assert.Equal(t, want, nfttest.ListedRules(out), chain)
	}
	for set, want := range map[string]string{
		"ctr4":        `elements = { 10.1.0.5 comment "net=net1 id=c1" }`,
		"ctr6":        `elements = { fd01::5 comment "net=net1 id=c1" }`,
		"policed":     `elements = { "cni0" }`,
		"same_bridge": `elements = { "cni0" . "cni0" }`,
		"isolated":    `elements = { "cni0" . "cni0" }`,
	} {
		out, err := host.Exec(t, "nft", "list", "set", "inet", nftTableName, set)
		require.NoError(t, err, out)
		assert.Contains(t, out, want, set)
	}
	// The listing reads back: `nft -f` of it makes the same table (an operator's backup
	// and restore keeps the attachments).
	listing, err := host.Exec(t, "nft", "list", "table", "inet", nftTableName)
	require.NoError(t, err, listing)
	out, err := host.Exec(t, "sh", "-c", "nft delete table inet "+nftTableName+" && printf '%s' \"$0\" | nft -f -", listing)
	require.NoError(t, err, out)
	again, err := host.Exec(t, "nft", "list", "table", "inet", nftTableName)
	require.NoError(t, err, again)
	assert.Equal(t, listing, again)
}
