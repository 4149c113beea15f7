package firewall_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cnikit/cni/internal/host/netfilter"
	"github.com/cnikit/cni/internal/spec/skel"
	pt "github.com/cnikit/cni/internal/testbed/plugintest"
	"github.com/cnikit/cni/internal/testbed/testns"
)

// TestCheckFindsTheNFTablesRulesOnceTheNodeTurnedToIPTables: with backend unset, on a
// node without rules of its own, the rule picks nftables and the attachment's addresses
// go into its sets. When the host later keeps rules of its own in iptables (Docker's
// DOCKER-USER, kube-proxy in iptables mode), the rule picks iptables for the CHECK of
// that same attachment, which must find its nftables state instead of failing on
// iptables chains it never had (it failed with code 999, "firewall check iptables:
// admin chain CNI-ADMIN missing", for every pod up before the change). Damage to that
// nftables state is still reported, and so is an attachment held by neither backend.
func TestCheckFindsTheNFTablesRulesOnceTheNodeTurnedToIPTables(t *testing.T) {
	testns.RequireFirewallBinaries(t, "the host's own rule is made with iptables")
	e := newNFTEnv(t)
	c := e.add(e.conflist(netOpts{name: "turned", bridge: "br-turned", subnets: []string{"10.19.0.0/24", "fd19::/64"}}), "c-turned")
	conf := fwConf(t, "turned", nil, c.res)
	noBus := "DBUS_SYSTEM_BUS_ADDRESS=unix:path=" + filepath.Join(t.TempDir(), "no-bus")
	e.requirePicks(netfilter.NFTables, "on a node without rules of its own")
	_, err := e.invoke(skel.CmdAdd, conf, c, noBus)
	require.NoError(t, err)
	t.Cleanup(func() { _, _ = e.invoke(skel.CmdDel, conf, c, noBus) })

	for _, args := range [][]string{{"-N", "DOCKER-USER"}, {"-A", "FORWARD", "-j", "DOCKER-USER"}} {
		out, err := e.host.Exec(t, "iptables", append([]string{"-w", "-t", "filter"}, args...)...)
		require.NoError(t, err, out)
	}
	e.requirePicks(netfilter.IPTables, "once the host has a FORWARD rule of its own")
	_, err = e.invoke(skel.CmdCheck, conf, c, noBus)
	require.NoError(t, err, "the attachment's nftables state passes")
	stdin, err := json.Marshal(conf)
	require.NoError(t, err)
	o := pt.Exec(t, e.host, pt.Call{Bin: filepath.Join(testns.LinkPluginDir(t, "firewall"), "firewall"),
		Command: skel.CmdCheck, ContainerID: c.id, Netns: c.ns.Path, IfName: "eth0", Config: stdin,
		Env: []string{"PATH=" + os.Getenv("PATH"), noBus}})
	require.Zero(t, o.Exit, "the exec'd CHECK too: %s", o)

	nftOut, err := e.host.Exec(t, "nft", "delete", "element", "inet", "cni_firewall", "ctr4", "{ "+c.ip4()+" }")
	require.NoError(t, err, nftOut)
	_, err = e.invoke(skel.CmdCheck, conf, c, noBus)
	assert.ErrorContains(t, err, c.ip4()+" not in set ctr4", "damage to the nftables state is reported")

	_, err = e.invoke(skel.CmdDel, conf, c, noBus)
	require.NoError(t, err)
	_, err = e.invoke(skel.CmdCheck, conf, c, noBus)
	require.ErrorContains(t, err, "admin chain CNI-ADMIN missing", "held by neither backend: the chosen backend's error")
	assert.NotContains(t, err.Error(), "nothing of the attachment", "the operator reads the check's words, no internal mark")
}

// TestCheckFailsOnceTheHostsForwardPolicyDropsTheNFTablesAttachment: with backend unset
// on a node without rules of its own, the attachment's accepts go into table inet
// cni_firewall. Once iptables' FORWARD policy turns to DROP (what installing Docker
// does), the pod's forwarded traffic is dropped there, whatever our table accepts: the
// pod cannot reach the outside, and CHECK must fail naming the chain (it passed). A
// repeated ADD keeps the attachment where its first ADD put it (it made iptables rules
// beside the nftables ones); DEL cleans it; with the policy back to ACCEPT, CHECK
// passes again.
func TestCheckFailsOnceTheHostsForwardPolicyDropsTheNFTablesAttachment(t *testing.T) {
	testns.RequireFirewallBinaries(t, "the host's FORWARD policy is set with iptables")
	e := newNFTEnv(t)
	c := e.add(e.conflist(netOpts{name: "dropped", bridge: "br-dropped", subnets: []string{"10.21.0.0/24", "fd21::/64"}}), "c-dropped")
	conf := fwConf(t, "dropped", nil, c.res)
	noBus := "DBUS_SYSTEM_BUS_ADDRESS=unix:path=" + filepath.Join(t.TempDir(), "no-bus")
	e.requirePicks(netfilter.NFTables, "on a node without rules of its own")
	_, err := e.invoke(skel.CmdAdd, conf, c, noBus)
	require.NoError(t, err)
	t.Cleanup(func() { _, _ = e.invoke(skel.CmdDel, conf, c, noBus) })
	require.NoError(t, firstErr(e.invoke(skel.CmdCheck, conf, c, noBus)))
	_, err = reach(c.ns, extAddr)
	require.NoError(t, err, "the pod forwards")

	policy := func(p string) {
		t.Helper()
		out, err := e.host.Exec(t, "iptables", "-w", "-P", "FORWARD", p)
		require.NoError(t, err, out)
	}
	policy("DROP")
	_, err = dial(c.ns, extAddr)
	require.Error(t, err, "the pod no longer forwards")
	err = firstErr(e.invoke(skel.CmdCheck, conf, c, noBus))
	require.Error(t, err, "a pod that cannot forward fails CHECK")
	assert.ErrorContains(t, err, "chain FORWARD of table ip filter (hook forward) drops by policy")
	assert.ErrorContains(t, err, "nftables rules accept")

	_, err = e.invoke(skel.CmdAdd, conf, c, noBus)
	require.NoError(t, err, "a repeated ADD")
	assert.NotContains(t, e.save("iptables"), "c-dropped", "stays in nftables, where its first ADD put it")
	assert.Contains(t, e.ruleset(), c.ip4())

	policy("ACCEPT")
	require.NoError(t, firstErr(e.invoke(skel.CmdCheck, conf, c, noBus)), "forwarding again: CHECK passes")
	policy("DROP")
	_, err = e.invoke(skel.CmdDel, conf, c, noBus)
	require.NoError(t, err)
	assert.NotContains(t, e.ruleset(), c.ip4(), "DEL cleans")
}

// firstErr drops invoke's result.
func firstErr(_ any, err error) error { return err }
