package portmap

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/google/nftables"

	"github.com/cnikit/cni/internal/core/steps"
	"github.com/cnikit/cni/internal/host/netfilter"
	"github.com/cnikit/cni/internal/host/nftexpr"
)

// nftBackend installs port mappings with nftables over netlink, and with one `nft`
// exec per family for conditions that only nft compiles.
type nftBackend struct {
	// conn is added to the options of every connection; tests record what is sent
	// through it (nftrecord). Nil talks to the kernel straight.
	conn nftables.ConnOption
}

func (b nftBackend) newConn() (*nftables.Conn, error) {
	opts := []nftables.ConnOption{nftables.AsLasting()}
	if b.conn != nil {
		opts = append(opts, b.conn)
	}
	c, err := nftables.New(opts...)
	if err != nil {
		return nil, fmt.Errorf("nftables: open netlink: %w", err)
	}
	return c, nil
}

// inTransaction runs plan on a fresh connection and sends what it queued as one
// transaction: a plan that fails half-way leaves nothing queued for the next one.
func (b nftBackend) inTransaction(plan func(c *nftables.Conn) error) error {
	c, err := b.newConn()
	if err != nil {
		return err
	}
	defer c.CloseLasting()
	if err := plan(c); err != nil {
		return err
	}
	return c.Flush()
}

// add installs (or replaces) the attachment's mappings of every family in one
// transaction (one commit where a dual-stack pod took two; a host's nf_tables commits
// take turns), then the gate rule of conditions only nft compiles.
func (b nftBackend) add(ctx context.Context, o attachment, s *settings, fams []family) (err error) {
	defer steps.Begin(ctx, steps.Firewall).End(&err)
	type part struct {
		f    *nftFamily
		fa   family
		plan condPlan
	}
	parts := make([]part, len(fams))
	for i, fa := range fams {
		parts[i] = part{newNFTFamily(fa.v6), fa, planConditions(condField(fa.v6), fa.conds, fa.v6)}
	}
	install := func(parts []part, repair bool) func(c *nftables.Conn) error {
		return func(c *nftables.Conn) error {
			for _, p := range parts {
				if err := p.f.install(c, o, s, p.fa, p.plan, repair); err != nil {
					return err
				}
			}
			return nil
		}
	}
	if err := b.inTransaction(install(parts, false)); err != nil {
		// One family's state did not match its records (something removed by hand), or
		// another ADD or DEL changed a shared key between our reads and our transaction:
		// each family alone, and the one that fails again is cleared the slow way and
		// installed afresh, with the base layout declared again in case part of it was
		// removed.
		for _, p := range parts {
			if b.inTransaction(install([]part{p}, false)) == nil {
				continue
			}
			if serr := b.inTransaction(func(c *nftables.Conn) error { return p.f.sweep(c, o.hash()) }); serr != nil {
				return fmt.Errorf("nftables: port mappings of %s: %w (cleanup: %v)", o.cid, err, serr)
			}
			if err := b.inTransaction(install([]part{p}, true)); err != nil {
				return fmt.Errorf("nftables: install port mappings of %s: %w", o.cid, err)
			}
		}
	}
	for _, p := range parts {
		if p.plan.text != "" {
			if err := writeGate(ctx, p.plan.field, p.f.gateScript(o.hash(), p.plan.text)); err != nil {
				return err
			}
		}
	}
	return nil
}

func condField(v6 bool) string {
	if v6 {
		return "conditionsV6"
	}
	return "conditionsV4"
}

