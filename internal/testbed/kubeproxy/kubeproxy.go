// Package kubeproxy writes the rules kube-proxy keeps on a node, in its iptables and
// its nftables modes, for N Services of one endpoint each, with kube-proxy's own chain
// names: the foreign rules of a Kubernetes node, beside which the tests show that our
// plugins read only what they own and the bench's node section measures them. Text
// only (iptables-restore and nft -f input); loading it is the caller's.
package kubeproxy

import (
	"crypto/sha256"
	"encoding/base32"
	"fmt"
	"net/netip"
	"strings"
)

// kube-proxy's modes (its --proxy-mode values).
const (
	IPTablesMode = "iptables"
	NFTablesMode = "nftables"
)

// The cluster a generated node belongs to: kube-proxy's defaults of kubeadm.
var (
	kpServiceCIDR = netip.MustParsePrefix("10.96.0.0/12")
	kpClusterCIDR = netip.MustParsePrefix("10.244.0.0/16")
	kpNodeIP      = netip.MustParseAddr("192.168.0.10")
)

// kpService is one TCP port of a Service with one ready endpoint.
type kpService struct {
	namespace, name, port string
	clusterIP             netip.Addr
	number                int // the Service's port
	endpoint              netip.AddrPort
}

// kpServiceAt is Service i of a generated node: port http (80) to one endpoint on
// another node (8080), as most Services of a cluster are. Cluster IPs count from
// 10.96.0.16 (below it, the kubernetes and DNS Services' usual addresses), endpoints
// from 10.244.1.0.
func kpServiceAt(i int) kpService {
	return kpService{
		namespace: "bench",
		name:      fmt.Sprintf("svc-%d", i),
		port:      "http",
		clusterIP: addrPlus(kpServiceCIDR.Addr(), 16+i),
		number:    80,
		endpoint:  netip.AddrPortFrom(addrPlus(kpClusterCIDR.Addr(), 256+i), 8080),
	}
}

// addrPlus is the IPv4 address n after a.
func addrPlus(a netip.Addr, n int) netip.Addr {
	b := a.As4()
	v := uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3])
	v += uint32(n)
	return netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)})
}

// portName is kube-proxy's ServicePortName as text, "namespace/name:port".
func (s kpService) portName() string { return s.namespace + "/" + s.name + ":" + s.port }

// base32Of is kube-proxy's hash of a name: sha256, base32 (standard alphabet).
func base32Of(s string) string {
	h := sha256.Sum256([]byte(s))
	return base32.StdEncoding.EncodeToString(h[:])
}

// svcChain and sepChain are kube-proxy's iptables chain names of the Service's port
// and of its endpoint (pkg/proxy/iptables: servicePortChainName,
// servicePortEndpointChainName).
func (s kpService) svcChain() string { return "KUBE-SVC-" + base32Of(s.portName() + "tcp")[:16] }

func (s kpService) sepChain() string {
	return "KUBE-SEP-" + base32Of(s.portName() + "tcp" + s.endpoint.String())[:16]
}

// nftServiceChain and nftEndpointChain are kube-proxy's nftables chain names
// (pkg/proxy/nftables: servicePortChainNameBase, servicePortEndpointChainNameBase,
// hashAndTruncate): the hash's first 8 characters, then the name itself.
func (s kpService) nftServiceChain() string {
	base := fmt.Sprintf("%s/%s/tcp/%s", s.namespace, s.name, s.port)
	return "service-" + base32Of(base)[:8] + "-" + base
}

func (s kpService) nftEndpointChain() string {
	base := fmt.Sprintf("%s/%s/tcp/%s__%s/%d", s.namespace, s.name, s.port, s.endpoint.Addr(), s.endpoint.Port())
	return "endpoint-" + base32Of(base)[:8] + "-" + base
}

