package iptables

import (
	"fmt"
	"strings"
)

// Batch collects the changes of one operation on one table. Each call consults the
// snapshot and records a change only when it is needed, and updates the snapshot, so a
// later call sees the earlier ones (deleting a rule twice records one delete).
type Batch struct {
	t     *Table
	lines []string
	err   error
}

// NewBatch starts a batch against a snapshot, which it takes over.
func NewBatch(t *Table) *Batch { return &Batch{t: t} }

// Table is the snapshot as changed by the batch so far.
func (b *Batch) Table() *Table { return b.t }

// Len is the number of recorded restore lines.
func (b *Batch) Len() int { return len(b.lines) }

// Err is the first misuse recorded: a rule for a chain that does not exist, or a chain
// name or rule argument that cannot be written into a restore script safely. A batch
// with an error records nothing more and must not be applied.
func (b *Batch) Err() error { return b.err }

func (b *Batch) fail(err error) {
	if b.err == nil {
		b.err = fmt.Errorf("%s table %s: %w", b.t.Family, b.t.Name, err)
	}
}

// safe reports whether chain and rule (nil for none) may be written into the script; a
// batch that failed once writes nothing more.
func (b *Batch) safe(chain string, r Rule) bool {
	if b.err != nil {
		return false
	}
	if err := CheckChainName(chain); err != nil {
		b.fail(err)
		return false
	}
	if err := r.check(); err != nil {
		b.fail(fmt.Errorf("chain %s: %w", chain, err))
		return false
	}
	return true
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

func (b *Batch) chain(name string) *Chain {
	c := b.t.Chain(name)
	if c == nil {
		b.fail(fmt.Errorf("chain %s does not exist", name))
	}
	return c
}

// EnsureChain creates a user chain unless it exists. It uses `-N`, never a `:CHAIN`
// line, which under --noflush would flush a chain that a concurrent writer just filled.
func (b *Batch) EnsureChain(name string) {
	if !b.safe(name, nil) || b.t.Chain(name) != nil {
		return
	}
	b.t.addChain(name, "-")
	b.add("-N %s", name)
}

// AppendRule appends r to chain unless chain already holds the same rule.
func (b *Batch) AppendRule(chain string, r Rule) {
	if !b.safe(chain, r) {
		return
	}
	c := b.chain(chain)
	if c == nil || c.Has(r) {
		return
	}
	c.insert(len(c.Rules), r)
	b.add("-A %s %s", chain, r)
}

// InsertRule puts r first in chain unless chain already holds the same rule (anywhere).
func (b *Batch) InsertRule(chain string, r Rule) {
	if !b.safe(chain, r) {
		return
	}
	c := b.chain(chain)
	if c == nil || c.Has(r) {
		return
	}
	c.insert(0, r)
	b.add("-I %s 1 %s", chain, r)
}

// DeleteRule deletes the rule of chain that is the same as r, if there is one. The
// delete names the rule as the snapshot printed it: the tool that printed it reads it
// back as that very rule.
func (b *Batch) DeleteRule(chain string, r Rule) {
	if !b.safe(chain, r) {
		return
	}
	c := b.t.Chain(chain)
	if c == nil {
		return
	}
	i := c.index(r)
	if i < 0 {
		return
	}
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
	c := b.t.Chain(chain)
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
// caller removes rules it can only recognise (by comment or target), not rebuild.
func (b *Batch) DeleteRulesFunc(chain string, match func(Rule) bool) {
	c := b.t.Chain(chain)
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
	c := b.t.Chain(name)
	if c == nil || len(c.Rules) == 0 {
		return
	}
	c.clear()
	b.add("-F %s", name)
}

// DeleteChain flushes and deletes a user chain if it exists. Rules jumping to it must be
// deleted first (earlier in the batch).
func (b *Batch) DeleteChain(name string) {
	if !b.safe(name, nil) {
		return
	}
	c := b.t.Chain(name)
	if c == nil || c.Builtin() {
		return
	}
	b.FlushChain(name)
	delete(b.t.chains, name)
	b.add("-X %s", name)
}
