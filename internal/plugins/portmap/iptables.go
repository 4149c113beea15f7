package portmap

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os/exec"
	"slices"
	"strconv"
	"strings"

	"github.com/cnikit/cni/internal/host/iptables"
)

// The reference's iptables layout in table nat, name for name, so that operators'
// tooling and nodes upgraded from the reference keep working:
//
//	PREROUTING, OUTPUT: -m addrtype --dst-type LOCAL -j CNI-HOSTPORT-DNAT
//	CNI-HOSTPORT-DNAT:  -p P -m comment --comment "dnat name: \"N\" id: \"C\"" -m multiport --dports p1,..,p15 [conds] -j CNI-DN-<hash>
//	CNI-DN-<hash>:      per mapping: hairpin and (v4) localhost -j CNI-HOSTPORT-SETMARK, then -j DNAT --to-destination
//	CNI-HOSTPORT-SETMARK: -m comment --comment "CNI portfwd masquerade mark" -j MARK --set-xmark 0x2000/0x2000
//	POSTROUTING (first): -m comment --comment "CNI portfwd requiring masquerade" -j CNI-HOSTPORT-MASQ
//	CNI-HOSTPORT-MASQ:  -m mark --mark 0x2000/0x2000 -j MASQUERADE
//
// Rules are recognised by what they mean (iptables.Rule.Same), so whichever iptables
// printed them, a repeated ADD changes nothing and CHECK finds them; DEL finds the
// attachment's rules by the chain they jump to. Every change of one command and family
// is one iptables-restore --noflush, none when nothing is to change.
const (
	iptDNAT     = "CNI-HOSTPORT-DNAT"
	iptSetMark  = "CNI-HOSTPORT-SETMARK"
	iptMasq     = "CNI-HOSTPORT-MASQ"
	iptDNPrefix = "CNI-DN-"
	// iptSNPrefix is the chain of reference versions before 0.8; DEL still removes it.
	iptSNPrefix = "CNI-SN-"
	// multiportMax is the number of ports one multiport match takes.
	multiportMax = 15
)

// iptBackend installs port mappings with iptables-restore batches.
type iptBackend struct{}

func iptFamily(v6 bool) iptables.Family {
	if v6 {
		return iptables.IPv6
	}
	return iptables.IPv4
}

func markDef(bit int) string {
	v := uint32(1) << bit
	return fmt.Sprintf("%#x/%#x", v, v)
}

var toplevelRule = iptables.Rule{"-m", "addrtype", "--dst-type", "LOCAL", "-j", iptDNAT}

// planShared queues the shared chains and their jumps; it returns the chain that
// hairpin and localhost traffic is sent to for marking ("" without snat).
func planShared(b *iptables.Batch, s *settings) string {
	b.EnsureChain(iptDNAT)
	b.AppendRule("PREROUTING", toplevelRule)
	b.AppendRule("OUTPUT", toplevelRule)
	if !s.snat {
		return ""
	}
	if s.externalSet != "" {
		return s.externalSet
	}
	mark := markDef(s.markBit)
	b.EnsureChain(iptSetMark)
	b.AppendRule(iptSetMark, iptables.Rule{"-m", "comment", "--comment", "CNI portfwd masquerade mark", "-j", "MARK", "--set-xmark", mark})
	b.EnsureChain(iptMasq)
	b.AppendRule(iptMasq, iptables.Rule{"-m", "mark", "--mark", mark, "-j", "MASQUERADE"})
	b.InsertRule("POSTROUTING", iptables.Rule{"-m", "comment", "--comment", "CNI portfwd requiring masquerade", "-j", iptMasq})
	return iptSetMark
}