// KubeletIPTablesChains are the chains kubelet makes in iptables whatever the proxy
// mode (its canary, and the hint iptables-wrapper reads), by table: user chains
// without rules, which on an nftables node must not make the backend rule pick
// iptables.
const KubeletIPTablesChains = `*mangle
:KUBE-IPTABLES-HINT - [0:0]
:KUBE-KUBELET-CANARY - [0:0]
COMMIT
*nat
:KUBE-KUBELET-CANARY - [0:0]
COMMIT
*filter
:KUBE-KUBELET-CANARY - [0:0]
COMMIT
`

// IPTables is what kube-proxy in iptables mode keeps in one family's tables
// with services Services, as iptables-restore input (with kubelet's chains): five nat
// rules per Service (the KUBE-SERVICES match, the KUBE-SVC chain's masquerade mark and
// jump to the endpoint, the KUBE-SEP chain's mark and DNAT) beside a fixed skeleton in
// nat and filter. IPv6 holds the skeleton only (services must be 0): the IPv6 proxier
// of an IPv4 cluster on a dual-stack-capable node.
func IPTables(services int, v6 bool) string {
	var w strings.Builder
	localOnly := ""
	if v6 {
		localOnly = "! -d ::1/128 "
	}
	w.WriteString(`*mangle
:KUBE-IPTABLES-HINT - [0:0]
:KUBE-KUBELET-CANARY - [0:0]
:KUBE-PROXY-CANARY - [0:0]
COMMIT
*filter
:INPUT ACCEPT [0:0]
:FORWARD ACCEPT [0:0]
:OUTPUT ACCEPT [0:0]
:KUBE-EXTERNAL-SERVICES - [0:0]
:KUBE-FORWARD - [0:0]
:KUBE-KUBELET-CANARY - [0:0]
:KUBE-NODEPORTS - [0:0]
:KUBE-PROXY-CANARY - [0:0]
:KUBE-PROXY-FIREWALL - [0:0]
:KUBE-SERVICES - [0:0]
-A INPUT -m conntrack --ctstate NEW -m comment --comment "kubernetes load balancer firewall" -j KUBE-PROXY-FIREWALL
-A INPUT -m comment --comment "kubernetes health check service ports" -j KUBE-NODEPORTS
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
*nat
:PREROUTING ACCEPT [0:0]
:INPUT ACCEPT [0:0]
:OUTPUT ACCEPT [0:0]
:POSTROUTING ACCEPT [0:0]
:KUBE-KUBELET-CANARY - [0:0]
:KUBE-MARK-MASQ - [0:0]
:KUBE-NODEPORTS - [0:0]
:KUBE-POSTROUTING - [0:0]
:KUBE-PROXY-CANARY - [0:0]
:KUBE-SERVICES - [0:0]
`)
	for i := range services {
		s := kpServiceAt(i)
		fmt.Fprintf(&w, ":%s - [0:0]\n:%s - [0:0]\n", s.svcChain(), s.sepChain())
	}
	w.WriteString(`-A PREROUTING -m comment --comment "kubernetes service portals" -j KUBE-SERVICES
-A OUTPUT -m comment --comment "kubernetes service portals" -j KUBE-SERVICES
-A POSTROUTING -m comment --comment "kubernetes postrouting rules" -j KUBE-POSTROUTING
-A KUBE-MARK-MASQ -j MARK --or-mark 0x4000
-A KUBE-POSTROUTING -m mark ! --mark 0x4000/0x4000 -j RETURN
-A KUBE-POSTROUTING -j MARK --xor-mark 0x4000
-A KUBE-POSTROUTING -m comment --comment "kubernetes service traffic requiring SNAT" -j MASQUERADE --random-fully
`)
	for i := range services {
		s := kpServiceAt(i)
		pn := s.portName()
		fmt.Fprintf(&w, "-A KUBE-SERVICES -d %s/32 -p tcp -m comment --comment \"%s cluster IP\" -m tcp --dport %d -j %s\n",
			s.clusterIP, pn, s.number, s.svcChain())
		fmt.Fprintf(&w, "-A %s ! -s %s -d %s/32 -p tcp -m comment --comment \"%s cluster IP\" -m tcp --dport %d -j KUBE-MARK-MASQ\n",
			s.svcChain(), kpClusterCIDR, s.clusterIP, pn, s.number)
		fmt.Fprintf(&w, "-A %s -m comment --comment \"%s -> %s\" -j %s\n", s.svcChain(), pn, s.endpoint.String(), s.sepChain())
		fmt.Fprintf(&w, "-A %s -s %s/32 -m comment --comment %s -j KUBE-MARK-MASQ\n", s.sepChain(), s.endpoint.Addr(), pn)
		fmt.Fprintf(&w, "-A %s -p tcp -m comment --comment %s -m tcp -j DNAT --to-destination %s\n", s.sepChain(), pn, s.endpoint.String())
	}
	fmt.Fprintf(&w, "-A KUBE-SERVICES -m comment --comment \"kubernetes service nodeports; NOTE: this must be the last rule in this chain\" %s-m addrtype --dst-type LOCAL -j KUBE-NODEPORTS\nCOMMIT\n", localOnly)
	return w.String()
}

