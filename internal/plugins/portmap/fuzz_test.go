package portmap

import (
	"slices"
	"strings"
	"testing"

	"github.com/google/nftables/expr"

	"github.com/cnikit/cni/internal/core/cnierror"
	"github.com/cnikit/cni/internal/host/iptables"
	"github.com/cnikit/cni/internal/host/iptables/iptablestest"
	"github.com/cnikit/cni/internal/host/netfilter"
	"github.com/cnikit/cni/internal/host/owner"
	"github.com/cnikit/cni/internal/spec/skel"
	"github.com/cnikit/cni/internal/spec/skel/skeltest"
)

// loaded is what portmap's ADD has decided before it touches the kernel: the settings
// and, per family with a container address, the mappings to install.
type loaded struct {
	Settings *settings
	Families []family
}

func loadForAdd(req *skel.Request) (loaded, error) {
	s, err := load(req)
	if err != nil {
		return loaded{}, err
	}
	out := loaded{Settings: s}
	if req.PrevResult != nil {
		out.Families = s.families(firstAddrs(req.PrevResult.ContainerIPs(req.Args.IfName)))
	}
	return out, nil
}

// prev is a prevResult with a container address of each family on eth0.
const prev = `"prevResult":{"cniVersion":"1.1.0","interfaces":[{"name":"cni0"},{"name":"eth0","sandbox":"/var/run/netns/c"}],` +
	`"ips":[{"address":"10.88.0.5/24","gateway":"10.88.0.1","interface":1},{"address":"fd00::5/64","interface":1}]}`

// FuzzLoad drives portmap configs (backend choice, snat, masqAll, markMasqBit,
// externalSetMarkChain, conditions in either syntax, runtimeConfig.portMappings) with a
// prevResult through skel's ADD path and portmap's loader. A refused config is a config
// error (never 999). For an accepted one, every iptables rule ADD would write reads back
// from iptables-save text as the same rule (no value can end the line or start another
// table), what DEL reads back from the kernel (DNAT rules, nft records, the owner
// comment) gives the mappings and owner ADD wrote, nft conditions compile, and written back out the config loads to the same
// settings.
func FuzzLoad(f *testing.F) {
	for _, seed := range []string{
		`{"cniVersion":"1.1.0","name":"demo","type":"portmap","capabilities":{"portMappings":true},` +
			`"runtimeConfig":{"portMappings":[{"hostPort":8080,"containerPort":80,"protocol":"tcp"}]},` + prev + `}`,
		`{"cniVersion":"1.0.0","name":"n","type":"portmap","backend":"iptables","snat":true,"markMasqBit":13,` +
			`"conditionsV4":["-s","10.99.0.0/16"],"conditionsV6":["!","-s","fd77::2"],"runtimeConfig":{"portMappings":[` +
			`{"hostPort":8080,"containerPort":80,"protocol":"tcp","hostIP":"127.0.0.1"},{"hostPort":53,"containerPort":53,"protocol":"UDP"},` +
			`{"hostPort":9000,"containerPort":9000,"protocol":"sctp","hostIP":"::"}]},` + prev + `}`,
		`{"cniVersion":"1.1.0","name":"n","type":"portmap","externalSetMarkChain":"KUBE-MARK-MASQ","masqAll":true,` +
			`"runtimeConfig":{"portMappings":[{"hostPort":80,"containerPort":8080,"protocol":"tcp","hostIP":"0.0.0.0"}]},` + prev + `}`,
		`{"cniVersion":"1.1.0","name":"n","type":"portmap","backend":"nftables","snat":false,` +
			`"conditionsV4":["ip saddr 10.99.0.0/16","iifname != \"eth*\""],"conditionsV6":["ip6","saddr","fd77::2","meta","mark","0x10"],` +
			`"runtimeConfig":{"portMappings":[{"hostPort":8080,"containerPort":80,"protocol":"tcp","hostIP":"fd00::1"}]},` + prev + `}`,
		`{"cniVersion":"0.3.1","name":"n","type":"portmap","runtimeConfig":{"portMappings":[{"hostPort":1,"containerPort":65535,"protocol":"udp"}]},` +
			`"prevResult":{"cniVersion":"0.3.1","ips":[{"version":"4","address":"10.1.0.5/24"}]}}`,
		`{"cniVersion":"1.1.0","name":"n","type":"portmap","externalSetMarkChain":"RELX\n-F",` +
			`"runtimeConfig":{"portMappings":[{"hostPort":8080,"containerPort":80,"protocol":"tcp"}]},` + prev + `}`,
		`{"cniVersion":"1.1.0","name":"n","type":"portmap","conditionsV4":["-s","1.2.3.4\nCOMMIT\n*filter\n-F"],` +
			`"runtimeConfig":{"portMappings":[{"hostPort":8080,"containerPort":80,"protocol":"tcp"}]},` + prev + `}`,
		`{"cniVersion":"1.1.0","name":"n","type":"portmap","backend":"nftables","markMasqBit":40,"conditionsV4":["tcp flags syn"],` +
			`"runtimeConfig":{"portMappings":[{"hostPort":0,"containerPort":80,"protocol":"icmp","hostIP":"fe80::1%eth0"}]}}`,
	} {
		f.Add([]byte(seed), "eth0")
	}
	f.Fuzz(func(t *testing.T, config []byte, ifName string) {
		args := skeltest.AddArgs("")
		args.IfName = ifName
		l, ok := skeltest.Accepted(t, Plugin(), args, config, loadForAdd)
		if !ok {
			return
		}
		s := l.Value.Settings
		o := attachment{net: l.Req.Net.Name, cid: l.Req.Args.ContainerID}
		for _, c := range []struct{ comment, chain, prefix string }{
			{o.iptComment(), iptDNPrefix + o.hash(), iptDNPrefix},
			{o.nftComment(), nftDNPrefix + o.hash(), nftDNPrefix},
			{o.nftCommentBefore(), nftDNPrefix + o.hash(), nftDNPrefix},
		} {
			a, ok := installedFrom(c.comment, c.chain, c.prefix)
			if !ok || a.hash != o.hash() || !owner.Names(a.net, o.net) || !owner.Names(a.id, o.cid) {
				t.Fatalf("comment %q reads back as %+v %v", c.comment, a, ok)
			}
		}
		for _, fam := range l.Value.Families {
			requireMappingsReadBack(t, s, o, fam)
		}
		conf, err := skel.LoadConfig[Config](l.Req)
		if err != nil {
			t.Fatal(err)
		}
		skeltest.RequireStable(t, Plugin(), l, conf, loadForAdd)
	})
}

