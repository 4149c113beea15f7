// Package iptables reads and changes iptables rules for every plugin that keeps an
// iptables layout (masquerade, portmap, firewall), reading only the chains it touches.
// A change is planned against a Table, a view of one table that lists a chain with
// `iptables -S CHAIN` the first time the plan asks for it and answers "does this
// built-in chain hold this rule" with `iptables -C`, and is applied as one
// iptables-restore --noflush batch. Nothing reads a whole table: on a node whose nat
// table holds kube-proxy's rules for thousands of Services, iptables-save of it takes
// hundreds of milliseconds, a listing of one of our chains a few (issue 35). With
// iptables-nft, whether a chain exists is asked over netlink first, so a chain that
// does not exist costs no exec; and since no rule can jump to a chain that does not
// exist, a jump to a chain the batch itself creates is written without reading the
// chain it goes into.
//
// Rules are argument lists compared by meaning, not by text (Rule.Same): "is this rule
// present" must hold whichever iptables (legacy or nft, any version) printed the
// listing, and whoever wrote the rule. A rule is deleted by the text the listing
// printed for it (or, in a built-in chain asked with -C, by ours: iptables -D finds a
// rule by meaning, as -C does).
//
// Concurrent writers are handled optimistically: a new chain is declared with `-N`,
// which fails if another process created it in the meantime (a `:CHAIN` line would
// silently flush it under --noflush), and a rule is deleted only if the listing holds
// it. A failed restore is retried with fresh reads when the fresh plan differs.
package iptables

import (
	"bufio"
	"fmt"
	"slices"
	"strings"

	"github.com/cnikit/cni/internal/host/netfilter"
)

// Family is the IP family whose tools (iptables-* or ip6tables-*) are used.
type Family int

// The families.
const (
	IPv4 Family = 4
	IPv6 Family = 6
)

// FamilyOf is IPv6 for v6, else IPv4.
func FamilyOf(v6 bool) Family {
	if v6 {
		return IPv6
	}
	return IPv4
}

func (f Family) String() string {
	if f == IPv6 {
		return "ip6tables"
	}
	return "iptables"
}

// MaxComment is the longest text the comment match keeps (XT_MAX_COMMENT_LEN - 1):
// iptables-legacy refuses a longer one, iptables-nft cuts it silently.
const MaxComment = 255

// MaxChainName is the longest chain name iptables accepts (XT_EXTENSION_MAXNAMELEN - 1).
const MaxChainName = 28

// CheckChainName refuses a name iptables would reject as a chain name or that could not
// stand as one token in a restore script: 1-28 printable ASCII characters without
// blanks, quotes or backslashes, not starting with '-' or '!'.
func CheckChainName(name string) error {
	switch {
	case name == "":
		return fmt.Errorf("chain name is empty")
	case len(name) > MaxChainName:
		return fmt.Errorf("chain name %q is longer than %d characters", name, MaxChainName)
	case name[0] == '-' || name[0] == '!':
		return fmt.Errorf("chain name %q must not start with '-' or '!'", name)
	}
	if i := strings.IndexFunc(name, func(r rune) bool { return r <= ' ' || r > '~' || r == '"' || r == '\'' || r == '\\' }); i >= 0 {
		return fmt.Errorf("chain name %q contains %q: only printable ASCII without blanks, quotes or backslashes", name, name[i])
	}
	return nil
}

// Chain is one chain as a listing printed it.
type Chain struct {
	Name string
	// Policy is ACCEPT/DROP for a built-in chain and "-" for a user chain.
	Policy string
	// Rules are the chain's rules in order, as iptables printed them. Only the chain's
	// methods (through Batch) change them, so meanings stays in step.
	Rules []Rule
	// meanings caches Rules[i].meaning(): a plan asks "is this rule there" once per
	// rule it wants, against chains of hundreds of rules.
	meanings []string
}

// Builtin reports whether c is one of the table's built-in chains.
func (c *Chain) Builtin() bool { return c.Policy != "-" }

