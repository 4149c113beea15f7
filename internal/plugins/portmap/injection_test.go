package portmap

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cnikit/cni/internal/core/cnierror"
	"github.com/cnikit/cni/internal/testbed/testns"
)

// operatorRules puts rules of the node's operator into the host's nat and filter tables
// and returns a function that lists both tables as iptables-save prints them.
func operatorRules(t *testing.T, host *testns.NS) func() string {
	t.Helper()
	for _, args := range [][]string{
		{"-t", "nat", "-N", "OPERATOR-NAT"},
		{"-t", "nat", "-A", "OPERATOR-NAT", "-s", "192.0.2.0/24", "-j", "MASQUERADE"},
		{"-t", "nat", "-A", "POSTROUTING", "-j", "OPERATOR-NAT"},
		{"-t", "filter", "-A", "INPUT", "-p", "tcp", "--dport", "22", "-j", "ACCEPT"},
		{"-t", "filter", "-A", "FORWARD", "-s", "198.51.100.0/24", "-j", "DROP"},
	} {
		out, err := host.Exec(t, "iptables", args...)
		require.NoError(t, err, out)
	}
	return func() string {
		var b strings.Builder
		for _, table := range []string{"nat", "filter"} {
			out, err := host.Exec(t, "iptables-save", "-t", table)
			require.NoError(t, err, out)
			for _, line := range strings.SplitAfter(out, "\n") {
				// Comment lines carry the time; counters are not saved without -c.
				if !strings.HasPrefix(line, "#") {
					b.WriteString(line)
				}
			}
		}
		return b.String()
	}
}

// TestExecTextThatWouldStartANewRestoreLineIsRefused feeds the exec'd plugin values that,
// written unescaped into an iptables-restore script, flush the operator's nat or filter
// table ("RELX\n-F" did, and ADD exited 0). Each is refused with code 7 naming the
// field, and the operator's rules are exactly as before.
func TestExecTextThatWouldStartANewRestoreLineIsRefused(t *testing.T) {
	testns.RequireFirewallBinaries(t, "the operator's rules it must leave alone are iptables rules")
	e := newEnv(t)
	c := e.container("ctr-inject")
	save := operatorRules(t, e.host)
	before := save()
	plugin := filepath.Join(testns.LinkPluginDir(t, "portmap"), "portmap")
	for _, tc := range []struct {
		name  string
		extra map[string]any
		field string
	}{
		{"external mark chain", map[string]any{"externalSetMarkChain": "RELX\n-F"}, "externalSetMarkChain"},
		{"mark chain with a blank", map[string]any{"externalSetMarkChain": "RELX -F"}, "externalSetMarkChain"},
		{"iptables condition", map[string]any{"backend": "iptables",
			"conditionsV4": []string{"-s", "10.0.0.0/8\nCOMMIT\n*filter\n-F\n-A INPUT -s 10.0.0.0/8"}}, "conditionsV4[1]"},
		{"iptables condition with CR", map[string]any{"backend": "iptables",
			"conditionsV6": []string{"!", "-s\r", "fd00::/8"}}, "conditionsV6[1]"},
		{"nft condition", map[string]any{"backend": "nftables",
			"conditionsV4": []string{"ip saddr 10.0.0.0/8\nflush ruleset"}}, "conditionsV4[0]"},
		{"NUL", map[string]any{"backend": "iptables", "conditionsV4": []string{"-s", "10.0.0.0/8\x00"}}, "conditionsV4[1]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			conf := c.netconf(t, "inject", tc.extra, standardMappings())
			out, err := execPlugin(t, e.host, plugin, "ADD", c.id, c.ns.Path, conf)
			require.Error(t, err, "ADD must fail")
			var ce cnierror.Error
			require.NoError(t, json.Unmarshal(out, &ce), "stdout: %s", out)
			assert.EqualValues(t, cnierror.CodeInvalidConfig, ce.Code)
			assert.Contains(t, ce.Msg, tc.field)
			assert.Equal(t, before, save(), "the operator's nat and filter rules must be untouched")
			assert.NotContains(t, e.ruleset(), c.ip4, "a refused ADD installs nothing")
		})
	}
}
