package testns

import (
	"crypto/sha256"
	"encoding/base32"
	"fmt"
	"strings"
	"testing"
)

// KubeProxyRules are iptables-restore scripts (nat, then filter) of the rules kube-proxy
// in iptables mode keeps for services Services of one endpoint each: per Service a
// KUBE-SERVICES rule, a KUBE-SVC-* chain of two rules and a KUBE-SEP-* chain of two,
// behind jumps from PREROUTING, OUTPUT and POSTROUTING (nat) and INPUT, FORWARD and
// OUTPUT (filter): the foreign rules of a Kubernetes node, on which the plugins must
// read only their own.
func KubeProxyRules(services int) (nat, filter string) {
	var b, rules strings.Builder
	b.WriteString("*nat\n-N KUBE-SERVICES\n-N KUBE-POSTROUTING\n-N KUBE-MARK-MASQ\n-N KUBE-NODEPORTS\n")
	rules.WriteString(`-A PREROUTING -m comment --comment "kubernetes service portals" -j KUBE-SERVICES
-A OUTPUT -m comment --comment "kubernetes service portals" -j KUBE-SERVICES
-A POSTROUTING -m comment --comment "kubernetes postrouting rules" -j KUBE-POSTROUTING
-A KUBE-MARK-MASQ -j MARK --set-xmark 0x4000/0x4000
-A KUBE-POSTROUTING -m mark ! --mark 0x4000/0x4000 -j RETURN
-A KUBE-POSTROUTING -j MARK --set-xmark 0x4000/0x0
-A KUBE-POSTROUTING -m comment --comment "kubernetes service traffic requiring SNAT" -j MASQUERADE --random-fully
`)
	for i := range services {
		name := fmt.Sprintf("ns/svc-%d:http", i)
		ip := fmt.Sprintf("10.96.%d.%d", i/250, i%250+1)
		ep := fmt.Sprintf("10.244.%d.%d", i/250, i%250+2)
		svc, sep := "KUBE-SVC-"+kubeHash(name+"tcp"), "KUBE-SEP-"+kubeHash(name+"tcp"+ep)
		fmt.Fprintf(&b, "-N %s\n-N %s\n", svc, sep)
		fmt.Fprintf(&rules, "-A KUBE-SERVICES -d %s/32 -p tcp -m comment --comment \"%s cluster IP\" -m tcp --dport 80 -j %s\n", ip, name, svc)
		fmt.Fprintf(&rules, "-A %s ! -s 10.244.0.0/16 -d %s/32 -p tcp -m comment --comment \"%s cluster IP\" -m tcp --dport 80 -j KUBE-MARK-MASQ\n", svc, ip, name)
		fmt.Fprintf(&rules, "-A %s -m comment --comment \"%s -> %s:8080\" -j %s\n", svc, name, ep, sep)
		fmt.Fprintf(&rules, "-A %s -s %s/32 -m comment --comment \"%s\" -j KUBE-MARK-MASQ\n", sep, ep, name)
		fmt.Fprintf(&rules, "-A %s -p tcp -m comment --comment \"%s\" -m tcp -j DNAT --to-destination %s:8080\n", sep, name, ep)
	}
	rules.WriteString("-A KUBE-SERVICES -m comment --comment \"kubernetes service nodeports\" -m addrtype --dst-type LOCAL -j KUBE-NODEPORTS\nCOMMIT\n")
	nat = b.String() + rules.String()
	filter = `*filter
-N KUBE-PROXY-FIREWALL
-N KUBE-FORWARD
-N KUBE-SERVICES
-N KUBE-EXTERNAL-SERVICES
-A INPUT -m conntrack --ctstate NEW -m comment --comment "kubernetes load balancer firewall" -j KUBE-PROXY-FIREWALL
-A INPUT -m conntrack --ctstate NEW -m comment --comment "kubernetes externally-visible service portals" -j KUBE-EXTERNAL-SERVICES
-A FORWARD -m conntrack --ctstate NEW -m comment --comment "kubernetes load balancer firewall" -j KUBE-PROXY-FIREWALL
-A FORWARD -m comment --comment "kubernetes forwarding rules" -j KUBE-FORWARD
-A FORWARD -m conntrack --ctstate NEW -m comment --comment "kubernetes service portals" -j KUBE-SERVICES
-A FORWARD -m conntrack --ctstate NEW -m comment --comment "kubernetes externally-visible service portals" -j KUBE-EXTERNAL-SERVICES
-A OUTPUT -m conntrack --ctstate NEW -m comment --comment "kubernetes load balancer firewall" -j KUBE-PROXY-FIREWALL
-A OUTPUT -m conntrack --ctstate NEW -m comment --comment "kubernetes service portals" -j KUBE-SERVICES
-A KUBE-FORWARD -m comment --comment "kubernetes forwarding rules" -m mark --mark 0x4000/0x4000 -j ACCEPT
-A KUBE-FORWARD -m comment --comment "kubernetes forwarding conntrack rule" -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT
COMMIT
`
	return nat, filter
}

// kubeHash is kube-proxy's chain suffix: 16 characters of the base32 of a SHA-256.
func kubeHash(s string) string {
	sum := sha256.Sum256([]byte(s))
	return base32.StdEncoding.EncodeToString(sum[:])[:16]
}

// LoadKubeProxyRules loads KubeProxyRules(services) into n with the iptables-restore of
// PATH (or of a flavour, restore naming its tool), one exec per table.
func LoadKubeProxyRules(t testing.TB, n *NS, restore string, services int) {
	t.Helper()
	RequireFirewallBinaries(t, "kube-proxy's rules are loaded with iptables-restore")
	nat, filter := KubeProxyRules(services)
	for _, script := range []string{nat, filter} {
		if out, err := n.ExecInput(t, script, restore, "-w"); err != nil {
			t.Fatalf("load kube-proxy's rules: %v: %s", err, out)
		}
	}
}
