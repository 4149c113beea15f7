package portmap

import (
	"cmp"
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
// is one iptables-restore --noflush, none when nothing is to change, and nothing reads
// the nat table whole (on a kube-proxy node it holds tens of thousands of rules): our
// chains are listed one by one (`iptables -S CHAIN`), the built-in chains only asked
// about our jumps (`iptables -C`), and a chain that does not exist yet costs no read at
// all with iptables-nft (netlink tells), nor does the jump to it: ADD of a pod lists
// the mark and masquerade chains and asks three questions; its CNI-DN chain is new.
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

func markDef(bit int) string {
	v := uint32(1) << bit
	return fmt.Sprintf("%#x/%#x", v, v)
}

var toplevelRule = iptables.Rule{"-m", "addrtype", "--dst-type", "LOCAL", "-j", iptDNAT}

// masqJump is the first rule of POSTROUTING, sending marked traffic to be masqueraded.
var masqJump = iptables.Rule{"-m", "comment", "--comment", "CNI portfwd requiring masquerade", "-j", iptMasq}

func setMarkRule(mark string) iptables.Rule {
	return iptables.Rule{"-m", "comment", "--comment", "CNI portfwd masquerade mark", "-j", "MARK", "--set-xmark", mark}
}

func masqRule(mark string) iptables.Rule {
	return iptables.Rule{"-m", "mark", "--mark", mark, "-j", "MASQUERADE"}
}

// planShared queues the shared chains and their jumps; it returns the chain that
// hairpin and localhost traffic is sent to for marking ("" without snat). The rules
// it looks for are asked about at once, once the chains' existence is known (with
// iptables-nft over netlink): on a node where the chains exist, one exec.
func planShared(b *iptables.Batch, s *settings) string {
	mark := markDef(s.markBit)
	own := s.snat && s.externalSet == ""
	b.EnsureChain(iptDNAT)
	if own {
		b.EnsureChain(iptSetMark)
		b.EnsureChain(iptMasq)
	}
	b.Prefetch(sharedProbes(s)...)
	b.AppendRule("PREROUTING", toplevelRule)
	b.AppendRule("OUTPUT", toplevelRule)
	if own {
		b.AppendRule(iptSetMark, setMarkRule(mark))
		b.AppendRule(iptMasq, masqRule(mark))
		b.InsertRule("POSTROUTING", masqJump)
	}
	return markChainOf(s)
}

// sharedProbes are the rules of the shared layout, in the chains they go in.
func sharedProbes(s *settings) []iptables.Probe {
	probes := []iptables.Probe{{Chain: "PREROUTING", Rule: toplevelRule}, {Chain: "OUTPUT", Rule: toplevelRule}}
	if s.snat && s.externalSet == "" {
		mark := markDef(s.markBit)
		probes = append(probes, iptables.Probe{Chain: iptSetMark, Rule: setMarkRule(mark)},
			iptables.Probe{Chain: iptMasq, Rule: masqRule(mark)}, iptables.Probe{Chain: "POSTROUTING", Rule: masqJump})
	}
	return probes
}

// markChainOf is the chain hairpin and localhost traffic is sent to for marking: ours,
// the operator's (externalSetMarkChain), or none without snat.
func markChainOf(s *settings) string {
	if !s.snat {
		return ""
	}
	return cmp.Or(s.externalSet, iptSetMark)
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
			// iptables omits a match on 0.0.0.0/0 from its listings, which masqAll would be.
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
		err := iptables.Update(ctx, iptables.FamilyOf(f.v6), "nat", func(b *iptables.Batch) error {
			markChain := planShared(b, s)
			entries := entryRules(o, f, dn)
			// An earlier ADD's entries that are no longer wanted go. A CNI-DN chain that
			// does not exist has no entries (nothing can jump to it), so the shared
			// CNI-HOSTPORT-DNAT, one entry per pod, is listed only for a repeated ADD.
			if b.Exists(dn) {
				b.DeleteRulesFunc(iptDNAT, func(r iptables.Rule) bool {
					return r.Target() == dn && !slices.ContainsFunc(entries, r.Same)
				})
			}
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

// iptSNAT is the entry chain of the CNI-SN chains of reference versions before 0.8.
const iptSNAT = "CNI-HOSTPORT-SNAT"

func (iptBackend) del(ctx context.Context, hash string) ([]flow, error) {
	dn, sn := iptDNPrefix+hash, iptSNPrefix+hash
	var flows []flow
	for _, v6 := range []bool{false, true} {
		fam := iptables.FamilyOf(v6)
		if !iptables.ChainsMayExist(fam, "nat", dn, sn) {
			continue
		}
		var found []flow
		var first error
		for how := removeEntries; how <= flushOnly; how++ {
			err := iptables.Update(ctx, fam, "nat", func(b *iptables.Batch) error {
				found = planRemoval(b, dn, sn, how)
				return nil
			})
			if err == nil || errors.Is(err, exec.ErrNotFound) {
				first = err
				break
			}
			first = cmp.Or(first, err)
		}
		if errors.Is(first, exec.ErrNotFound) {
			continue // a nat table made by nft itself, and no iptables tools to have used it
		}
		if first != nil {
			return nil, fmt.Errorf("iptables: remove port mappings of %s: %w", dn, first)
		}
		flows = append(flows, found...)
	}
	return flows, nil
}

// removal is how far a DEL goes to remove an attachment's chains.
type removal int

const (
	// removeEntries deletes the jumps to the chains where the layout puts them, in
	// their entry chains (as the reference's own DEL looks for them), then the chains.
	removeEntries removal = iota
	// removeStray also deletes jumps to them from the nat table's built-in chains, where
	// an operator may have put one: a stray jump keeps a chain in use, and a DEL that
	// failed at every retry of the runtime would keep the pod's mappings too.
	removeStray
	// flushOnly leaves the chains, flushed, for a jump from anywhere else: they then map
	// nothing.
	flushOnly
)

// planRemoval plans the removal of the attachment's chains dn and sn (pre-0.8) and
// returns the mappings dn held, whose conntrack entries must go.
func planRemoval(b *iptables.Batch, dn, sn string, how removal) []flow {
	var found []flow
	if ch := b.Chain(dn); ch != nil {
		for _, r := range ch.Rules {
			if f, ok := flowOfDNAT(r); ok {
				found = append(found, f)
			}
		}
	}
	jumpsToMine := func(r iptables.Rule) bool { return r.Target() == dn || r.Target() == sn }
	b.DeleteRulesFunc(iptDNAT, jumpsToMine)
	if b.Exists(sn) {
		b.DeleteRulesFunc(iptSNAT, jumpsToMine)
	}
	if how >= removeStray {
		for _, builtin := range []string{"PREROUTING", "INPUT", "OUTPUT", "POSTROUTING"} {
			b.DeleteRulesFunc(builtin, jumpsToMine)
		}
	}
	for _, ch := range []string{dn, sn} {
		if how < flushOnly {
			b.DeleteChain(ch)
		} else if b.Exists(ch) {
			b.FlushChain(ch)
		}
	}
	return found
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
		fam := iptables.FamilyOf(f.v6)
		err := iptables.Inspect(ctx, fam, "nat", func(t *iptables.Table) error {
			// Every rule looked for is asked about at once, first: where all are there,
			// that one exec also tells that the chains exist (legacy tables have no
			// cheaper way to tell).
			dnRs, entries := dnRules(s, f, markChainOf(s)), entryRules(o, f, dn)
			probes := sharedProbes(s)
			for _, r := range dnRs {
				probes = append(probes, iptables.Probe{Chain: dn, Rule: r})
			}
			for _, r := range entries {
				probes = append(probes, iptables.Probe{Chain: iptDNAT, Rule: r})
			}
			t.Prefetch(probes...)
			b := iptables.NewBatch(t)
			planShared(b, s)
			if b.Err() != nil {
				return b.Err()
			}
			if b.Len() > 0 {
				return fmt.Errorf("%s: shared port-forwarding chains or jumps are missing", fam)
			}
			if ok, err := t.Exists(dn); err != nil || !ok {
				return cmp.Or(err, fmt.Errorf("%s: chain %s is missing", fam, dn))
			}
			for _, r := range dnRs {
				if has, err := t.Has(dn, r); err != nil || !has {
					return cmp.Or(err, fmt.Errorf("%s: chain %s lacks rule %s", fam, dn, r))
				}
			}
			for _, want := range entries {
				if err := checkEntry(t, want); err != nil {
					return fmt.Errorf("%s: %w", fam, err)
				}
			}
			return nil
		})
		if err != nil {
			return fmt.Errorf("iptables %w", err)
		}
	}
	return nil
}

// checkEntry verifies that CNI-HOSTPORT-DNAT sends want's ports to its chain: as want
// itself, or grouped otherwise (the reference's entries), in its listing.
func checkEntry(t *iptables.Table, want iptables.Rule) error {
	if has, err := t.Has(iptDNAT, want); err != nil || has {
		return err
	}
	have, err := t.Chain(iptDNAT)
	if err != nil {
		return err
	}
	if have == nil || !coveredBy(have.Rules, want) {
		return fmt.Errorf("%s lacks rule %s", iptDNAT, want)
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
	var ports []string
	for _, r := range have {
		if same(r) {
			p, _ := r.Value("--dports")
			ports = append(ports, strings.Split(p, ",")...)
		}
	}
	w, _ := want.Value("--dports")
	return !slices.ContainsFunc(strings.Split(w, ","), func(port string) bool { return !slices.Contains(ports, port) })
}

func (iptBackend) installed(ctx context.Context) ([]installed, error) {
	seen := map[string]bool{}
	var out []installed
	for _, v6 := range []bool{false, true} {
		fam := iptables.FamilyOf(v6)
		if !iptables.ChainsMayExist(fam, "nat", iptDNAT) {
			continue
		}
		err := iptables.Inspect(ctx, fam, "nat", func(t *iptables.Table) error {
			ch, err := t.Chain(iptDNAT)
			if ch == nil || err != nil {
				return err
			}
			for _, r := range ch.Rules {
				if a, ok := installedFrom(r.Comment(), r.Target(), iptDNPrefix); ok && !seen[a.hash] {
					seen[a.hash] = true
					out = append(out, a)
				}
			}
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("iptables: %w", err)
		}
	}
	return out, nil
}
