package portmap

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/nftables"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cnikit/cni/internal/core/cnierror"
	"github.com/cnikit/cni/internal/testbed/nfttest"
	"github.com/cnikit/cni/internal/testbed/testns"
)

// TestExecNFTConditionsOutsideTheNetlinkSubsetWork: conditions parseConditions does not
// compile (a TCP flags test, anonymous sets) are handed to nft, as the reference does:
// the v4 client they admit reaches the mapped port, the v6 one they do not admit is not
// forwarded, CHECK passes, a repeated ADD keeps one gate, and DEL removes everything.
func TestExecNFTConditionsOutsideTheNetlinkSubsetWork(t *testing.T) {
	testns.RequireFirewallBinaries(t, "conditions beyond the netlink subset are compiled by nft")
	e := newEnv(t)
	c := e.container("ctr-cond")
	plugin := filepath.Join(testns.LinkPluginDir(t, "portmap"), "portmap")
	conf := c.netconf(t, "cond", map[string]any{
		"backend":      "nftables",
		"conditionsV4": []string{"tcp flags syn / syn,ack", "ip saddr { 10.77.0.0/24, 192.168.0.0/16 }", `iifname != "x;y#z"`},
		"conditionsV6": []string{"ip6 saddr", "{ fd99::/64, fd98::/64 }"},
	}, []PortMapping{{HostPort: 8080, ContainerPort: tcpPort, Protocol: "tcp"}})
	_, err := execPlugin(t, e.host, plugin, "ADD", c.id, c.ns.Path, conf)
	require.NoError(t, err)
	got, err := dialTCP(e.client, "10.77.0.1:8080")
	require.NoError(t, err, "the v4 conditions admit the client")
	assert.Equal(t, "ctr-cond", got)
	_, err = dialTCP(e.client, "[fd77::1]:8080")
	assert.Error(t, err, "the v6 conditions do not admit fd77::2")
	_, err = execPlugin(t, e.host, plugin, "CHECK", c.id, c.ns.Path, conf)
	require.NoError(t, err)

	_, err = execPlugin(t, e.host, plugin, "ADD", c.id, c.ns.Path, conf)
	require.NoError(t, err)
	hash := attachment{net: "cond", cid: c.id}.hash()
	out, err := e.host.Exec(t, "nft", "list", "chain", "ip", nftTableName, nftDNPrefix+hash)
	require.NoError(t, err, out)
	gate := nfttest.ListedRules(out)
	require.Len(t, gate, 1, "one gate: %s", out)
	// nft versions print the flags test differently; the rest reads as written.
	assert.Regexp(t, `^tcp flags .*syn.* ip saddr \{ 10.77.0.0/24, 192.168.0.0/16 \} iifname != "x;y#z" goto dm-`+hash+`$`, gate[0])

	_, err = execPlugin(t, e.host, plugin, "DEL", c.id, c.ns.Path, conf)
	require.NoError(t, err)
	rules := e.ruleset()
	assert.NotContains(t, rules, hash)
	assert.NotContains(t, rules, c.ip4)
	_, err = dialTCP(e.client, "10.77.0.1:8080")
	assert.Error(t, err, "the host port is closed after DEL")
}

