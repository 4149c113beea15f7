package firewall

import (
	"net/netip"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/cnikit/cni/internal/host/iptables"
)

// A CHECK's prefetch asks about every rule of every chain it is given.
func TestChainProbesAskEveryRuleOfEveryChain(t *testing.T) {
	probes := chainProbes(isolationRules(PolicyIsolated, "cni0"))
	assert.Len(t, probes, 6) // FORWARD's jump, stage 1's three, stage 2's two
	for _, p := range probes {
		assert.Contains(t, []string{forwardChain, stage1Chain, stage2Chain}, p.Chain)
	}
	assert.Empty(t, chainProbes(isolationRules(PolicyOpen, "cni0")))
}

// The lookups of an attachment's address rules are ours and the reference's, in
// CNI-FORWARD, for the addresses of the family asked only.
func TestAddressProbesAreOursAndTheReferencesOfOneFamily(t *testing.T) {
	att := attachment{network: "net", containerID: "ctr"}
	v4, v6 := netip.MustParseAddr("10.0.0.2"), netip.MustParseAddr("fd00::2")
	probes := addressProbes(att, iptables.IPv4, []netip.Addr{v4, v6})
	var rules []iptables.Rule
	for _, p := range probes {
		assert.Equal(t, privChain, p.Chain)
		rules = append(rules, p.Rule)
	}
	assert.Equal(t, append(ipRules(att, iptables.IPv4, []netip.Addr{v4}), referenceRules(v4)...), rules)
	assert.Len(t, addressProbes(att, iptables.IPv6, []netip.Addr{v4, v6}), 4)
	assert.Empty(t, addressProbes(att, iptables.IPv6, []netip.Addr{v4}))
}