// entryRules are the attachment's jumps from CNI-HOSTPORT-DNAT: per protocol, its
// host ports in groups of 15.
func entryRules(o attachment, f family, dn string) []iptables.Rule {
	ports := map[string][]string{}
	for _, m := range f.mappings {
		ports[m.proto] = append(ports[m.proto], strconv.Itoa(int(m.hostPort)))
	}
	var out []iptables.Rule
	for _, proto := range []string{"sctp", "tcp", "udp"} {
		for p := ports[proto]; len(p) > 0; {
			n := min(len(p), multiportMax)
			r := iptables.Rule{"-p", proto, "-m", "comment", "--comment", o.iptComment(), "-m", "multiport", "--dports", strings.Join(p[:n], ",")}
			r = append(r, f.conds...)
			out = append(out, append(r, "-j", dn))
			p = p[n:]
		}
	}
	return out
}

func hostPrefix(a netip.Addr) string { return netip.PrefixFrom(a, a.BitLen()).String() }

// dnRules are the CNI-DN-<hash> chain's rules, in the reference's order.
func dnRules(s *settings, f family, markChain string) []iptables.Rule {
	target := f.addr.Addr()
	var out []iptables.Rule
	for _, m := range f.mappings {
		var dst iptables.Rule
		if m.hostIP.IsValid() {
			dst = iptables.Rule{"-d", hostPrefix(m.hostIP)}
		}
		match := append(slices.Clone(dst), "-p", m.proto, "-m", m.proto, "--dport", strconv.Itoa(int(m.hostPort)))
		if markChain != "" {
			// iptables-save omits a match on 0.0.0.0/0, which masqAll would be.
			hairpin := iptables.Rule{}
			if !s.masqAll {
				hairpin = iptables.Rule{"-s", f.addr.Masked().String()}
			}
			out = append(out, append(append(hairpin, match...), "-j", markChain))
			if !f.v6 {
				out = append(out, append(append(iptables.Rule{"-s", "127.0.0.1/32"}, match...), "-j", markChain))
			}
		}
		to := netip.AddrPortFrom(target, m.containerPort).String()
		if target.Is4() {
			to = target.String() + ":" + strconv.Itoa(int(m.containerPort))
		}
		out = append(out, append(slices.Clone(match), "-j", "DNAT", "--to-destination", to))
	}
	return out
}

func (iptBackend) add(ctx context.Context, o attachment, s *settings, fams []family) error {
	dn := iptDNPrefix + o.hash()
	for _, f := range fams {
		err := iptables.Update(ctx, iptFamily(f.v6), "nat", func(b *iptables.Batch) error {
			markChain := planShared(b, s)
			entries := entryRules(o, f, dn)
			b.DeleteRulesFunc(iptDNAT, func(r iptables.Rule) bool {
				return r.Target() == dn && !slices.ContainsFunc(entries, r.Same)
			})
			b.SetRules(dn, dnRules(s, f, markChain))
			for _, r := range entries {
				b.AppendRule(iptDNAT, r)
			}
			return nil
		})
		if err != nil {
			return fmt.Errorf("iptables: install port mappings of %s: %w", o.cid, err)
		}
	}
	return nil
}

func (iptBackend) del(ctx context.Context, hash string) ([]flow, error) {
	dn, sn := iptDNPrefix+hash, iptSNPrefix+hash
	var flows []flow
	for _, v6 := range []bool{false, true} {
		fam := iptFamily(v6)
		if !iptables.ChainsMayExist(fam, "nat", dn, sn) {
			continue
		}
		var found []flow
		err := iptables.Update(ctx, fam, "nat", func(b *iptables.Batch) error {
			found = nil
			if ch := b.Table().Chain(dn); ch != nil {
				for _, r := range ch.Rules {
					if f, ok := flowOfDNAT(r); ok {
						found = append(found, f)
					}
				}
			}
			jumpsToMine := func(r iptables.Rule) bool { return r.Target() == dn || r.Target() == sn }
			for _, ch := range b.Table().Chains() {
				b.DeleteRulesFunc(ch.Name, jumpsToMine)
			}
			b.DeleteChain(dn)
			b.DeleteChain(sn)
			return nil
		})
		if errors.Is(err, exec.ErrNotFound) {
			continue // a nat table made by nft itself, and no iptables tools to have used it
		}
		if err != nil {
			return nil, fmt.Errorf("iptables: remove port mappings of %s: %w", dn, err)
		}
		flows = append(flows, found...)
	}
	return flows, nil
}

