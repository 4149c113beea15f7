package iptables

import (
	"fmt"
	"strings"
)

// Batch collects the changes of one operation on one table. Each call consults the
// table, reading what it needs of it (Table), records a change only when one is
// needed, and updates the table, so a later call sees the earlier ones (deleting a rule
// twice records one delete).
type Batch struct {
	t     *Table
	lines []string
	err   error
	// created are the chains this batch makes with -N: nothing can jump to them yet,
	// so a jump to one is appended without reading the chain it goes into.
	created map[string]bool
	// unread are the chains the batch changed without listing them (asking about
	// single rules): a listing of one of them now would not show those changes.
	unread map[string]bool
}

// NewBatch starts a batch against a table, which it takes over.
func NewBatch(t *Table) *Batch {
	return &Batch{t: t, created: map[string]bool{}, unread: map[string]bool{}}
}

// Len is the number of recorded restore lines.
func (b *Batch) Len() int { return len(b.lines) }

// Err is the first misuse or failed read recorded: a rule for a chain that does not
// exist, a chain name or rule argument that cannot be written into a restore script
// safely, a listing that failed. A batch with an error records nothing more and must
// not be applied.
func (b *Batch) Err() error { return b.err }

func (b *Batch) fail(err error) {
	if b.err == nil {
		b.err = fmt.Errorf("%s table %s: %w", b.t.Family, b.t.Name, err)
	}
}

// safe reports whether chain and rule (nil for none) may be written into the script; a
// batch that failed once writes nothing more.
func (b *Batch) safe(chain string, r Rule) bool {
	if b.err == nil {
		if err := checkLine(chain, r); err != nil {
			b.fail(err)
		}
	}
	return b.err == nil
}

// Script is the iptables-restore input of the batch; empty when nothing is to be done
// or when the batch recorded an error (it must not be applied in part).
func (b *Batch) Script() string {
	if len(b.lines) == 0 || b.err != nil {
		return ""
	}
	return "*" + b.t.Name + "\n" + strings.Join(b.lines, "\n") + "\nCOMMIT\n"
}

func (b *Batch) add(format string, a ...any) {
	b.lines = append(b.lines, fmt.Sprintf(format, a...))
}

// Chain lists the named chain (Table.Chain), recording a failed read; nil when it does
// not exist or the read failed.
func (b *Batch) Chain(name string) *Chain {
	if b.unread[name] {
		b.fail(fmt.Errorf("chain %s: listed after changes were planned without listing it", name))
		return nil
	}
	c, err := b.t.Chain(name)
	if err != nil {
		b.fail(err)
		return nil
	}
	return c
}

// Prefetch asks the table about the rules the plan will look for (Table.Prefetch), at
// once; a rule jumping to a chain the batch created needs no asking.
func (b *Batch) Prefetch(probes ...Probe) {
	var ask []Probe
	for _, p := range probes {
		if !b.created[p.Rule.Target()] && !b.created[p.Chain] {
			ask = append(ask, p)
		}
	}
	b.t.Prefetch(ask...)
}

// Exists tells whether the named chain exists (Table.Exists), recording a failed read
// as false.
func (b *Batch) Exists(name string) bool {
	if b.unread[name] {
		return true // the batch changed its rules: it is there, and must not be listed now
	}
	ok, err := b.t.Exists(name)
	if err != nil {
		b.fail(err)
	}
	return ok && err == nil
}

// has tells whether chain holds r: never when r jumps to a chain this batch created.
func (b *Batch) has(chain string, r Rule) (bool, bool) {
	if b.created[r.Target()] {
		return false, true
	}
	if _, listed := b.t.listed[chain]; !listed && b.unread[chain] && !askable(r) {
		b.fail(fmt.Errorf("chain %s: %q must be looked for in a listing, after changes were planned without one", chain, r.String()))
		return false, false
	}
	has, err := b.t.Has(chain, r)
	if err != nil {
		b.fail(err)
		return false, false
	}
	return has, true
}

// EnsureChain creates a user chain unless it exists. It uses `-N`, never a `:CHAIN`
// line, which under --noflush would flush a chain that a concurrent writer just filled.
func (b *Batch) EnsureChain(name string) {
	if !b.safe(name, nil) || b.Exists(name) || b.err != nil {
		return
	}
	b.t.listed[name] = &Chain{Name: name, Policy: "-"}
	b.created[name] = true
	b.add("-N %s", name)
}

