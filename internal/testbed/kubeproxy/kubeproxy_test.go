package kubeproxy

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

// The names kube-proxy's own tests expect for Service ns1/svc1, port p80 (tcp), with
// endpoint 10.180.0.1:80 (pkg/proxy/iptables and pkg/proxy/nftables proxier_test.go).
func TestKubeProxyChainNamesAreKubeProxys(t *testing.T) {
	s := kpService{namespace: "ns1", name: "svc1", port: "p80", number: 80,
		clusterIP: netip.MustParseAddr("172.30.0.41"), endpoint: netip.MustParseAddrPort("10.180.0.1:80")}
	assert.Equal(t, "KUBE-SVC-XPGD46QRK7WJZT7O", s.svcChain())
	assert.Equal(t, "KUBE-SEP-SXIVWICOYRO3J4NJ", s.sepChain())
	assert.Equal(t, "service-ULMVA6XW-ns1/svc1/tcp/p80", s.nftServiceChain())
	assert.Equal(t, "endpoint-5OJB2KTY-ns1/svc1/tcp/p80__10.180.0.1/80", s.nftEndpointChain())
	k := kpService{namespace: "default", name: "kubernetes", port: "https"}
	assert.Equal(t, "KUBE-SVC-NPX46M4PTMTKRN6Y", k.svcChain(), "every cluster's kubernetes Service")
}

// countLines counts the lines of text that start with prefix, within the
// iptables-restore section of table when table is not "".
func countLines(text, table, prefix string) int {
	n, in := 0, table == ""
	for _, line := range strings.Split(text, "\n") {
		switch {
		case strings.HasPrefix(line, "*"):
			in = table == "" || line == "*"+table
		case in && strings.HasPrefix(line, prefix):
			n++
		}
	}
	return n
}

func TestKubeProxyIPTablesHasFiveNatRulesPerService(t *testing.T) {
	empty := IPTables(0, false)
	for _, services := range []int{1, 1000, 5000} {
		text := IPTables(services, false)
		assert.Equal(t, text, IPTables(services, false), "deterministic")
		assert.Equal(t, countLines(empty, "nat", "-A ")+5*services, countLines(text, "nat", "-A "), "%d Services", services)
		assert.Equal(t, countLines(empty, "nat", ":")+2*services, countLines(text, "nat", ":"), "%d Services: a KUBE-SVC and a KUBE-SEP chain each", services)
		assert.Equal(t, countLines(empty, "filter", "-A "), countLines(text, "filter", "-A "), "filter holds no per-Service rule (every Service has an endpoint)")
	}
	assert.Equal(t, 25_008, countLines(IPTables(5000, false), "nat", "-A "), "the issue's node: 25,000 rules of Services and kube-proxy's eight")
	assert.Equal(t, 5000, len(uniqueMatches(IPTables(5000, false), "-j KUBE-SVC-")), "a chain name per Service")
}

func TestKubeProxyNFTHasTwoChainsAndTwoElementsPerService(t *testing.T) {
	empty := NFT(0)
	for _, services := range []int{1, 1000, 5000} {
		text := NFT(services)
		assert.Equal(t, text, NFT(services), "deterministic")
		assert.Equal(t, countLines(empty, "", "add chain ip kube-proxy ")+2*services, countLines(text, "", "add chain ip kube-proxy "), "%d Services", services)
		assert.Equal(t, countLines(empty, "", "add rule ip kube-proxy ")+4*services, countLines(text, "", "add rule ip kube-proxy "), "%d Services", services)
		assert.Equal(t, services, countLines(text, "", "add element ip kube-proxy cluster-ips "), "%d Services", services)
		assert.Equal(t, services, countLines(text, "", "add element ip kube-proxy service-ips "), "%d Services", services)
		assert.Equal(t, countLines(empty, "", "add chain ip6 kube-proxy "), countLines(text, "", "add chain ip6 kube-proxy "), "IPv6 holds the skeleton only")
	}
	assert.Equal(t, 5000, len(uniqueMatches(NFT(5000), "goto service-")), "a chain name per Service")
}

// uniqueMatches is the set of whitespace-separated words that follow marker in text.
func uniqueMatches(text, marker string) map[string]bool {
	out := map[string]bool{}
	for _, part := range strings.Split(text, marker)[1:] {
		out[strings.Fields(part)[0]] = true
	}
	return out
}
