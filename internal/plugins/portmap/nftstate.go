package portmap

import (
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strings"

	"github.com/google/nftables"
	"github.com/google/nftables/userdata"

	"github.com/cnikit/cni/internal/host/netfilter"
	"github.com/cnikit/cni/internal/host/nftexpr"
)

// nftState is what the kernel holds of one attachment in one family's table, read from
// its own chains.
type nftState struct {
	// exists tells that the dn- chain exists.
	exists bool
	// maps are the mappings its dnat rules record.
	maps []nftMapping
	// gated tells that the dnat rules sit in dm-, behind the rule nft wrote in dn-.
	gated bool
	// masq tells that the mq- chain exists.
	masq bool
}

// targets are the container addresses the mappings go to.
func (st nftState) targets() map[netip.Addr]bool {
	out := map[netip.Addr]bool{}
	for _, m := range st.maps {
		out[m.target] = true
	}
	return out
}

// stateOf reads the attachment named by hash: its dn- chain (and dm- when dn- goes
// there) and whether it has an mq- chain. A missing table or chain reads as nothing.
func (f *nftFamily) stateOf(c *nftables.Conn, hash string) (nftState, error) {
	var st nftState
	rules, err := f.rules(c, nftDNPrefix+hash)
	if err != nil {
		return st, err
	}
	st.exists = rules != nil
	st.maps = records(rules)
	st.gated = slices.ContainsFunc(rules, func(r *nftables.Rule) bool { return nftexpr.VerdictChain(r.Exprs) == nftDMPrefix+hash })
	if st.gated {
		gated, err := f.rules(c, nftDMPrefix+hash)
		if err != nil {
			return st, err
		}
		st.maps = append(st.maps, records(gated)...)
	}
	if st.exists {
		st.masq, err = f.chainExists(c, nftMasqPrefix+hash)
	}
	return st, err
}

// rules lists a chain's rules: nil when the chain does not exist, an empty list when it
// is empty.
func (f *nftFamily) rules(c *nftables.Conn, name string) ([]*nftables.Rule, error) {
	rules, err := c.GetRules(f.table, f.chain(name))
	if err != nil && !netfilter.IsNotExist(err) {
		return nil, fmt.Errorf("nftables: list %s: %w", name, err)
	}
	if len(rules) > 0 {
		return rules, nil
	}
	// A rule dump filtered by table and chain answers nothing, not ENOENT, when either
	// is missing: only a lookup of the chain tells an empty chain from none (DEL of a
	// pod without mappings, or of the family it did not map, took "empty" for "there"
	// and deleted a chain that was not, failing into the sweep).
	exists, err := f.chainExists(c, name)
	if err != nil || !exists {
		return nil, err
	}
	return []*nftables.Rule{}, nil
}

// records reads the mappings dnat rules record in their userdata.
func records(rules []*nftables.Rule) []nftMapping {
	var out []nftMapping
	for _, r := range rules {
		if rec, ok := userdata.GetString(r.UserData, udMapping); ok {
			if m, ok := parseRecord(rec); ok {
				out = append(out, m)
			}
		}
	}
	return out
}

// chainExists looks the chain up; a missing table or chain is false, any other
// failure an error.
func (f *nftFamily) chainExists(c *nftables.Conn, name string) (bool, error) {
	ch, err := netfilter.LookupChain(c, f.table, name)
	return ch != nil, err
}

// queueDelChain queues a chain's flush and deletion.
func (f *nftFamily) queueDelChain(c *nftables.Conn, name string) {
	c.FlushChain(f.chain(name))
	c.DelChain(f.chain(name))
}

// queueRemove queues the removal of what st says the attachment named by hash has:
// its claims of map keys, each key once (two mappings may share one, and a second
// deletion of one element fails the whole transaction), then its chains.
func (f *nftFamily) queueRemove(c *nftables.Conn, hash string, st nftState) error {
	dn, mq := nftDNPrefix+hash, nftMasqPrefix+hash
	err := f.eachKey(st.maps, map[string]bool{}, func(m nftMapping) error { return f.queueRelease(c, f.mapOf(m), m.key(), dn) })
	if err != nil {
		return err
	}
	if st.masq {
		for t := range st.targets() {
			if err := f.queueRelease(c, f.masq, t.AsSlice(), mq); err != nil {
				return err
			}
		}
	}
	if st.exists {
		f.queueDelChain(c, dn)
	}
	if st.gated {
		f.queueDelChain(c, nftDMPrefix+hash)
	}
	if st.masq {
		f.queueDelChain(c, mq)
	}
	return nil
}

