// Package iptables reads and changes iptables rules with as few process execs as
// possible, for every plugin that keeps an iptables layout (masquerade, portmap,
// firewall). A change is planned against one snapshot of a table (one iptables-save
// exec) and applied as one iptables-restore --noflush batch (one more exec), instead of
// one `iptables` exec per rule operation as in the reference plugins (#510).
//
// Rules are argument lists compared by meaning, not by text (Rule.Same): "is this rule
// present" must hold whichever iptables (legacy or nft, any version) printed the
// snapshot, and whoever wrote the rule. A rule is deleted by the text the snapshot
// printed for it.
//
// Concurrent writers are handled optimistically: a new chain is declared with `-N`,
// which fails if another process created it in the meantime (a `:CHAIN` line would
// silently flush it under --noflush), and a rule is deleted only if the snapshot holds
// it. A failed restore is retried with a fresh snapshot when the fresh plan differs.
package iptables

import (
	"bufio"
	"fmt"
	"slices"
	"strings"
)

// Family is the IP family whose tools (iptables-* or ip6tables-*) are used.
type Family int

// The families.
const (
	IPv4 Family = 4
	IPv6 Family = 6
)

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

// Chain is one chain of a snapshot.
type Chain struct {
	Name string
	// Policy is ACCEPT/DROP for a built-in chain and "-" for a user chain.
	Policy string
	// Rules are the chain's rules in order, as iptables-save printed them. Only the
	// chain's methods (through Batch) change them, so meanings stays in step.
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
	for i, r := range want {
		if c.meanings[i] != r.meaning() {
			return false
		}
	}
	return true
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

func (c *Chain) clear() { c.Rules, c.meanings = nil, nil }

// Table is a snapshot of one table of one family.
type Table struct {
	Family Family
	Name   string
	chains map[string]*Chain
	order  []string
}

// Chain returns the named chain, or nil when it does not exist.
func (t *Table) Chain(name string) *Chain { return t.chains[name] }

// Chains returns the chains in save order.
func (t *Table) Chains() []*Chain {
	out := make([]*Chain, 0, len(t.order))
	for _, n := range t.order {
		if c, ok := t.chains[n]; ok {
			out = append(out, c)
		}
	}
	return out
}

func (t *Table) addChain(name, policy string) *Chain {
	if c, ok := t.chains[name]; ok {
		return c
	}
	c := &Chain{Name: name, Policy: policy}
	t.chains[name] = c
	t.order = append(t.order, name)
	return c
}

// Parse reads iptables-save output and returns the named table; a table that the output
// does not contain is returned empty (iptables-nft prints nothing for a table never used).
func Parse(fam Family, table, save string) (*Table, error) {
	t := &Table{Family: fam, Name: table, chains: map[string]*Chain{}}
	in := false
	sc := bufio.NewScanner(strings.NewReader(save))
	sc.Buffer(make([]byte, 0, 64*1024), 1<<20)
	for n := 1; sc.Scan(); n++ {
		// Only the blanks iptables-restore splits on: a trailing U+00A0 belongs to the
		// last argument (strings.TrimSpace would cut it off).
		line := strings.Trim(sc.Text(), " \t\r")
		switch {
		case line == "" || strings.HasPrefix(line, "#"):
		case strings.HasPrefix(line, "*"):
			in = line[1:] == table
		case !in:
		case line == "COMMIT":
			in = false
		case strings.HasPrefix(line, ":"):
			f := strings.Fields(line[1:])
			if len(f) < 2 {
				return nil, fmt.Errorf("%s-save line %d: bad chain line %q", fam, n, line)
			}
			t.addChain(f[0], f[1])
		case strings.HasPrefix(line, "-A "):
			args, err := split(line)
			if err != nil || len(args) < 2 {
				return nil, fmt.Errorf("%s-save line %d: %q: %v", fam, n, line, err)
			}
			c := t.chains[args[1]]
			if c == nil {
				c = t.addChain(args[1], "-")
			}
			c.Rules = append(c.Rules, Rule(args[2:]))
		default:
			return nil, fmt.Errorf("%s-save line %d: unexpected %q", fam, n, line)
		}
	}
	return t, sc.Err()
}

// split tokenizes a save line the way iptables-restore does: blanks separate arguments,
// double quotes group, and a backslash escapes the next character inside quotes.
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
