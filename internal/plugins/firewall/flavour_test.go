package firewall_test

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	pt "github.com/cnikit/cni/internal/testbed/plugintest"
	"github.com/cnikit/cni/internal/testbed/testns"
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
				o := pt.Exec(t, e.host, pt.Call{Bin: plugin, Command: command, ContainerID: c.id, Netns: c.ns.Path,
					IfName: "eth0", Config: conf, Env: []string{"PATH=" + fl.PATH()}})
				if o.Err != nil {
					return fmt.Errorf("%s: %s", command, o)
				}
				return nil
			}
			save := func() string { return fl.Rules(t, e.host, "filter") }

			require.NoError(t, run("ADD"))
			require.NoError(t, run("CHECK"))
			before := save()
			require.Contains(t, before, "CNI-ISOLATION-STAGE-1")
			require.NoError(t, run("ADD"))
			assert.Equal(t, before, save(), "a repeated ADD changes nothing")

			comment := fmt.Sprintf(`name: "%s" id: "%s"`, name, c.id)
			n4 := fl.RulePosition(t, e.host, "iptables", "filter", "CNI-FORWARD", "--ctstate")
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