// Has reports whether c holds a rule that is the same as r (Rule.Same).
func (c *Chain) Has(r Rule) bool { return c.index(r) >= 0 }

// Holds reports whether c holds exactly want, in order (each rule the same as
// Rule.Same tells).
func (c *Chain) Holds(want []Rule) bool {
	if len(c.Rules) != len(want) {
		return false
	}
	c.cacheMeanings()
	return slices.EqualFunc(c.meanings, want, func(m string, r Rule) bool { return m == r.meaning() })
}

func (c *Chain) index(r Rule) int {
	c.cacheMeanings()
	return slices.Index(c.meanings, r.meaning())
}

func (c *Chain) cacheMeanings() {
	if len(c.meanings) == len(c.Rules) {
		return
	}
	c.meanings = make([]string, len(c.Rules))
	for i, r := range c.Rules {
		c.meanings[i] = r.meaning()
	}
}

func (c *Chain) insert(i int, r Rule) {
	c.cacheMeanings()
	c.Rules = slices.Insert(c.Rules, i, r)
	c.meanings = slices.Insert(c.meanings, i, r.meaning())
}

func (c *Chain) remove(i int) {
	c.cacheMeanings()
	c.Rules = slices.Delete(c.Rules, i, i+1)
	c.meanings = slices.Delete(c.meanings, i, i+1)
}

// source answers a Table's reads: the iptables tools of the node (execSource), or a
// listing that is the whole table (ParseRules).
type source interface {
	// exists tells whether the kernel holds chain, when it can tell without an exec
	// (known false: it cannot).
	exists(chain string) (exists, known bool)
	// list reads chain; nil when it does not exist.
	list(chain string) (*Chain, error)
	// check tells whether chain holds a rule that means what r means.
	check(chain string, r Rule) (bool, error)
	// checkFirst asks about several rules at once and returns how many of them, from
	// the first, the chains hold: all of them, or up to one they do not hold (err nil)
	// or one iptables refused to look for (err names it). n < 0 is a failure that
	// tells nothing.
	checkFirst(probes []Probe) (n int, err error)
}

// Probe is a question to a chain: does it hold Rule?
type Probe struct {
	Chain string
	Rule  Rule
}

// Table is a view of one table of one family that reads each chain when first asked
// and remembers what it read; a Batch keeps it in step with the changes it records.
type Table struct {
	Family Family
	Name   string
	src    source
	// listed holds each chain read whole so far; a nil value is a chain that does not
	// exist.
	listed map[string]*Chain
	// exist is what is known of the existence of chains not listed.
	exist map[string]bool
	// probed holds, per chain not listed, whether it holds each rule asked about, by
	// the rule's meaning.
	probed map[string]map[string]bool
}

func newTable(fam Family, table string, src source) *Table {
	return &Table{Family: fam, Name: table, src: src, listed: map[string]*Chain{}, exist: map[string]bool{}, probed: map[string]map[string]bool{}}
}

// builtin reports whether chain is one of the table's built-in chains: they always exist
// for iptables, so one that the kernel does not hold yet is an empty chain, not a
// missing one.
func (t *Table) builtin(chain string) bool { return netfilter.IsBuiltinChain(t.Name, chain) }

// Chain lists the named chain, once; nil when it does not exist. A built-in chain
// always exists.
func (t *Table) Chain(name string) (*Chain, error) {
	if c, ok := t.listed[name]; ok {
		return c, nil
	}
	var c *Chain
	if e, known := t.kernelHolds(name); !known || e {
		var err error
		if c, err = t.src.list(name); err != nil {
			return nil, err
		}
	}
	if c == nil && t.builtin(name) {
		c = &Chain{Name: name, Policy: "ACCEPT"} // not made yet: empty
	}
	t.listed[name] = c
	delete(t.probed, name)
	return c, nil
}