// requireMappingsReadBack checks that what DEL reads back from the kernel is what ADD
// wrote: in iptables, every rule reads back as itself from save text and each DNAT rule
// of the CNI-DN chain (the only one DEL reads them from) gives its mapping back; in nftables, each rule's record does.
func requireMappingsReadBack(t *testing.T, s *settings, o attachment, fam family) {
	t.Helper()
	target := fam.addr.Addr()
	for _, m := range fam.mappings {
		rec := nftMapping{mapping: m, target: target}.record()
		back, ok := parseRecord(rec)
		if !ok || back.proto != m.proto || back.hostPort != m.hostPort || back.containerPort != m.containerPort ||
			back.hostIP != m.hostIP || back.target != target {
			t.Fatalf("record %q of %+v reads back as %+v, %v", rec, m, back, ok)
		}
	}
	if s.backend != netfilter.IPTables {
		return
	}
	markChain := s.externalSet
	if markChain == "" && s.snat {
		markChain = iptSetMark
	}
	var flows []flow
	for _, r := range dnRules(s, fam, markChain) {
		iptablestest.RequireReadsBack(t, iptables.FamilyOf(fam.v6), "nat", r)
		if f, ok := flowOfDNAT(r); ok {
			flows = append(flows, f)
		}
	}
	for _, r := range entryRules(o, fam, iptDNPrefix+o.hash()) {
		iptablestest.RequireReadsBack(t, iptables.FamilyOf(fam.v6), "nat", r)
	}
	if len(flows) != len(fam.mappings) {
		t.Fatalf("%d DNAT rules read back for %d mappings", len(flows), len(fam.mappings))
	}
	for i, m := range fam.mappings {
		if want := (flow{proto: m.proto, hostPort: m.hostPort, target: target}); flows[i] != want {
			t.Fatalf("DNAT rule of %+v reads back as %+v", m, flows[i])
		}
	}
}

