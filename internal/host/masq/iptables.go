package masq

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"iter"
	"net/netip"
	"os/exec"
	"slices"
	"strings"

	"github.com/cnikit/cni/internal/host/iptables"
	"github.com/cnikit/cni/internal/host/owner"
)

const natTable = "nat"

var families = [...]iptables.Family{iptables.IPv4, iptables.IPv6}

// iptRules is the reference layout for an attachment's addresses of one family: the
// attachment chain's rules and the POSTROUTING jumps into it.
func iptRules(att Attachment, fam iptables.Family, ips []netip.Prefix) (chain, jumps []iptables.Rule) {
	name := iptChainName(att.Network, att.ContainerID)
	comment := iptComment(att.Network, att.ContainerID)
	multicast := "224.0.0.0/4"
	if fam == iptables.IPv6 {
		multicast = "ff00::/8"
	}
	for _, p := range ips {
		if iptables.FamilyOf(p.Addr().Is6()) != fam {
			continue
		}
		chain = append(chain, iptables.Rule{"-d", p.Masked().String(), "-m", "comment", "--comment", comment, "-j", "ACCEPT"})
		jumps = append(jumps, iptables.Rule{"-s", netip.PrefixFrom(p.Addr(), p.Addr().BitLen()).String(),
			"-m", "comment", "--comment", comment, "-j", name})
	}
	if len(chain) > 0 {
		chain = append(chain, iptables.Rule{"!", "-d", multicast, "-m", "comment", "--comment", comment, "-j", "MASQUERADE"})
	}
	return chain, jumps
}

func iptSetup(ctx context.Context, att Attachment, ips []netip.Prefix) error {
	name := iptChainName(att.Network, att.ContainerID)
	for _, fam := range families {
		chain, jumps := iptRules(att, fam, ips)
		if len(chain) == 0 {
			continue
		}
		// A new chain costs no read (nothing can jump to it yet, so its jumps are
		// appended blind); an existing one is listed, and POSTROUTING asked about each
		// jump alone.
		err := iptables.Update(ctx, fam, natTable, func(b *iptables.Batch) error {
			want := chain
			if b.Exists(name) {
				if c := b.Chain(name); c != nil {
					want = iptMerge(c.Rules, chain)
				}
			}
			b.SetRules(name, want)
			for _, r := range jumps {
				b.AppendRule("POSTROUTING", r)
			}
			return nil
		})
		if err != nil {
			return fmt.Errorf("masquerade %s: %w", fam, err)
		}
	}
	return nil
}

// iptMerge keeps the ACCEPT rules already in an attachment chain (another interface of
// the same container on the same network shares the chain in the reference layout), adds
// the missing ones of want and ends with want's MASQUERADE rule.
func iptMerge(have, want []iptables.Rule) []iptables.Rule {
	var out []iptables.Rule
	for _, r := range have {
		if r.Target() == "ACCEPT" {
			out = append(out, r)
		}
	}
	for _, r := range want[:len(want)-1] {
		if !slices.ContainsFunc(out, r.Same) {
			out = append(out, r)
		}
	}
	return append(out, want[len(want)-1])
}

// iptRemove deletes the jumps into the named chains and the chains themselves. The
// jumps are found in a listing of POSTROUTING: DEL has no addresses to rebuild them.
func iptRemove(b *iptables.Batch, names map[string]bool) {
	if len(names) == 0 {
		return
	}
	b.DeleteRulesFunc("POSTROUTING", func(r iptables.Rule) bool { return names[r.Target()] })
	for name := range names {
		b.DeleteChain(name)
	}
}

func iptTeardown(ctx context.Context, network, containerID string) error {
	name := iptChainName(network, containerID)
	names := map[string]bool{name: true}
	// No chain, so no jump to it either, and no exec spent finding that out.
	mayExist := func(fam iptables.Family) bool { return iptables.ChainsMayExist(fam, natTable, name) }
	return iptEachFamily(ctx, "teardown", mayExist, func(b *iptables.Batch) { iptRemove(b, names) })
}

// iptEachFamily applies plan to the nat table of each family that may hold something
// of ours, and joins the failures; a family without iptables tools is skipped.
func iptEachFamily(ctx context.Context, what string, mayHold func(iptables.Family) bool, plan func(*iptables.Batch)) error {
	var errs []error
	for _, fam := range families {
		if !mayHold(fam) {
			continue
		}
		err := iptables.Update(ctx, fam, natTable, func(b *iptables.Batch) error {
			plan(b)
			return nil
		})
		if errors.Is(err, exec.ErrNotFound) {
			continue // a nat table made by nft itself, and no iptables tools to have used it
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("masquerade %s %s: %w", what, fam, err))
		}
	}
	return errors.Join(errs...)
}