// Exists tells whether the named chain exists, without listing it where the kernel can
// tell (iptables-nft).
func (t *Table) Exists(name string) (bool, error) {
	if c, ok := t.listed[name]; ok {
		return c != nil, nil
	}
	if t.builtin(name) {
		return true, nil
	}
	if e, known := t.kernelHolds(name); known {
		return e, nil
	}
	c, err := t.Chain(name)
	return c != nil, err
}

// kernelHolds is source.exists, remembered.
func (t *Table) kernelHolds(name string) (exists, known bool) {
	if e, ok := t.exist[name]; ok {
		return e, true
	}
	e, known := t.src.exists(name)
	if known {
		t.exist[name] = e
	}
	return e, known
}

// Has tells whether chain holds a rule that is the same as r. A chain that was listed
// answers from its listing; any other is asked about r alone (iptables -C), not
// listed (a built-in chain holds the host's rules too, and a chain of ours may hold one
// rule per pod), when r has one match at most: -C compares matches in the order they
// were written, so a rule of several matches, which the reference, an operator or an
// older release may have written in another order, is looked for in a listing of its
// chain. A jump to a chain known not to exist is absent without asking.
func (t *Table) Has(chain string, r Rule) (bool, error) {
	if has, known := t.answer(chain, r); known {
		return has, nil
	}
	if !askable(r) {
		c, err := t.Chain(chain)
		return c != nil && c.Has(r), err
	}
	has, err := t.src.check(chain, r)
	if err != nil && !t.jumpsNowhere(r) {
		return false, err
	}
	t.setProbed(chain, r, has)
	return has, nil
}

// Prefetch asks, at once, the questions that Has is about to be asked: one
// iptables-restore exec holding a -C line per question instead of one iptables exec
// each. Questions the table answers without asking are left out, and a single one is
// left to Has. For a rule of several matches only a "yes" is taken: a "no" may be the
// same rule written in another order, which Has then looks for in a listing. What
// Prefetch cannot settle (a failure it cannot place on one question) it leaves to Has,
// which asks again and reports it.
func (t *Table) Prefetch(probes ...Probe) {
	var ask []Probe
	seen := map[string]bool{}
	for _, p := range probes {
		key := p.Chain + "\x00" + p.Rule.meaning()
		if _, known := t.answer(p.Chain, p.Rule); known || seen[key] {
			continue
		}
		seen[key] = true
		ask = append(ask, p)
	}
	for len(ask) > 1 {
		n, err := t.src.checkFirst(ask)
		if n < 0 {
			return
		}
		for _, p := range ask[:n] {
			t.setProbed(p.Chain, p.Rule, true)
		}
		if n == len(ask) {
			return
		}
		if p := ask[n]; err == nil && askable(p.Rule) || err != nil && t.jumpsNowhere(p.Rule) {
			t.setProbed(p.Chain, p.Rule, false)
		} else if err != nil {
			return
		}
		ask = ask[n+1:]
	}
}

// jumpsNowhere tells whether r jumps to a chain that does not exist, which iptables
// refuses to look for, and which no rule can do.
func (t *Table) jumpsNowhere(r Rule) bool {
	target := r.Target()
	if target == "" || t.builtin(target) {
		return false
	}
	ok, err := t.Exists(target)
	return err == nil && !ok
}

// askable tells whether -C answers for r what Same would (Has).
func askable(r Rule) bool { return r.matches() <= 1 }

// answer is what the table knows of whether chain holds r without asking anyone.
func (t *Table) answer(chain string, r Rule) (has, known bool) {
	if c, ok := t.listed[chain]; ok {
		return c != nil && c.Has(r), true
	}
	// A jump to a chain known not to exist (never a fresh question: a target may be an
	// extension, MASQUERADE, that no chain is named after).
	if c, ok := t.listed[r.Target()]; ok {
		if c == nil {
			return false, true
		}
	} else if e, ok := t.exist[r.Target()]; ok && !e {
		return false, true
	}
	if has, ok := t.probed[chain][r.meaning()]; ok {
		return has, true
	}
	if e, known := t.kernelHolds(chain); known && !e {
		return false, true
	}
	return false, false
}