// FuzzRecord reads the mapping records of nft rules, which DEL takes from the kernel:
// an accepted record is written again as the same mapping.
func FuzzRecord(f *testing.F) {
	for _, seed := range []string{"tcp 8080 * 10.1.0.5 80", "udp 53 127.0.0.1 10.1.0.5 53", "sctp 1 fd00::1 fd00::5 65535",
		"tcp 8080 * 10.1.0.5", "icmp 1 * 10.1.0.5 1", "tcp 70000 * 10.1.0.5 80", "tcp 80 fe80::1%eth0 ::ffff:10.1.0.5 80"} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, rec string) {
		m, ok := parseRecord(rec)
		if !ok {
			return
		}
		again, ok := parseRecord(m.record())
		if !ok || again != m {
			t.Fatalf("%q reads as %+v, written again %q reads as %+v", rec, m, m.record(), again)
		}
	})
}

// FuzzParseConditions compiles nft conditions: a refused list is a config error naming
// the field; an accepted one compiles to expressions that encode for the kernel, each
// comparison as long as what it compares.
func FuzzParseConditions(f *testing.F) {
	for _, seed := range []struct {
		conds string
		v6    bool
	}{
		{"ip saddr 10.99.0.0/16", false},
		{"ip daddr != 192.168.1.1\niifname eth0", false},
		{"meta iifname == \"veth*\"\nmeta oifname != cni0\nmeta mark 0x2000", false},
		{"ip6 saddr fd77::2\nip6 daddr == fd00::/8", true},
		{"meta mark != 4294967295", true},
		{"ip saddr 10.0.0.0/33", false},
		{"ip6 saddr ::ffff:10.0.0.1/100", true},
		{"tcp dport 80", false},
		{"meta", false},
		{"iifname *", false},
		{"oifname 0123456789abcdef", false},
	} {
		f.Add(seed.conds, seed.v6)
	}
	f.Fuzz(func(t *testing.T, conds string, v6 bool) {
		field := condField(v6)
		exprs, err := parseConditions(field, strings.Split(conds, "\n"), v6)
		if err != nil {
			if cnierror.Code(err) != cnierror.CodeInvalidConfig || !strings.Contains(err.Error(), field) {
				t.Fatalf("refused without a config error naming %s: %v", field, err)
			}
			return
		}
		fam := byte(2) // NFPROTO_IPV4
		if v6 {
			fam = 10
		}
		for _, e := range exprs {
			if _, err := expr.Marshal(fam, e); err != nil {
				t.Fatalf("compiled %q to %#v, which does not encode: %v", conds, e, err)
			}
			requireSaneExpr(t, conds, e, v6)
		}
	})
}

func requireSaneExpr(t *testing.T, conds string, e expr.Any, v6 bool) {
	t.Helper()
	addrLen := 4
	if v6 {
		addrLen = 16
	}
	switch e := e.(type) {
	case *expr.Payload:
		if int(e.Len) != addrLen {
			t.Fatalf("%q loads %d address bytes", conds, e.Len)
		}
	case *expr.Bitwise:
		if int(e.Len) != addrLen || len(e.Mask) != addrLen || len(e.Xor) != addrLen {
			t.Fatalf("%q masks with %#v", conds, e)
		}
	case *expr.Cmp:
		if n := len(e.Data); n == 0 || n > 16 {
			t.Fatalf("%q compares %d bytes", conds, n)
		}
	case *expr.Meta:
		if !slices.Contains([]expr.MetaKey{expr.MetaKeyIIFNAME, expr.MetaKeyOIFNAME, expr.MetaKeyMARK}, e.Key) {
			t.Fatalf("%q loads meta key %v", conds, e.Key)
		}
	default:
		t.Fatalf("%q compiled to an unexpected %T", conds, e)
	}
}
