package portmap

import (
	"encoding/hex"
	"fmt"
	"slices"
	"strings"

	"github.com/google/nftables"
	"github.com/google/nftables/userdata"

	"crypto/sha256"

	"github.com/cnikit/cni/internal/host/netfilter"
	"github.com/cnikit/cni/internal/host/nftexpr"
)

// A map element is the way from a key (a host port, or a container address in masq)
// to the chain of the attachment that claimed it. Two attachments may claim one key, as
// the reference allows with both backends: a runtime that re-creates a sandbox before
// the old one's DEL maps the same host port again. The element then jumps to a shared
// chain holding one jump per claimant, in the order they came:
//
//	chain sh-<hash of map and key> { jump dn-<A> comment "dnat name: ..."; jump dn-<B> comment "..." }
//
// The first claimant's rules answer (its dnat ends the walk), as the first attachment's
// entry rule does in the iptables layout; a claimant whose conditions do not match
// returns and the next one is tried. Releasing a claim removes only the claimant's jump;
// the element goes back to jumping straight to the last claimant left, and away with
// the last one.
const (
	nftSharedPrefix = "sh-"
	// sharedComment tags an element that jumps to a shared chain; no owner comment
	// parses from it, so GC reads the owners from the chain's rules.
	sharedComment = "dnat shared by several attachments"
)

// claim is one attachment's claim of one key of one map.
type claim struct {
	set     *nftables.Set
	key     []byte
	chain   string // the claimant's chain, dn-<hash> or mq-<hash>
	comment string // the claimant's owner comment
}

func sharedChainName(set string, key []byte) string {
	sum := sha256.Sum256(append([]byte(set+"\x00"), key...))
	return nftSharedPrefix + hex.EncodeToString(sum[:10])
}

// holder returns the element of key; ok is false when there is none.
func (f *nftFamily) holder(s *nftables.Set, key []byte) (e netfilter.Element, ok bool, err error) {
	e, err = netfilter.GetElement(f.table.Family, f.table.Name, s.Name, key)
	if netfilter.IsNotExist(err) {
		return e, false, nil
	}
	if err != nil {
		return e, false, fmt.Errorf("nftables: map %s: %w", s.Name, err)
	}
	return e, true, nil
}

// claimRule is `jump <chain> comment "<owner>"` in a shared chain.
func (f *nftFamily) claimRule(shared *nftables.Chain, chain, comment string) *nftables.Rule {
	return &nftables.Rule{Table: f.table, Chain: shared, Exprs: nftexpr.Jump(chain),
		UserData: userdata.AppendString(nil, userdata.TypeComment, comment)}
}

func ruleComment(r *nftables.Rule) string {
	c, _ := userdata.GetString(r.UserData, userdata.TypeComment)
	return c
}

// jumpsTo reports whether the shared chain has a jump to chain.
func (f *nftFamily) jumpsTo(c *nftables.Conn, shared *nftables.Chain, chain string) (bool, error) {
	rules, err := c.GetRules(f.table, shared)
	if err != nil {
		return false, fmt.Errorf("nftables: chain %s: %w", shared.Name, err)
	}
	return slices.ContainsFunc(rules, func(r *nftables.Rule) bool { return nftexpr.VerdictChain(r.Exprs) == chain }), nil
}