// install queues the attachment's chains and rules, its claims of map keys and the
// release of keys it held before and no longer maps. The base layout is declared when
// the shared chains' rules are not what ensureBase writes (the table missing, a chain
// flushed or deleted, a rule deleted by hand), or always with repair. Reading them is
// four small rule dumps; rewriting them in every ADD, as the reference does, costs
// more than the messages: the old rules are freed after an RCU grace period, which the
// next close of any nf_tables socket waits for (10-15 ms here, at the exit of an exec'd
// plugin).
func (f *nftFamily) install(c *nftables.Conn, o attachment, s *settings, fa family, plan condPlan, repair bool) error {
	hash := o.hash()
	old, err := f.stateOf(c, hash)
	if err != nil {
		return err
	}
	if repair || !f.baseIntact(c) {
		if err := f.ensureBase(c); err != nil {
			return err
		}
	}
	dn := c.AddChain(f.chain(nftDNPrefix + hash))
	if old.exists {
		c.FlushChain(dn)
	}
	dnat := dn
	if plan.text != "" {
		dnat = c.AddChain(f.chain(nftDMPrefix + hash))
		c.FlushChain(dnat)
	} else if old.gated {
		f.queueDelChain(c, nftDMPrefix+hash)
	}
	var maps []nftMapping
	for _, m := range fa.mappings {
		nm := nftMapping{mapping: m, target: fa.addr.Addr()}
		maps = append(maps, nm)
		c.AddRule(f.dnatRule(dnat, o, nm, plan.exprs))
	}
	if err := f.queueClaims(c, o, dn.Name, old.maps, maps); err != nil {
		return err
	}
	return f.queueMasq(c, o, s, fa, old, maps)
}

// queueClaims releases the keys the attachment held and no longer maps and claims the
// ones it maps, each key once.
func (f *nftFamily) queueClaims(c *nftables.Conn, o attachment, dn string, old, maps []nftMapping) error {
	mapped := map[string]bool{}
	for _, m := range maps {
		mapped[f.keyID(m)] = true
	}
	err := f.eachKey(old, mapped, func(m nftMapping) error { return f.queueRelease(c, f.mapOf(m), m.key(), dn) })
	if err != nil {
		return err
	}
	return f.eachKey(maps, map[string]bool{}, func(m nftMapping) error {
		return f.queueClaim(c, claim{set: f.mapOf(m), key: m.key(), chain: dn, comment: o.nftComment()})
	})
}

// eachKey calls fn with the mappings of ms whose key is not in done, one per key (two
// mappings may share one, and a second change of one element fails the whole
// transaction), and adds their keys to done.
func (f *nftFamily) eachKey(ms []nftMapping, done map[string]bool, fn func(nftMapping) error) error {
	for _, m := range ms {
		if id := f.keyID(m); !done[id] {
			done[id] = true
			if err := fn(m); err != nil {
				return err
			}
		}
	}
	return nil
}

// queueMasq gives the attachment its mq- chain and its claim of the container address
// in masq when snat is on, and takes both away when it is off.
func (f *nftFamily) queueMasq(c *nftables.Conn, o attachment, s *settings, fa family, old nftState, maps []nftMapping) error {
	mq, target := nftMasqPrefix+o.hash(), fa.addr.Addr()
	if old.masq {
		for t := range old.targets() {
			if !s.snat || t != target {
				if err := f.queueRelease(c, f.masq, t.AsSlice(), mq); err != nil {
					return err
				}
			}
		}
	}
	if !s.snat {
		if old.masq {
			f.queueDelChain(c, mq)
		}
		return nil
	}
	ch := c.AddChain(f.chain(mq))
	if old.masq {
		c.FlushChain(ch)
	}
	for _, r := range f.masqRules(ch, o, fa.addr, maps, s.masqAll) {
		c.AddRule(r)
	}
	return f.queueClaim(c, claim{set: f.masq, key: target.AsSlice(), chain: mq, comment: o.nftComment()})
}

// del removes the attachment named by hash from both families, in one transaction,
// and returns what it had installed.
func (b nftBackend) del(ctx context.Context, hash string) (_ []flow, err error) {
	defer steps.Begin(ctx, steps.Firewall).End(&err)
	fams := []*nftFamily{newNFTFamily(false), newNFTFamily(true)}
	var flows []flow
	if err := b.inTransaction(func(c *nftables.Conn) error {
		var err error
		flows, err = queueRemoveAll(c, hash, fams)
		return err
	}); err == nil {
		return flows, nil
	}
	// One family's state did not match its records: each family alone, and the slow
	// way for the one that fails again.
	flows = nil
	for _, f := range fams {
		var got []flow
		err := b.inTransaction(func(c *nftables.Conn) error {
			var err error
			got, err = queueRemoveAll(c, hash, []*nftFamily{f})
			return err
		})
		if err != nil {
			if err := b.inTransaction(func(c *nftables.Conn) error { return f.sweep(c, hash) }); err != nil {
				return nil, fmt.Errorf("nftables: remove port mappings of %s: %w", nftDNPrefix+hash, err)
			}
		}
		flows = append(flows, got...)
	}
	return flows, nil
}

