// Package iptablestest holds checks on iptables rules for the tests and fuzz targets of
// the plugins that write them.
package iptablestest

import (
	"slices"
	"strings"
	"testing"

	"github.com/cnikit/cni/internal/host/iptables"
)

// RequireReadsBack fails t unless r, written into an iptables-restore line the way a
// Batch writes it, reads back from that text, as `iptables -S` would print it, as
// exactly one rule with the same arguments: no value of r can end the line, start
// another command, or change how the others split.
func RequireReadsBack(t testing.TB, fam iptables.Family, table string, r iptables.Rule) {
	t.Helper()
	const chain = "CNI-READBACK"
	if strings.Contains(r.String(), "\n") {
		t.Fatalf("rule %q renders as more than one line: %q", []string(r), r.String())
	}
	tab, err := iptables.ParseRules(fam, table, "-N "+chain+"\n-A "+chain+" "+r.String()+"\n")
	if err != nil {
		t.Fatalf("rule %q does not read back: %v", []string(r), err)
	}
	ch, err := tab.Chain(chain)
	if err != nil || ch == nil || len(ch.Rules) != 1 || !slices.Equal(ch.Rules[0], r) {
		var got []iptables.Rule
		if ch != nil {
			got = ch.Rules
		}
		t.Fatalf("rule %q reads back as %q (%v)", []string(r), got, err)
	}
}