// NFT is what kube-proxy in nftables mode keeps with services Services, as
// the `nft -f` input it sends (one command a line, as knftables writes a
// transaction): `table ip kube-proxy` with its sets, maps and base chains, per Service
// a chain, an endpoint chain (two rules each) and elements in cluster-ips and
// service-ips; `table ip6 kube-proxy` with the same skeleton and no Service.
func NFT(services int) string {
	var w strings.Builder
	nftSkeleton(&w, "ip", "ipv4_addr", kpServiceCIDR.String(), kpNodeIP.String())
	nftSkeleton(&w, "ip6", "ipv6_addr", "fd00:10:96::/112", "")
	ss := make([]kpService, services)
	for i := range ss {
		ss[i] = kpServiceAt(i)
	}
	// Chains first, then their rules, then the elements naming them: every
	// reference is to something the transaction already made.
	for _, s := range ss {
		fmt.Fprintf(&w, "add chain ip kube-proxy %s\nadd chain ip kube-proxy %s\n", s.nftServiceChain(), s.nftEndpointChain())
	}
	for _, s := range ss {
		sc, ec := s.nftServiceChain(), s.nftEndpointChain()
		fmt.Fprintf(&w, "add rule ip kube-proxy %s ip daddr %s tcp dport %d ip saddr != %s jump mark-for-masquerade\n", sc, s.clusterIP, s.number, kpClusterCIDR)
		fmt.Fprintf(&w, "add rule ip kube-proxy %s numgen random mod 1 vmap { 0 : goto %s }\n", sc, ec)
		fmt.Fprintf(&w, "add rule ip kube-proxy %s ip saddr %s jump mark-for-masquerade\n", ec, s.endpoint.Addr())
		fmt.Fprintf(&w, "add rule ip kube-proxy %s meta l4proto tcp dnat to %s\n", ec, s.endpoint.String())
	}
	for _, s := range ss {
		fmt.Fprintf(&w, "add element ip kube-proxy cluster-ips { %s }\n", s.clusterIP)
		fmt.Fprintf(&w, "add element ip kube-proxy service-ips { %s . tcp . %d comment %q : goto %s }\n", s.clusterIP, s.number, s.portName(), s.nftServiceChain())
	}
	return w.String()
}