// TestExecNFTConditionsThatCouldLeaveTheirRuleAreRefused: a condition that could end the
// `add rule` command nft reads, or start another (flush the ruleset, delete an
// operator's table), is refused with code 7 naming the element; nothing is installed
// and the operator's table is untouched. One that nft itself refuses is code 7 as well,
// and the ADD leaves nothing behind.
func TestExecNFTConditionsThatCouldLeaveTheirRuleAreRefused(t *testing.T) {
	e := newEnv(t)
	c := e.container("ctr-inject")
	nfttest.Apply(e.t, e.host, func(conn *nftables.Conn) error { // nft add table inet operator; add chain ... input
		tbl := conn.AddTable(&nftables.Table{Family: nftables.TableFamilyINet, Name: "operator"})
		conn.AddChain(&nftables.Chain{Table: tbl, Name: "input", Type: nftables.ChainTypeFilter,
			Hooknum: nftables.ChainHookInput, Priority: nftables.ChainPriorityFilter})
		return nil
	})
	before := tableText(nfttest.Ruleset(t, e.host), "table inet operator")
	plugin := filepath.Join(testns.LinkPluginDir(t, "portmap"), "portmap")
	for _, tc := range []struct {
		name  string
		conds []string
		field string
	}{
		{"semicolon", []string{"ip saddr 10.0.0.0/8; flush ruleset"}, "conditionsV4[0]"},
		{"semicolon in a later element", []string{"ip saddr 10.0.0.0/8", ";", "delete table inet operator"}, "conditionsV4[1]"},
		{"comment", []string{"ip saddr 10.0.0.0/8 # drop the goto"}, "conditionsV4[0]"},
		{"closing brace", []string{"ip saddr { 10.0.0.0/8 } }", "add table ip evil"}, "conditionsV4[0]"},
		{"unclosed brace", []string{"ip saddr {", "10.0.0.0/8"}, "conditionsV4"},
		{"unclosed quote", []string{`iifname "eth0`, `; flush ruleset "`}, "conditionsV4[0]"},
		{"single quotes", []string{`iifname '";flush ruleset;"'`}, "conditionsV4[0]"},
		{"backslash", []string{`iifname "eth0\"; flush ruleset; \""`}, "conditionsV4[0]"},
		{"nft refuses it", []string{"ip saddr 10.0.0.0/33"}, "conditionsV4"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			conf := c.netconf(t, "inject", map[string]any{"backend": "nftables", "conditionsV4": tc.conds}, standardMappings())
			stdout, err := execPlugin(t, e.host, plugin, "ADD", c.id, c.ns.Path, conf)
			require.Error(t, err, "ADD must fail")
			var ce cnierror.Error
			require.NoError(t, json.Unmarshal(stdout, &ce), "stdout: %s", stdout)
			assert.EqualValues(t, cnierror.CodeInvalidConfig, ce.Code, ce.Msg)
			assert.Contains(t, ce.Msg, tc.field)
			assert.Equal(t, before, tableText(nfttest.Ruleset(t, e.host), "table inet operator"), "the operator's table must be untouched")
			assert.NotContains(t, e.ruleset(), c.ip4, "a refused ADD leaves nothing")
		})
	}
}

// tableText is the part of an nfttest ruleset text that lists one table.
func tableText(rs, header string) string {
	_, rest, ok := strings.Cut(rs, header+"\n")
	if !ok {
		return ""
	}
	if i := strings.Index(rest, "\ntable "); i >= 0 {
		rest = rest[:i+1]
	}
	return header + "\n" + rest
}

// TestExecNFTConditionsWithoutTheNFTCommand: on a node without nft, conditions that go
// over netlink work as anywhere (nothing is exec'd), and conditions only nft compiles
// are refused at ADD with code 7 naming the element their clause starts in, before
// anything is installed: never a half-made mapping.
func TestExecNFTConditionsWithoutTheNFTCommand(t *testing.T) {
	e := newEnv(t)
	c := e.container("ctr-nonft")
	plugin := filepath.Join(testns.LinkPluginDir(t, "portmap"), "portmap")
	noNFT := t.TempDir()
	for _, tc := range []struct {
		name, field string
		conds       []string
	}{
		{"tcp flags", "conditionsV4[0]", []string{"tcp flags syn / syn,ack"}},
		{"anonymous set after a compiled clause", "conditionsV4[1]", []string{"ip saddr 10.77.0.0/24", "ip daddr { 10.0.0.1, 10.0.0.2 }"}},
		{"a clause over two elements", "conditionsV4[1]", []string{"iifname vx", "ip saddr", "{ 10.77.0.0/24 }"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			conf := c.netconf(t, "nonft", map[string]any{"backend": "nftables", "conditionsV4": tc.conds}, standardMappings())
			stdout, err := execPluginWithPath(t, e.host, noNFT, plugin, "ADD", c.id, c.ns.Path, conf)
			require.Error(t, err)
			var ce cnierror.Error
			require.NoError(t, json.Unmarshal(stdout, &ce), "stdout: %s", stdout)
			assert.EqualValues(t, cnierror.CodeInvalidConfig, ce.Code, ce.Msg)
			assert.Contains(t, ce.Msg, tc.field+": ")
			assert.Contains(t, ce.Msg, "nft command")
			assert.NotContains(t, e.ruleset(), c.ip4, "a refused ADD leaves nothing")
		})
	}
	conf := c.netconf(t, "nonft", map[string]any{"backend": "nftables",
		"conditionsV4": []string{"ip saddr 10.77.0.0/24", `iifname "vx"`}}, []PortMapping{{HostPort: 8080, ContainerPort: tcpPort, Protocol: "tcp"}})
	for _, command := range []string{"ADD", "CHECK"} {
		_, err := execPluginWithPath(t, e.host, noNFT, plugin, command, c.id, c.ns.Path, conf)
		require.NoError(t, err, command)
	}
	got, err := dialTCP(e.client, "10.77.0.1:8080")
	require.NoError(t, err, "conditions over netlink need no nft")
	assert.Equal(t, "ctr-nonft", got)
	_, err = execPluginWithPath(t, e.host, noNFT, plugin, "DEL", c.id, c.ns.Path, conf)
	require.NoError(t, err)
	assert.NotContains(t, e.ruleset(), c.ip4)
}