// flowOfDNAT reads a CNI-DN DNAT rule back: "-p P -m P --dport H ... -j DNAT
// --to-destination T:C", in whatever spelling the snapshot has it.
func flowOfDNAT(r iptables.Rule) (flow, bool) {
	if r.Target() != "DNAT" {
		return flow{}, false
	}
	proto, _ := r.Value("-p")
	port, _ := r.Value("--dport")
	to, _ := r.Value("--to-destination")
	hostPort, err := strconv.ParseUint(port, 10, 16)
	if err != nil || hostPort == 0 || proto == "" {
		return flow{}, false
	}
	target, err := netip.ParseAddrPort(to)
	if err != nil {
		return flow{}, false
	}
	return flow{proto: proto, hostPort: uint16(hostPort), target: target.Addr()}, true
}

func (iptBackend) check(ctx context.Context, o attachment, s *settings, fams []family) error {
	dn := iptDNPrefix + o.hash()
	for _, f := range fams {
		t, err := iptables.Load(ctx, iptFamily(f.v6), "nat")
		if err != nil {
			return fmt.Errorf("iptables: %w", err)
		}
		b := iptables.NewBatch(t)
		markChain := planShared(b, s)
		if b.Len() > 0 {
			return fmt.Errorf("iptables %s: shared port-forwarding chains or jumps are missing", iptFamily(f.v6))
		}
		ch := t.Chain(dn)
		if ch == nil {
			return fmt.Errorf("iptables %s: chain %s is missing", iptFamily(f.v6), dn)
		}
		for _, r := range dnRules(s, f, markChain) {
			if !ch.Has(r) {
				return fmt.Errorf("iptables %s: chain %s lacks rule %s", iptFamily(f.v6), dn, r)
			}
		}
		entries := t.Chain(iptDNAT)
		for _, want := range entryRules(o, f, dn) {
			if !coveredBy(entries.Rules, want) {
				return fmt.Errorf("iptables %s: %s lacks rule %s", iptFamily(f.v6), iptDNAT, want)
			}
		}
	}
	return nil
}

// coveredBy tells whether the entry rules in have send every port of the entry rule
// want to its chain: rules of the same protocol, owner comment and target, the ports
// grouped in any way. Conditions are left out: they are the operator's syntax, which an
// iptables version may print in a form this package does not know. More ports than
// want's are fine: the reference lists in each family's entries the ports of all
// mappings of the protocol, those with a host IP of the other family too, which its
// CNI-DN chain then does not map.
func coveredBy(have []iptables.Rule, want iptables.Rule) bool {
	same := func(r iptables.Rule) bool {
		for _, opt := range []string{"-p", "--comment"} {
			h, _ := r.Value(opt)
			w, _ := want.Value(opt)
			if h != w {
				return false
			}
		}
		return r.Target() == want.Target()
	}
	ports := map[string]bool{}
	for _, r := range have {
		if same(r) {
			p, _ := r.Value("--dports")
			for _, port := range strings.Split(p, ",") {
				ports[port] = true
			}
		}
	}
	w, _ := want.Value("--dports")
	for _, port := range strings.Split(w, ",") {
		if !ports[port] {
			return false
		}
	}
	return true
}

func (iptBackend) installed(ctx context.Context) ([]installed, error) {
	seen := map[string]bool{}
	var out []installed
	for _, v6 := range []bool{false, true} {
		fam := iptFamily(v6)
		if !iptables.ChainsMayExist(fam, "nat", iptDNAT) {
			continue
		}
		t, err := iptables.Load(ctx, fam, "nat")
		if err != nil {
			return nil, fmt.Errorf("iptables: %w", err)
		}
		ch := t.Chain(iptDNAT)
		if ch == nil {
			continue
		}
		for _, r := range ch.Rules {
			if a, ok := installedFrom(r.Comment(), r.Target(), iptDNPrefix); ok && !seen[a.hash] {
				seen[a.hash] = true
				out = append(out, a)
			}
		}
	}
	return out, nil
}