// iptCheck verifies the attachment's chain and jumps in each family it has addresses
// of. Its error is errAbsent only when no family has the chain: one family without it
// is a damaged attachment, not a missing one.
func iptCheck(ctx context.Context, att Attachment, ips []netip.Prefix) error {
	var absent error
	found := false
	for _, fam := range families {
		chain, jumps := iptRules(att, fam, ips)
		if len(chain) == 0 {
			continue
		}
		err := iptables.Inspect(ctx, fam, natTable, func(t *iptables.Table) error {
			return iptCheckTable(t, att, chain, jumps)
		})
		switch {
		case errors.Is(err, errAbsent):
			absent = err
		case err != nil:
			return err
		default:
			found = true
		}
	}
	if absent != nil && found {
		return errors.New(absent.Error()) // the same words, but no longer errAbsent
	}
	return absent
}

// iptCheckTable verifies the attachment's chain (listed) and its jumps (POSTROUTING is
// asked about each, never listed) in one family's nat table.
func iptCheckTable(t *iptables.Table, att Attachment, chain, jumps []iptables.Rule) error {
	name := iptChainName(att.Network, att.ContainerID)
	c, err := t.Chain(name)
	if err != nil {
		return fmt.Errorf("masquerade check: %w", err)
	}
	if c == nil {
		return fmt.Errorf("masquerade check: %s chain %s %w", t.Family, name, errAbsent)
	}
	if n := len(c.Rules); n == 0 || !c.Rules[n-1].Same(chain[len(chain)-1]) {
		return fmt.Errorf("masquerade check: %s chain %s does not end in MASQUERADE", t.Family, name)
	}
	for _, r := range chain {
		if !c.Has(r) {
			return fmt.Errorf("masquerade check: %s chain %s lacks %q", t.Family, name, r.String())
		}
	}
	for _, r := range jumps {
		has, err := t.Has("POSTROUTING", r)
		if err != nil {
			return fmt.Errorf("masquerade check: %w", err)
		}
		if !has {
			return fmt.Errorf("masquerade check: %s POSTROUTING lacks %q", t.Family, r.String())
		}
	}
	return nil
}

// iptGC removes the chains (and jumps) of network's attachments whose container is not
// valid. They are found from their jumps in POSTROUTING, which carry the attachment's
// comment: one listing of that chain, none of the table. A jump is recognised by its
// comment naming the network and by its target being the chain that network and
// container give, so nothing of another network or plugin is touched. The reference
// layout is keyed by container only, so the interface name of a valid attachment does
// not matter here. A chain whose jump was deleted by hand is not found; its DEL still
// removes it.
func iptGC(ctx context.Context, network string, valid iter.Seq2[string, string]) error {
	var ids []string
	for cid := range valid {
		ids = append(ids, cid)
	}
	keep := owner.NewSet(ids...)
	inUse := func(fam iptables.Family) bool { return iptables.TableInUse(fam, natTable) }
	return iptEachFamily(ctx, "gc", inUse, func(b *iptables.Batch) {
		stale := map[string]bool{}
		if post := b.Chain("POSTROUTING"); post != nil {
			for _, r := range post.Rules {
				if id, ok := iptOwnedBy(network, r.Target(), r.Comment()); ok && !keep.Has(id) {
					stale[r.Target()] = true
				}
			}
		}
		iptRemove(b, stale)
	})
}

// iptOwnedBy returns the container field of the comment of a rule in chain when the
// rule is an attachment rule of network: the comment names network and the chain is the
// one the container gives (for a hashed container field, one of the attachment chains'
// shape, "CNI-" and 24 hex digits).
func iptOwnedBy(network, chain, comment string) (string, bool) {
	net, id, ok := owner.Parse("", comment)
	if !ok || !owner.Names(net, network) {
		return "", false
	}
	if owner.IsHashed(id) {
		rest, ok := strings.CutPrefix(chain, "CNI-")
		_, err := hex.DecodeString(rest)
		return id, ok && len(rest) == 24 && err == nil
	}
	return id, iptChainName(network, id) == chain
}