// TestExecIPTablesBackendWithoutTheTools: where the iptables tools are missing, backend
// iptables means nftables (the mapping works, nothing is exec'd), and the options only
// iptables has are refused with code 7 saying why, before anything is installed.
func TestExecIPTablesBackendWithoutTheTools(t *testing.T) {
	e := newEnv(t)
	c := e.container("ctr-noipt")
	plugin := filepath.Join(testns.LinkPluginDir(t, "portmap"), "portmap")
	noTools := t.TempDir()
	for _, tc := range []struct {
		name  string
		keys  map[string]any
		field string
	}{
		{"mark bit", map[string]any{"backend": "iptables", "markMasqBit": 5}, "markMasqBit"},
		{"mark bit, backend unset", map[string]any{"markMasqBit": 5}, "markMasqBit"},
		{"external mark chain", map[string]any{"externalSetMarkChain": "KUBE-MARK-MASQ"}, "externalSetMarkChain"},
		{"iptables conditions", map[string]any{"conditionsV4": []string{"!", "-s", "10.0.0.0/8"}}, "conditionsV4"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			stdout, err := execPluginWithPath(t, e.host, noTools, plugin, "ADD", c.id, c.ns.Path, c.netconf(t, "noipt", tc.keys, standardMappings()))
			require.Error(t, err)
			var ce cnierror.Error
			require.NoError(t, json.Unmarshal(stdout, &ce), "stdout: %s", stdout)
			assert.EqualValues(t, cnierror.CodeInvalidConfig, ce.Code, ce.Msg)
			assert.Contains(t, ce.Msg, tc.field)
			assert.Contains(t, ce.Msg, "iptables tools are not installed")
			assert.NotContains(t, e.ruleset(), c.ip4)
		})
	}
	conf := c.netconf(t, "noipt", map[string]any{"backend": "iptables"}, []PortMapping{{HostPort: 8080, ContainerPort: tcpPort, Protocol: "tcp"}})
	for _, command := range []string{"ADD", "CHECK"} {
		_, err := execPluginWithPath(t, e.host, noTools, plugin, command, c.id, c.ns.Path, conf)
		require.NoError(t, err, command)
	}
	got, err := dialTCP(e.client, "10.77.0.1:8080")
	require.NoError(t, err)
	assert.Equal(t, "ctr-noipt", got)
	_, err = execPluginWithPath(t, e.host, noTools, plugin, "DEL", c.id, c.ns.Path, conf)
	require.NoError(t, err)
	assert.NotContains(t, e.ruleset(), c.ip4)
}

func TestCheckNFTConditionsRule(t *testing.T) {
	for _, ok := range [][]string{
		nil,
		{"tcp flags syn / syn,ack"},
		{"ip saddr { 10.0.0.0/8, 192.168.0.0/16 }"},
		{"ip saddr", "{", "10.0.0.0/8", "}"},
		{`iifname "a;b#c{"`},
		{`meta l4proto { tcp, udp } th dport != { 22, 53 }`},
		{"ip daddr . tcp dport { 10.0.0.1 . 80, 10.0.0.2 . 443 }"},
	} {
		assert.NoError(t, checkNFTConditions("conditionsV4", ok), "%q", ok)
	}
	for _, bad := range [][]string{
		{"ip saddr 10.0.0.0/8;"},
		{"ip saddr 10.0.0.0/8 #"},
		{"}", "{"},
		{"{"},
		{`iifname "eth0`},
		{`iifname "eth0" "`},
		{`iifname 'eth0'`},
		{`iifname eth\0`},
	} {
		err := checkNFTConditions("conditionsV4", bad)
		if assert.Error(t, err, "%q", bad) {
			assert.Equal(t, cnierror.CodeInvalidConfig, cnierror.Code(err))
			assert.Contains(t, err.Error(), "conditionsV4")
		}
	}
}