// queueClaim queues what gives cl's chain its way in through the element of cl.key:
// the element itself when the key is free, a jump in the key's shared chain when
// another attachment holds it.
func (f *nftFamily) queueClaim(c *nftables.Conn, cl claim) error {
	e, held, err := f.holder(cl.set, cl.key)
	switch {
	case err != nil:
		return err
	case !held:
		return c.SetAddElements(cl.set, []nftables.SetElement{{Key: cl.key, VerdictData: nftexpr.JumpTo(cl.chain), Comment: cl.comment}})
	case e.VerdictChain == cl.chain:
		return nil
	case strings.HasPrefix(e.VerdictChain, nftSharedPrefix):
		shared := f.chain(e.VerdictChain)
		has, err := f.jumpsTo(c, shared, cl.chain)
		if err == nil && !has {
			c.AddRule(f.claimRule(shared, cl.chain, cl.comment))
		}
		return err
	}
	// Held by another attachment: both now go through a shared chain, the holder first.
	shared := c.AddChain(f.chain(sharedChainName(cl.set.Name, cl.key)))
	c.FlushChain(shared)
	c.AddRule(f.claimRule(shared, e.VerdictChain, e.Comment))
	c.AddRule(f.claimRule(shared, cl.chain, cl.comment))
	return f.repoint(c, cl.set, cl.key, shared.Name, sharedComment)
}

// repoint queues the replacement of the element of key by one jumping to chain.
func (f *nftFamily) repoint(c *nftables.Conn, s *nftables.Set, key []byte, chain, comment string) error {
	if err := c.SetDeleteElements(s, []nftables.SetElement{{Key: key}}); err != nil {
		return err
	}
	return c.SetAddElements(s, []nftables.SetElement{{Key: key, VerdictData: nftexpr.JumpTo(chain), Comment: comment}})
}

// queueRelease queues the removal of chain's claim of key: the element when chain holds
// it alone, else chain's jump in the shared chain (and the shared chain itself when one
// claimant or none is left). A key held by others only is left alone.
func (f *nftFamily) queueRelease(c *nftables.Conn, s *nftables.Set, key []byte, chain string) error {
	e, held, err := f.holder(s, key)
	switch {
	case err != nil || !held:
		return err
	case e.VerdictChain == chain:
		return c.SetDeleteElements(s, []nftables.SetElement{{Key: key}})
	case !strings.HasPrefix(e.VerdictChain, nftSharedPrefix):
		return nil
	}
	shared := f.chain(e.VerdictChain)
	rules, err := c.GetRules(f.table, shared)
	if err != nil {
		return fmt.Errorf("nftables: chain %s: %w", shared.Name, err)
	}
	var mine, rest []*nftables.Rule
	for _, r := range rules {
		if nftexpr.VerdictChain(r.Exprs) == chain {
			mine = append(mine, r)
		} else {
			rest = append(rest, r)
		}
	}
	switch {
	case len(mine) == 0:
		return nil
	case len(rest) == 0:
		if err := c.SetDeleteElements(s, []nftables.SetElement{{Key: key}}); err != nil {
			return err
		}
	case len(rest) == 1:
		if err := f.repoint(c, s, key, nftexpr.VerdictChain(rest[0].Exprs), ruleComment(rest[0])); err != nil {
			return err
		}
	default:
		for _, r := range mine {
			if err := c.DelRule(r); err != nil {
				return err
			}
		}
		return nil
	}
	c.FlushChain(shared)
	c.DelChain(shared)
	return nil
}

// requireClaim checks that chain holds key, alone (the element carries o's comment) or
// in the key's shared chain. One lookup, however many attachments the map holds.
func (f *nftFamily) requireClaim(c *nftables.Conn, s *nftables.Set, key []byte, chain string, o attachment) error {
	e, held, err := f.holder(s, key)
	switch {
	case err != nil:
		return err
	case !held:
		return fmt.Errorf("map %s has no element for it", s.Name)
	case e.VerdictChain == chain && (e.Comment == o.nftComment() || e.Comment == o.nftCommentBefore()):
		return nil
	case strings.HasPrefix(e.VerdictChain, nftSharedPrefix):
		if has, err := f.jumpsTo(c, f.chain(e.VerdictChain), chain); err != nil || has {
			return err
		}
		return fmt.Errorf("map %s sends it to the shared chain %s, which has no jump to %s", s.Name, e.VerdictChain, chain)
	}
	return fmt.Errorf("map %s holds it for another owner (%q)", s.Name, e.Comment)
}