// setProbed records whether chain holds r. A rule that is there tells that its chain
// exists, and the chain it jumps to (no rule can jump to a chain that does not): with
// legacy tables, where only a listing tells otherwise, CHECK then needs none.
func (t *Table) setProbed(chain string, r Rule, has bool) {
	if t.probed[chain] == nil {
		t.probed[chain] = map[string]bool{}
	}
	t.probed[chain][r.meaning()] = has
	if has {
		t.exist[chain] = true
		if target := r.Target(); target != "" {
			t.exist[target] = true
		}
	}
}

// ParseRules reads the output of `iptables -S` (-P, -N and -A lines; blank and #
// lines are skipped) as the whole of table: a chain it does not list does not exist,
// a built-in chain it does not list is empty.
func ParseRules(fam Family, table, listing string) (*Table, error) {
	chains, err := parseRules(fam, listing)
	if err != nil {
		return nil, err
	}
	t := newTable(fam, table, absent{})
	for _, c := range chains {
		t.listed[c.Name] = c
	}
	return t, nil
}

// absent is the source of a table read whole: whatever was not read does not exist.
type absent struct{}

func (absent) exists(string) (bool, bool)             { return false, true }
func (absent) list(string) (*Chain, error)            { return nil, nil }
func (absent) check(string, Rule) (bool, error)       { return false, nil }
func (absent) checkFirst(probes []Probe) (int, error) { return 0, nil }

// parseRules reads -S output into its chains, in the order they appear.
func parseRules(fam Family, listing string) ([]*Chain, error) {
	var out []*Chain
	chain := func(name, policy string) *Chain {
		if i := slices.IndexFunc(out, func(c *Chain) bool { return c.Name == name }); i >= 0 {
			return out[i]
		}
		c := &Chain{Name: name, Policy: policy}
		out = append(out, c)
		return c
	}
	sc := bufio.NewScanner(strings.NewReader(listing))
	sc.Buffer(make([]byte, 0, 64*1024), 1<<20)
	for n := 1; sc.Scan(); n++ {
		// Only the blanks iptables-restore splits on: a trailing U+00A0 belongs to the
		// last argument (strings.TrimSpace would cut it off).
		line := strings.Trim(sc.Text(), " \t\r")
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		args, err := split(line)
		if err != nil {
			return nil, fmt.Errorf("%s -S line %d: %q: %w", fam, n, line, err)
		}
		switch {
		case len(args) == 3 && args[0] == "-P":
			chain(args[1], args[2]).Policy = args[2]
		case len(args) == 2 && args[0] == "-N":
			chain(args[1], "-")
		case len(args) >= 2 && args[0] == "-A":
			c := chain(args[1], "-")
			c.Rules = append(c.Rules, Rule(args[2:]))
		default:
			return nil, fmt.Errorf("%s -S line %d: unexpected %q", fam, n, line)
		}
	}
	return out, sc.Err()
}

// split tokenizes a listed line the way iptables-restore does: blanks separate
// arguments, double quotes group, and a backslash escapes the next character inside
// quotes.
func split(line string) ([]string, error) {
	var (
		out    []string
		cur    strings.Builder
		quoted bool
		have   bool
	)
	for i := 0; i < len(line); i++ {
		ch := line[i]
		switch {
		case quoted && ch == '\\' && i+1 < len(line):
			i++
			cur.WriteByte(line[i])
		case ch == '"':
			quoted = !quoted
			have = true
		case !quoted && (ch == ' ' || ch == '\t'):
			if have {
				out = append(out, cur.String())
				cur.Reset()
				have = false
			}
		default:
			cur.WriteByte(ch)
			have = true
		}
	}
	if quoted {
		return nil, fmt.Errorf("unterminated quote")
	}
	if have {
		out = append(out, cur.String())
	}
	return out, nil
}