// AppendRule appends r to chain unless chain already holds the same rule.
func (b *Batch) AppendRule(chain string, r Rule) { b.putRule(chain, r, false) }

// InsertRule puts r first in chain unless chain already holds the same rule (anywhere).
func (b *Batch) InsertRule(chain string, r Rule) { b.putRule(chain, r, true) }

func (b *Batch) putRule(chain string, r Rule, first bool) {
	if !b.safe(chain, r) {
		return
	}
	if !b.Exists(chain) {
		if b.err == nil {
			b.fail(fmt.Errorf("chain %s does not exist", chain))
		}
		return
	}
	if has, ok := b.has(chain, r); has || !ok {
		return
	}
	if c := b.t.listed[chain]; c != nil {
		if first {
			c.insert(0, r)
		} else {
			c.insert(len(c.Rules), r)
		}
	} else {
		b.t.setProbed(chain, r, true)
		b.unread[chain] = true
	}
	if first {
		b.add("-I %s 1 %s", chain, r)
	} else {
		b.add("-A %s %s", chain, r)
	}
}

// DeleteRule deletes the rule of chain that is the same as r, if there is one. The
// delete names the rule as the listing printed it: the tool that printed it reads it
// back as that very rule. In a chain that was not listed, it names r, which iptables
// finds by meaning as -C did.
func (b *Batch) DeleteRule(chain string, r Rule) {
	if !b.safe(chain, r) {
		return
	}
	if has, ok := b.has(chain, r); !has || !ok {
		return
	}
	c := b.t.listed[chain]
	if c == nil {
		b.t.setProbed(chain, r, false)
		b.unread[chain] = true
		b.add("-D %s %s", chain, r)
		return
	}
	i := c.index(r)
	have := c.Rules[i]
	if !b.safe(chain, have) {
		return
	}
	c.remove(i)
	b.add("-D %s %s", chain, have)
}

// SetRules makes chain (created if missing) hold exactly rules, in order: nothing is
// recorded when it already does, else one flush and the appends. A repeated ADD thus
// leaves the chain, and its counters, alone.
func (b *Batch) SetRules(chain string, rules []Rule) {
	b.EnsureChain(chain)
	if b.err != nil {
		return
	}
	c := b.Chain(chain)
	if c == nil || c.Holds(rules) {
		return
	}
	b.FlushChain(chain)
	for _, r := range rules {
		if b.safe(chain, r) {
			c.insert(len(c.Rules), r)
			b.add("-A %s %s", chain, r)
		}
	}
}

// DeleteRulesFunc deletes every rule of chain for which match is true; it is how a
// caller removes rules it can only recognise (by comment or target), not rebuild. It
// lists the chain, a built-in one too.
func (b *Batch) DeleteRulesFunc(chain string, match func(Rule) bool) {
	if !b.safe(chain, nil) {
		return
	}
	c := b.Chain(chain)
	if c == nil {
		return
	}
	for _, r := range append([]Rule(nil), c.Rules...) {
		if match(r) {
			b.DeleteRule(chain, r)
		}
	}
}

// FlushChain removes every rule of chain, if it has any.
func (b *Batch) FlushChain(name string) {
	if !b.safe(name, nil) {
		return
	}
	c := b.Chain(name)
	if c == nil || len(c.Rules) == 0 {
		return
	}
	c.Rules, c.meanings = nil, nil
	b.add("-F %s", name)
}

// DeleteChain flushes and deletes a user chain if it exists. Rules jumping to it must be
// deleted first (earlier in the batch). A chain not listed is flushed without being
// read: its rules are of no interest once it goes.
func (b *Batch) DeleteChain(name string) {
	if !b.safe(name, nil) || b.t.builtin(name) || !b.Exists(name) {
		return
	}
	if c := b.t.listed[name]; c == nil {
		b.add("-F %s", name)
	} else if c.Builtin() {
		return
	} else {
		b.FlushChain(name)
	}
	b.t.listed[name] = nil
	delete(b.created, name)
	b.add("-X %s", name)
}
