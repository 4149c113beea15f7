// Package iptablestest holds checks on iptables rules for the tests and fuzz targets of
// the plugins that write them.
package iptablestest

import (
	"slices"
	"testing"

	"github.com/cnikit/cni/internal/host/iptables"
)

// RequireReadsBack fails t unless r, written into an iptables-restore line the way a
// Batch writes it, reads back from that text as exactly one rule with the same
// arguments: no value of r can end the line, start another table, or change how the
// others split.
func RequireReadsBack(t testing.TB, fam iptables.Family, table string, r iptables.Rule) {
	t.Helper()
	const chain = "CNI-READBACK"
	line := "-A " + chain + " " + r.String()
	tab, err := iptables.Parse(fam, table, "*"+table+"\n"+line+"\nCOMMIT\n")
	if err != nil {
		t.Fatalf("rule %q does not read back: %v", []string(r), err)
	}
	ch := tab.Chain(chain)
	if len(tab.Chains()) != 1 || ch == nil || len(ch.Rules) != 1 || !slices.Equal(ch.Rules[0], r) {
		var got []iptables.Rule
		for _, c := range tab.Chains() {
			got = append(got, c.Rules...)
		}
		t.Fatalf("rule %q reads back as %q", []string(r), got)
	}
}