// nftSkeleton writes one family's table as kube-proxy sets it up
// (setupNFTables): what it holds with no Service at all.
func nftSkeleton(w *strings.Builder, family, addrType, serviceCIDR, nodeIP string) {
	t := family + " kube-proxy"
	fmt.Fprintf(w, "add table %s { comment \"rules for kube-proxy\" ; }\n", t)
	// kube-proxy's priorities are dstnat-10, dstnat+10, dstnat and srcnat; written as
	// numbers, since nft before 1.0.7 takes the name dstnat on prerouting only.
	for _, c := range []struct{ name, spec string }{
		{"filter-prerouting", "type filter hook prerouting priority -110 ;"},
		{"filter-input", "type filter hook input priority -110 ;"},
		{"filter-forward", "type filter hook forward priority -110 ;"},
		{"filter-output", "type filter hook output priority -110 ;"},
		{"filter-output-post-dnat", "type filter hook output priority -90 ;"},
		{"nat-prerouting", "type nat hook prerouting priority -100 ;"},
		{"nat-output", "type nat hook output priority -100 ;"},
		{"nat-postrouting", "type nat hook postrouting priority 100 ;"},
	} {
		fmt.Fprintf(w, "add chain %s %s { %s }\n", t, c.name, c.spec)
	}
	for _, c := range []string{"cluster-ips-check", "firewall-check", "mark-for-masquerade", "masquerading",
		"nodeport-endpoints-check", "service-endpoints-check", "services"} {
		fmt.Fprintf(w, "add chain %s %s\n", t, c)
	}
	fmt.Fprintf(w, "add chain %s reject-chain { comment \"helper for @no-endpoint-services / @no-endpoint-nodeports\" ; }\n", t)
	fmt.Fprintf(w, "add set %s cluster-ips { type %s ; comment \"Active ClusterIPs\" ; }\n", t, addrType)
	fmt.Fprintf(w, "add set %s nodeport-ips { type %s ; comment \"IPs that accept NodePort traffic\" ; }\n", t, addrType)
	for _, m := range []struct{ name, key, comment string }{
		{"firewall-ips", addrType + " . inet_proto . inet_service", "destinations that are subject to LoadBalancerSourceRanges"},
		{"no-endpoint-nodeports", "inet_proto . inet_service", "vmap to drop or reject packets to service nodeports with no endpoints"},
		{"no-endpoint-services", addrType + " . inet_proto . inet_service", "vmap to drop or reject packets to services with no endpoints"},
		{"service-ips", addrType + " . inet_proto . inet_service", "ClusterIP, ExternalIP and LoadBalancer IP traffic"},
		{"service-nodeports", "inet_proto . inet_service", "NodePort traffic"},
	} {
		fmt.Fprintf(w, "add map %s %s { type %s : verdict ; comment %q ; }\n", t, m.name, m.key, m.comment)
	}
	for _, r := range []struct{ chain, rule string }{
		{"filter-prerouting", "ct state new jump firewall-check"},
		{"filter-input", "ct state new jump nodeport-endpoints-check"},
		{"filter-input", "ct state new jump service-endpoints-check"},
		{"filter-forward", "ct state new jump service-endpoints-check"},
		{"filter-forward", "ct state new jump cluster-ips-check"},
		{"filter-output", "ct state new jump service-endpoints-check"},
		{"filter-output", "ct state new jump cluster-ips-check"},
		{"filter-output-post-dnat", "ct state new jump firewall-check"},
		{"nat-prerouting", "jump services"},
		{"nat-output", "jump services"},
		{"nat-postrouting", "jump masquerading"},
		{"cluster-ips-check", family + " daddr @cluster-ips reject comment \"Reject traffic to invalid ports of ClusterIPs\""},
		{"cluster-ips-check", family + " daddr " + serviceCIDR + " drop comment \"Drop traffic to unallocated ClusterIPs\""},
		{"firewall-check", family + " daddr . meta l4proto . th dport vmap @firewall-ips"},
		{"mark-for-masquerade", "meta mark set meta mark | 0x4000"},
		{"masquerading", "meta mark & 0x4000 == 0 return"},
		{"masquerading", "meta mark set meta mark ^ 0x4000"},
		{"masquerading", "masquerade fully-random"},
		{"nodeport-endpoints-check", family + " daddr @nodeport-ips meta l4proto . th dport vmap @no-endpoint-nodeports"},
		{"reject-chain", "reject"},
		{"service-endpoints-check", family + " daddr . meta l4proto . th dport vmap @no-endpoint-services"},
		{"services", family + " daddr . meta l4proto . th dport vmap @service-ips"},
		{"services", family + " daddr @nodeport-ips meta l4proto . th dport vmap @service-nodeports"},
	} {
		fmt.Fprintf(w, "add rule %s %s %s\n", t, r.chain, r.rule)
	}
	if nodeIP != "" {
		fmt.Fprintf(w, "add element %s nodeport-ips { %s }\n", t, nodeIP)
	}
}