// sweep is the slow path for state that does not match its records (an element or a
// rule removed by hand): it scans the maps for elements reaching the attachment's
// chains and every shared chain for jumps to them, removes those ways in and the
// chains, and shared chains no element reaches. It reads every element and every rule
// of the table, so it runs only when the fast path failed; nothing of other tables (the
// family's chain dump would hold kube-proxy's thousands). The shared chains are those
// the elements reach and those holding rules: one left empty, which nothing reaches and
// which jumps nowhere, stays until an ADD that shares its key reuses it.
func (f *nftFamily) sweep(c *nftables.Conn, hash string) error {
	mine := map[string]bool{nftDNPrefix + hash: true, nftDMPrefix + hash: true, nftMasqPrefix + hash: true}
	toShared, err := f.dropElements(c, mine)
	if err != nil {
		return err
	}
	chains, err := netfilter.ChainsWithRules(f.table.Family, nftTableName)
	if err != nil {
		return err
	}
	shared := maps.Clone(toShared)
	for _, name := range chains {
		if _, ok := shared[name]; !ok && strings.HasPrefix(name, nftSharedPrefix) {
			shared[name] = nil
		}
	}
	for _, name := range slices.Sorted(maps.Keys(shared)) {
		if err := f.sweepShared(c, name, shared[name], mine); err != nil {
			return err
		}
	}
	for name := range mine {
		exists, err := f.chainExists(c, name)
		if err != nil {
			return err
		}
		if exists {
			f.queueDelChain(c, name)
		}
	}
	return nil
}

// mapElement is one element of a map, named by its map and its key.
type mapElement struct {
	set *nftables.Set
	key []byte
}

// dropElements queues the deletion of the elements of the family's maps that reach a
// chain in mine, and returns those reaching shared chains, by chain.
func (f *nftFamily) dropElements(c *nftables.Conn, mine map[string]bool) (map[string][]mapElement, error) {
	toShared := map[string][]mapElement{}
	for _, s := range []*nftables.Set{f.hostIPPorts, f.ports, f.masq} {
		elems, err := c.GetSetElements(s)
		if netfilter.IsNotExist(err) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("nftables: list map %s: %w", s.Name, err)
		}
		for _, e := range elems {
			switch chain := netfilter.VerdictChain(e.Val); {
			case mine[chain]:
				if err := c.SetDeleteElements(s, []nftables.SetElement{{Key: e.Key}}); err != nil {
					return nil, err
				}
			case strings.HasPrefix(chain, nftSharedPrefix):
				toShared[chain] = append(toShared[chain], mapElement{s, e.Key})
			}
		}
	}
	return toShared, nil
}

// sweepShared queues the deletion of the shared chain when no element reaches it (elems
// empty) or it jumps only to chains in mine (with the elements reaching it then), and
// else of its jumps to mine.
func (f *nftFamily) sweepShared(c *nftables.Conn, name string, elems []mapElement, mine map[string]bool) error {
	if len(elems) > 0 {
		onlyMine, err := f.dropJumps(c, name, mine)
		if err != nil || !onlyMine {
			return err
		}
		for _, e := range elems {
			if err := c.SetDeleteElements(e.set, []nftables.SetElement{{Key: e.key}}); err != nil {
				return err
			}
		}
	}
	f.queueDelChain(c, name)
	return nil
}

// dropJumps queues the deletion of the shared chain's jumps to the chains in mine;
// onlyMine tells that it holds no other (the caller deletes the chain then).
func (f *nftFamily) dropJumps(c *nftables.Conn, shared string, mine map[string]bool) (onlyMine bool, err error) {
	rules, err := f.rules(c, shared)
	if err != nil {
		return false, err
	}
	n := len(rules)
	drop := slices.DeleteFunc(rules, func(r *nftables.Rule) bool { return !mine[nftexpr.VerdictChain(r.Exprs)] })
	if len(drop) == n {
		return true, nil
	}
	for _, r := range drop {
		if err := c.DelRule(r); err != nil {
			return false, err
		}
	}
	return false, nil
}