// queueRemoveAll reads the attachment's state in each family, queues its removal and
// returns the mappings it had.
func queueRemoveAll(c *nftables.Conn, hash string, fams []*nftFamily) ([]flow, error) {
	var flows []flow
	for _, f := range fams {
		st, err := f.stateOf(c, hash)
		if err != nil {
			return flows, err
		}
		if st.exists {
			if err := f.queueRemove(c, hash, st); err != nil {
				return flows, err
			}
		}
		for _, m := range st.maps {
			flows = append(flows, flow{proto: m.proto, hostPort: m.hostPort, target: m.target})
		}
	}
	return flows, nil
}

// check verifies that every mapping has its rule and its claim of its key, that the
// conditions nft compiles have their gate, and the masquerade claim when snat is on.
func (b nftBackend) check(ctx context.Context, o attachment, s *settings, fams []family) (err error) {
	defer steps.Begin(ctx, steps.Firewall).End(&err)
	c, err := b.newConn()
	if err != nil {
		return err
	}
	defer c.CloseLasting()
	dn, mq := nftDNPrefix+o.hash(), nftMasqPrefix+o.hash()
	for _, fa := range fams {
		f := newNFTFamily(fa.v6)
		st, err := f.stateOf(c, o.hash())
		if err != nil {
			return err
		}
		if plan := planConditions(condField(fa.v6), fa.conds, fa.v6); (plan.text != "") != st.gated {
			return fmt.Errorf("nftables: %s: the rule of the conditions is missing or stale in %s", plan.field, dn)
		}
		target := fa.addr.Addr()
		for _, m := range fa.mappings {
			want := nftMapping{mapping: m, target: target}
			if !slices.ContainsFunc(st.maps, func(h nftMapping) bool { return h.record() == want.record() }) {
				return fmt.Errorf("nftables: no rule for port mapping %s", want.record())
			}
			if err := f.requireClaim(c, f.mapOf(want), want.key(), dn, o); err != nil {
				return fmt.Errorf("nftables: port mapping %s: %w", want.record(), err)
			}
		}
		if s.snat {
			if err := f.requireClaim(c, f.masq, target.AsSlice(), mq, o); err != nil {
				return fmt.Errorf("nftables: masquerade for %s: %w", target, err)
			}
		}
	}
	return nil
}

// installed lists the attachments that claim keys in the family's maps, from the owner
// comments of the elements, or of the jumps of the shared chains they go to.
func (b nftBackend) installed(_ context.Context) ([]installed, error) {
	c, err := b.newConn()
	if err != nil {
		return nil, err
	}
	defer c.CloseLasting()
	seen := map[string]bool{}
	var out []installed
	add := func(comment, chain, prefix string) {
		if a, ok := installedFrom(comment, chain, prefix); ok && !seen[a.hash] {
			seen[a.hash] = true
			out = append(out, a)
		}
	}
	for _, v6 := range []bool{false, true} {
		f := newNFTFamily(v6)
		for _, s := range []*nftables.Set{f.hostIPPorts, f.ports, f.masq} {
			prefix := nftDNPrefix
			if s == f.masq {
				prefix = nftMasqPrefix
			}
			if err := f.eachClaim(c, s, func(comment, chain string) { add(comment, chain, prefix) }); err != nil {
				return nil, err
			}
		}
	}
	return out, nil
}

// eachClaim calls fn with the owner comment and chain of every claim in map s: an
// element's own, or those of the jumps in the shared chain it goes to.
func (f *nftFamily) eachClaim(c *nftables.Conn, s *nftables.Set, fn func(comment, chain string)) error {
	elems, err := c.GetSetElements(s)
	if netfilter.IsNotExist(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("nftables: list map %s: %w", s.Name, err)
	}
	for _, e := range elems {
		chain := netfilter.VerdictChain(e.Val)
		if !strings.HasPrefix(chain, nftSharedPrefix) {
			fn(e.Comment, chain)
			continue
		}
		rules, err := f.rules(c, chain)
		if err != nil {
			return err
		}
		for _, r := range rules {
			fn(ruleComment(r), nftexpr.VerdictChain(r.Exprs))
		}
	}
	return nil
}
