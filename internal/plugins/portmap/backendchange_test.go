package portmap

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cnikit/cni/internal/host/netfilter"
	"github.com/cnikit/cni/internal/spec/skel"
	"github.com/cnikit/cni/internal/testbed/testns"
)

// TestCheckFindsTheNFTablesMappingsOnceTheNodeTurnedToIPTables: with backend unset on a
// node without rules of its own, the rule picks nftables and the mappings go there. When
// iptables' FORWARD policy then turns to DROP (installing Docker), the rule picks
// iptables, and CHECK of that same attachment failed ("shared port-forwarding chains or
// jumps are missing") where its mappings were intact. It checks them where its ADD put
// them; damage there is still reported; a repeated ADD keeps them there (it made a
// second set in iptables); DEL cleans.
func TestCheckFindsTheNFTablesMappingsOnceTheNodeTurnedToIPTables(t *testing.T) {
	testns.RequireFirewallBinaries(t, "the host's FORWARD policy is set with iptables")
	e := newEnv(t)
	c := e.container("ctr-turned")
	conf := c.netconf(t, "net1", nil, standardMappings())
	picks := func() (b netfilter.Backend) {
		e.host.Run(t, func() error { b = netfilter.Detect(); return nil })
		return b
	}
	require.Equal(t, netfilter.NFTables, picks(), "a node without rules of its own")
	require.NoError(t, e.invoke(skel.CmdAdd, c, conf))
	t.Cleanup(func() { _ = e.invoke(skel.CmdDel, c, conf) })
	hash := attachment{net: "net1", cid: c.id}.hash()

	out, err := e.host.Exec(t, "iptables", "-w", "-P", "FORWARD", "DROP")
	require.NoError(t, err, out)
	require.Equal(t, netfilter.IPTables, picks(), "once FORWARD drops by policy")
	require.NoError(t, e.invoke(skel.CmdCheck, c, conf), "the attachment's nftables mappings pass")

	require.NoError(t, e.invoke(skel.CmdAdd, c, conf), "a repeated ADD")
	assert.NotContains(t, e.ruleset(), iptDNPrefix+hash, "stays in nftables, where its first ADD put it")
	require.NoError(t, e.invoke(skel.CmdCheck, c, conf))

	e.deletePortsElement(8080)
	assert.Error(t, e.invoke(skel.CmdCheck, c, conf), "damage to the nftables mappings is reported")

	require.NoError(t, e.invoke(skel.CmdDel, c, conf))
	assert.NotContains(t, e.ruleset(), hash, "DEL cleans")
}
