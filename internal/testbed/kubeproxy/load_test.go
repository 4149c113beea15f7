package kubeproxy_test

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cnikit/cni/internal/testbed/kubeproxy"
	"github.com/cnikit/cni/internal/testbed/testns"
)

// natRules counts the -A lines of an iptables nat table (a save, or restore input).
func natRules(text string) int {
	_, nat, _ := strings.Cut(text, "*nat\n")
	nat, _, _ = strings.Cut(nat, "COMMIT")
	return strings.Count(nat, "\n-A ")
}

// The rules load as kube-proxy's do: nft checks the text (nft -c), and
// testns.LoadKubeProxy writes it into a throwaway namespace whose tables then list what
// was generated.
func TestKubeProxyRulesLoadInAThrowawayNamespace(t *testing.T) {
	testns.RequireRoot(t)
	testns.RequireFirewallBinaries(t, "the rules are loaded with nft and iptables-restore")
	const services = 50
	t.Run("nftables", func(t *testing.T) {
		n := testns.New(t)
		var out []byte
		err := n.Do(func() error {
			cmd := exec.Command("nft", "-c", "-f", "-")
			cmd.Stdin = strings.NewReader(kubeproxy.NFT(services))
			var err error
			out, err = cmd.CombinedOutput()
			return err
		})
		require.NoError(t, err, "nft -c: %s", out)
		require.NoError(t, testns.LoadKubeProxy(n, kubeproxy.NFTablesMode, services))
		list, err := n.Exec(t, "nft", "list", "table", "ip", "kube-proxy")
		require.NoError(t, err, list)
		assert.Equal(t, strings.Count(kubeproxy.NFT(services), "add chain ip kube-proxy "), strings.Count(list, "\n\tchain "), list)
		list, err = n.Exec(t, "nft", "list", "map", "ip", "kube-proxy", "service-ips")
		require.NoError(t, err, list)
		assert.Equal(t, services, strings.Count(list, ": goto service-"), list)
		list, err = n.Exec(t, "iptables-save", "-t", "mangle")
		require.NoError(t, err, list)
		assert.Contains(t, list, ":KUBE-KUBELET-CANARY", "kubelet's chains")
	})
	t.Run("iptables", func(t *testing.T) {
		n := testns.New(t)
		require.NoError(t, testns.LoadKubeProxy(n, kubeproxy.IPTablesMode, services))
		for _, f := range []struct {
			save  string
			rules int
		}{{"iptables-save", natRules(kubeproxy.IPTables(services, false))}, {"ip6tables-save", natRules(kubeproxy.IPTables(0, true))}} {
			out, err := n.Exec(t, f.save, "-t", "nat")
			require.NoError(t, err, out)
			assert.Equal(t, f.rules, natRules(out), "%s:\n%s", f.save, out)
		}
	})
}
