package testns

import (
	"bytes"
	"fmt"
	"os/exec"
	"strings"
	"testing"

	"github.com/cnikit/cni/internal/testbed/kubeproxy"
)

// LoadKubeProxy writes kube-proxy's rules for services Services in mode, and kubelet's
// chains, into host: one iptables-restore per family in iptables mode; one `nft -f -`
// and one iptables-restore per family (kubelet's chains) in nftables mode.
func LoadKubeProxy(host *NS, mode string, services int) error {
	type load struct {
		tool  string
		args  []string
		input string
	}
	var loads []load
	switch mode {
	case kubeproxy.IPTablesMode:
		loads = []load{
			{"iptables-restore", []string{"-w"}, kubeproxy.IPTables(services, false)},
			{"ip6tables-restore", []string{"-w"}, kubeproxy.IPTables(0, true)},
		}
	case kubeproxy.NFTablesMode:
		loads = []load{
			{"nft", []string{"-f", "-"}, kubeproxy.NFT(services)},
			{"iptables-restore", []string{"-w"}, kubeproxy.KubeletIPTablesChains},
			{"ip6tables-restore", []string{"-w"}, kubeproxy.KubeletIPTablesChains},
		}
	default:
		return fmt.Errorf("kube-proxy mode %q", mode)
	}
	return host.Do(func() error {
		for _, l := range loads {
			cmd := exec.Command(l.tool, l.args...)
			cmd.Stdin = strings.NewReader(l.input)
			var out bytes.Buffer
			cmd.Stdout, cmd.Stderr = &out, &out
			if err := cmd.Run(); err != nil {
				return fmt.Errorf("kube-proxy %s mode, %d Services: %s: %v: %s", mode, services, l.tool, err, out.String())
			}
		}
		return nil
	})
}

// LoadKubeProxyRules loads the rules of kube-proxy in iptables mode for services
// Services (package kubeproxy) into n with the iptables-restore of PATH, or of a
// flavour (restore naming its tool), in one exec.
func LoadKubeProxyRules(t testing.TB, n *NS, restore string, services int) {
	t.Helper()
	RequireFirewallBinaries(t, "kube-proxy's rules are loaded with iptables-restore")
	if out, err := n.ExecInput(t, kubeproxy.IPTables(services, false), restore, "-w"); err != nil {
		t.Fatalf("load kube-proxy's rules: %v: %s", err, out)
	}
}
