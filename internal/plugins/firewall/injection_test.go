package firewall_test

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/nftables"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cnikit/cni/internal/core/cnierror"
	"github.com/cnikit/cni/internal/testbed/nfttest"
	pt "github.com/cnikit/cni/internal/testbed/plugintest"
	"github.com/cnikit/cni/internal/testbed/testns"
)

// TestExecHostInterfaceNameFromPrevResultIsValidated: the bridge name the ingress policy
// writes into iptables rules is another plugin's output. A name the kernel could never
// have given (a newline starting a new restore line, a blank, too long) is refused with
// code 7 naming the prevResult field, and the filter table stays as it was.
func TestExecHostInterfaceNameFromPrevResultIsValidated(t *testing.T) {
	e := newNFTEnv(t)
	cont := testns.New(t)
	plugin := filepath.Join(testns.LinkPluginDir(t, "firewall"), "firewall")
	nfttest.Apply(t, e.host, func(c *nftables.Conn) error {
		tbl := c.AddTable(&nftables.Table{Family: nftables.TableFamilyINet, Name: "operator"})
		c.AddChain(&nftables.Chain{Table: tbl, Name: "input", Type: nftables.ChainTypeFilter,
			Hooknum: nftables.ChainHookInput, Priority: nftables.ChainPriorityFilter})
		return nil
	})
	before := e.ruleset()
	for _, backend := range []string{"iptables", "nftables"} {
		for _, name := range []string{"br0\n-F", "br0\nCOMMIT\n*nat\n-F", "br 0", "br0123456789abcdef", "..", "br/0"} {
			t.Run(backend+"/"+name, func(t *testing.T) {
				conf, err := json.Marshal(map[string]any{
					"cniVersion": "1.1.0", "name": "inject", "type": "firewall", "backend": backend,
					"ingressPolicy": "same-bridge",
					"prevResult": map[string]any{
						"cniVersion": "1.1.0",
						"interfaces": []any{map[string]any{"name": name}, map[string]any{"name": "eth0", "sandbox": cont.Path}},
						"ips":        []any{map[string]any{"address": "10.88.0.2/24", "interface": 1}},
					},
				})
				require.NoError(t, err)
				var stdout, stderr bytes.Buffer
				err = e.host.Do(func() error {
					cmd := exec.Command(plugin)
					cmd.Env = []string{"CNI_COMMAND=ADD", "CNI_CONTAINERID=inject1", "CNI_NETNS=" + cont.Path,
						"CNI_IFNAME=eth0", "CNI_PATH=" + filepath.Dir(plugin), "PATH=" + os.Getenv("PATH")}
					cmd.Stdin, cmd.Stdout, cmd.Stderr = bytes.NewReader(conf), &stdout, &stderr
					return cmd.Run()
				})
				require.Error(t, err, "ADD must fail; stderr: %s", stderr.String())
				var ce cnierror.Error
				require.NoError(t, json.Unmarshal(stdout.Bytes(), &ce), "stdout: %s", stdout.String())
				assert.EqualValues(t, cnierror.CodeInvalidConfig, ce.Code)
				assert.Contains(t, ce.Msg, "prevResult.interfaces[0].name")
				assert.Equal(t, before, e.ruleset(), "the rules must be untouched")
			})
		}
	}
}

// TestExecDelWithAConfigThatNoLongerValidatesRemovesTheRules: DEL needs only the network
// and container to find the rules; a config that fails validation (an operator's typo in
// a later config version) must not make the attachment undeletable.
func TestExecDelWithAConfigThatNoLongerValidatesRemovesTheRules(t *testing.T) {
	pt.ForEachBackend(t, func(t *testing.T, backend string) {
		e := newNFTEnv(t)
		n := e.conflist(netOpts{name: "fwdel", bridge: "cni-fwdel", subnets: []string{"10.93.0.0/24"}, firewall: map[string]any{"backend": backend}})
		c := e.add(n, "ctr-fwdel")
		require.Contains(t, e.ruleset(), "ctr-fwdel")
		plugin := filepath.Join(testns.LinkPluginDir(t, "firewall"), "firewall")
		for _, bad := range []string{
			`{"cniVersion":"1.1.0","name":"fwdel","type":"firewall","ingressPolicy":"bogus"}`,
			`{"cniVersion":"1.1.0","name":"fwdel","type":"firewall","iptablesAdminChainName":"no spaces allowed"}`,
			`{"cniVersion":"1.1.0","name":"fwdel","type":"firewall","backend":42}`,
		} {
			var stdout, stderr bytes.Buffer
			err := e.host.Do(func() error {
				cmd := exec.Command(plugin)
				cmd.Env = []string{"CNI_COMMAND=DEL", "CNI_CONTAINERID=" + c.id, "CNI_NETNS=" + c.ns.Path,
					"CNI_IFNAME=eth0", "CNI_PATH=" + filepath.Dir(plugin), "PATH=" + os.Getenv("PATH")}
				cmd.Stdin, cmd.Stdout, cmd.Stderr = strings.NewReader(bad), &stdout, &stderr
				return cmd.Run()
			})
			require.NoError(t, err, "DEL must succeed with %s: %s %s", bad, stdout.String(), stderr.String())
		}
		assert.NotContains(t, e.ruleset(), "ctr-fwdel", "DEL removed the rules")
	})
}
