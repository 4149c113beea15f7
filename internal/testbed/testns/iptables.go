package testns

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// IPTables is one flavour of the iptables tools: iptables-nft (rules kept in nf_tables)
// or iptables-legacy (the x_tables kernel tables). Both print rules their own way, and
// a node runs either, so rule handling is tested with each.
type IPTables struct {
	// Name is "nft" or "legacy".
	Name string
	// Dir holds iptables, iptables-save, iptables-restore and their ip6tables
	// counterparts, all of this flavour: first in PATH, they are the ones a plugin runs.
	Dir string
}

// PATH is the PATH value under which a plugin runs this flavour's tools.
func (f IPTables) PATH() string { return f.Dir + string(os.PathListSeparator) + os.Getenv("PATH") }

// Tool is the path of one of the flavour's tools ("iptables-save", "ip6tables", ...).
func (f IPTables) Tool(name string) string { return filepath.Join(f.Dir, name) }

// IPTablesFlavours returns both flavours, each a temp dir of links named as a plugin
// runs the tools, pointing at the flavour's multi-call binary. Legacy tables live in
// the network namespace they are made in, like nf_tables ones: a test that uses either
// inside its own namespaces leaves the machine's tables alone. The test is skipped
// when a flavour is not installed.
func IPTablesFlavours(t testing.TB) []IPTables {
	t.Helper()
	RequireFirewallBinaries(t, "the iptables flavours are the iptables tools")
	var out []IPTables
	for _, f := range []struct{ name, multi string }{{"nft", "xtables-nft-multi"}, {"legacy", "xtables-legacy-multi"}} {
		multi, err := exec.LookPath(f.multi)
		if err != nil {
			t.Skipf("iptables flavour %s: %v", f.name, err)
		}
		dir := t.TempDir()
		for _, tool := range []string{"iptables", "iptables-save", "iptables-restore", "ip6tables", "ip6tables-save", "ip6tables-restore"} {
			if err := os.Symlink(multi, filepath.Join(dir, tool)); err != nil {
				t.Fatalf("link %s: %v", tool, err)
			}
		}
		out = append(out, IPTables{Name: f.name, Dir: dir})
	}
	return out
}

// Rules is what this flavour's iptables-save and ip6tables-save print of table inside
// n, without what changes by itself: the "# Generated on <time>" lines and the packet
// counters of the chain lines. Two listings are equal when no rule changed.
func (f IPTables) Rules(t testing.TB, n *NS, table string) string {
	t.Helper()
	var b strings.Builder
	for _, tool := range []string{"iptables-save", "ip6tables-save"} {
		out, err := n.Exec(t, f.Tool(tool), "-t", table)
		if err != nil {
			t.Fatalf("%s -t %s: %v: %s", tool, table, err, out)
		}
		for _, line := range strings.SplitAfter(out, "\n") {
			switch {
			case strings.HasPrefix(line, "#"):
			case strings.HasPrefix(line, ":"):
				chain, _, _ := strings.Cut(line, " [")
				b.WriteString(chain + "\n")
			default:
				b.WriteString(line)
			}
		}
	}
	return b.String()
}

// RulePosition is the 1-based position of the first rule of chain (in table, as this
// flavour's tool, "iptables" or "ip6tables", lists it with -S inside n) that contains
// text: the number `iptables -R` and `-I` take. The test fails when no rule does.
func (f IPTables) RulePosition(t testing.TB, n *NS, tool, table, chain, text string) int {
	t.Helper()
	out, err := n.Exec(t, f.Tool(tool), "-t", table, "-S", chain)
	if err != nil {
		t.Fatalf("%s -t %s -S %s: %v: %s", tool, table, chain, err, out)
	}
	pos := 0
	for _, line := range strings.Split(out, "\n") {
		if !strings.HasPrefix(line, "-A ") {
			continue
		}
		pos++
		if strings.Contains(line, text) {
			return pos
		}
	}
	t.Fatalf("no rule with %q in:\n%s", text, out)
	return 0
}
