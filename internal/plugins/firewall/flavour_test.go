package firewall_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cnikit/cni/internal/testns"
)

// TestExecIPTablesRulesWithEitherFlavour runs the exec'd plugin with the tools of
// iptables-nft and of iptables-legacy first in its PATH: CHECK passes, a repeated ADD
// changes nothing, an attachment rule respelled by hand (its matches in another order,
// which both flavours print as written) still counts for CHECK and ADD, and DEL leaves
// nothing of the attachment while the shared chains and isolation rules stay.
func TestExecIPTablesRulesWithEitherFlavour(t *testing.T) {
	testns.RequireRoot(t)
	for i, fl := range testns.IPTablesFlavours(t) {
		t.Run(fl.Name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			name := "flavour-" + fl.Name
			n := e.conflist(netOpts{name: name, bridge: "br-" + fl.Name,
				subnets: []string{fmt.Sprintf("10.%d.0.0/24", 30+i), fmt.Sprintf("fd%d::/64", 30+i)}})
			c := e.add(n, "c-flavour")
			plugin := filepath.Join(testns.LinkPluginDir(t, "firewall"), "firewall")
			conf, err := json.Marshal(fwConf(t, name, map[string]any{"backend": "iptables", "ingressPolicy": "same-bridge"}, c.res))
			require.NoError(t, err)
			run := func(command string) error {
				var stdout, stderr bytes.Buffer
				return e.host.Do(func() error {
					cmd := exec.Command(plugin)
					cmd.Env = []string{"CNI_COMMAND=" + command, "CNI_CONTAINERID=" + c.id, "CNI_NETNS=" + c.ns.Path,
						"CNI_IFNAME=eth0", "CNI_PATH=" + filepath.Dir(plugin), "PATH=" + fl.PATH()}
					cmd.Stdin, cmd.Stdout, cmd.Stderr = bytes.NewReader(conf), &stdout, &stderr
					if err := cmd.Run(); err != nil {
						return fmt.Errorf("%s: %w: %s %s", command, err, stdout.String(), stderr.String())
					}
					return nil
				})
			}
			save := func() string {
				var b strings.Builder
				for _, tool := range []string{"iptables-save", "ip6tables-save"} {
					out, err := e.host.Exec(t, fl.Tool(tool), "-t", "filter")
					require.NoError(t, err, out)
					b.WriteString(savedRules(out))
				}
				return b.String()
			}

			require.NoError(t, run("ADD"))
			require.NoError(t, run("CHECK"))
			before := save()
			require.Contains(t, before, "CNI-ISOLATION-STAGE-1")
			require.NoError(t, run("ADD"))
			assert.Equal(t, before, save(), "a repeated ADD changes nothing")

			comment := fmt.Sprintf(`name: "%s" id: "%s"`, name, c.id)
			n4 := rulePosition(t, e.host, fl.Tool("iptables"), "CNI-FORWARD", "--ctstate")
			out, err := e.host.Exec(t, fl.Tool("iptables"), "-R", "CNI-FORWARD", strconv.Itoa(n4),
				"-m", "comment", "--comment", comment, "-m", "conntrack", "--ctstate", "ESTABLISHED,RELATED",
				"-d", c.ip4(), "-j", "ACCEPT")
			require.NoError(t, err, out)
			respelled := save()
			require.NotEqual(t, before, respelled)
			require.NoError(t, run("CHECK"))
			require.NoError(t, run("ADD"))
			assert.Equal(t, respelled, save(), "ADD finds the respelled rule and adds nothing")

			require.NoError(t, run("DEL"))
			after := save()
			assert.NotContains(t, after, c.id)
			assert.NotContains(t, after, c.ip4()+"/32")
			assert.Contains(t, after, "-A FORWARD -m comment --comment \"CNI firewall plugin rules\" -j CNI-FORWARD")
			assert.Contains(t, after, "-A CNI-ISOLATION-STAGE-1 -i br-"+fl.Name)
		})
	}
}

// rulePosition is the 1-based position in chain of the first rule containing text, as
// `iptables -S` lists the chain.
func rulePosition(t *testing.T, host *testns.NS, iptables, chain, text string) int {
	out, err := host.Exec(t, iptables, "-S", chain)
	require.NoError(t, err, out)
	n := 0
	for _, line := range strings.Split(out, "\n") {
		if !strings.HasPrefix(line, "-A ") {
			continue
		}
		n++
		if strings.Contains(line, text) {
			return n
		}
	}
	t.Fatalf("no rule with %q in:\n%s", text, out)
	return 0
}

// savedRules is iptables-save output without what changes by itself: the "# Generated
// on <time>" lines and the packet counters of the chain lines.
func savedRules(save string) string {
	var b strings.Builder
	for _, line := range strings.SplitAfter(save, "\n") {
		switch {
		case strings.HasPrefix(line, "#"):
		case strings.HasPrefix(line, ":"):
			chain, _, _ := strings.Cut(line, " [")
			b.WriteString(chain + "\n")
		default:
			b.WriteString(line)
		}
	}
	return b.String()
}
