package iptables

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cnikit/cni/internal/testbed/testns"
)

var comment = `name: "net" id: "c1"`

func TestUpdateAppliesOnceAndIsIdempotent(t *testing.T) {
	testns.RequireRoot(t)
	for _, fam := range []Family{IPv4, IPv6} {
		t.Run(fam.String(), func(t *testing.T) {
			t.Parallel()
			host := testns.New(t)
			src := "10.1.0.5/32"
			if fam == IPv6 {
				src = "fd00::5/128"
			}
			jump := Rule{"-s", src, "-m", "comment", "--comment", comment, "-j", "CNI-test"}
			plan := func(b *Batch) error {
				b.EnsureChain("CNI-test")
				b.AppendRule("CNI-test", Rule{"-m", "comment", "--comment", comment, "-j", "MASQUERADE"})
				b.AppendRule("POSTROUTING", jump)
				return nil
			}
			ctx := context.Background()
			host.Run(t, func() error { return Update(ctx, fam, "nat", plan) })
			host.Run(t, func() error {
				return Inspect(ctx, fam, "nat", func(tab *Table) error {
					has, err := tab.Has("POSTROUTING", jump)
					require.NoError(t, err)
					assert.True(t, has, "-C finds the rule as written")
					b := NewBatch(tab)
					_ = plan(b)
					require.NoError(t, b.Err())
					assert.Empty(t, b.Script(), "a second identical plan changes nothing")
					assert.True(t, TableInUse(fam, "nat"))
					return nil
				})
			})
			host.Run(t, func() error {
				return Update(ctx, fam, "nat", func(b *Batch) error {
					b.DeleteRulesFunc("POSTROUTING", func(r Rule) bool { return r.Comment() == comment })
					b.DeleteChain("CNI-test")
					return nil
				})
			})
			out, err := host.Exec(t, fam.String(), "-t", "nat", "-S")
			require.NoError(t, err)
			assert.NotContains(t, out, "CNI-test")
		})
	}
}

func TestUpdateRetriesWhenAConcurrentWriterCreatedTheChain(t *testing.T) {
	testns.RequireRoot(t)
	host := testns.New(t)
	ctx := context.Background()
	calls := 0
	host.Run(t, func() error {
		return Update(ctx, IPv4, "nat", func(b *Batch) error {
			calls++
			b.EnsureChain("CNI-race")
			if calls == 1 {
				// Another process creates and fills the chain after our read.
				if err := Restore(ctx, IPv4, "*nat\n-N CNI-race\n-A CNI-race -j RETURN\nCOMMIT\n"); err != nil {
					return err
				}
			}
			b.AppendRule("CNI-race", Rule{"-j", "ACCEPT"})
			return nil
		})
	})
	assert.Equal(t, 2, calls)
	host.Run(t, func() error {
		return Inspect(ctx, IPv4, "nat", func(tab *Table) error {
			c, err := tab.Chain("CNI-race")
			require.NoError(t, err)
			require.NotNil(t, c)
			assert.Equal(t, []Rule{{"-j", "RETURN"}, {"-j", "ACCEPT"}}, c.Rules, "the other writer's rule survives: no :CHAIN flush")
			return nil
		})
	})
}

func TestUpdateReportsARealFailure(t *testing.T) {
	testns.RequireRoot(t)
	host := testns.New(t)
	err := host.Do(func() error {
		return Update(context.Background(), IPv4, "nat", func(b *Batch) error {
			b.AppendRule("POSTROUTING", Rule{"-j", "NO-SUCH-TARGET"})
			return nil
		})
	})
	assert.ErrorContains(t, err, "iptables-restore")
}

func TestTableInUseIsFalseInAFreshNamespace(t *testing.T) {
	testns.RequireRoot(t)
	host := testns.New(t)
	host.Run(t, func() error {
		assert.False(t, TableInUse(IPv4, "nat"))
		assert.False(t, TableInUse(IPv6, "nat"))
		return nil
	})
}

// TestUpdateReadsOnlyTheChainsItTouches runs, with each iptables flavour, a
// masquerade-shaped ADD (a new chain and a jump to it), the same ADD again, and its
// removal, on a table holding kube-proxy's rules for 100 Services: no iptables-save ever
// runs, no -S or -C names a chain other than ours and POSTROUTING, the new chain's
// jump is written without any read of POSTROUTING, and only the removal, which must
// find jumps it cannot rebuild, lists POSTROUTING. With iptables-nft, a chain that does
// not exist costs no exec (netlink says so).
func TestUpdateReadsOnlyTheChainsItTouches(t *testing.T) {
	testns.RequireRoot(t)
	for _, fl := range testns.IPTablesFlavours(t) {
		t.Run(fl.Name, func(t *testing.T) {
			host := testns.New(t)
			testns.LoadKubeProxyRules(t, host, fl.Tool("iptables-restore"), 100)
			log := testns.LogIPTables(t, fl.Dir)
			jump := Rule{"-s", "10.1.0.5/32", "-m", "comment", "--comment", comment, "-j", "CNI-test"}
			add := func(b *Batch) error {
				b.SetRules("CNI-test", []Rule{{"-m", "comment", "--comment", comment, "-j", "MASQUERADE"}})
				b.AppendRule("POSTROUTING", jump)
				return nil
			}
			ctx := context.Background()

			host.Run(t, func() error { return Update(ctx, IPv4, "nat", add) })
			runs := log.Runs(t)
			wantReads := [][3]string(nil)
			if fl.Name == "legacy" {
				wantReads = [][3]string{{"nat", "-S", "CNI-test"}}
			}
			assert.Equal(t, wantReads, reads(t, runs), "ADD of a new chain reads nothing of POSTROUTING")
			assert.Equal(t, 1, restores(runs))

			host.Run(t, func() error { return Update(ctx, IPv4, "nat", add) })
			runs = log.Runs(t)
			require.Len(t, runs, 2)
			assert.Equal(t, []string{"iptables", "-w", "-t", "nat", "-S", "CNI-test"}, runs[0].Args)
			assert.Equal(t, append([]string{"iptables", "-w", "-t", "nat", "-C", "POSTROUTING"}, jump...), runs[1].Args,
				"a repeated ADD lists its chain and asks POSTROUTING about its jump, and changes nothing")

			host.Run(t, func() error {
				return Update(ctx, IPv4, "nat", func(b *Batch) error {
					b.DeleteRulesFunc("POSTROUTING", func(r Rule) bool { return r.Target() == "CNI-test" })
					b.DeleteChain("CNI-test")
					return nil
				})
			})
			runs = log.Runs(t)
			wantReads = [][3]string{{"nat", "-S", "POSTROUTING"}}
			if fl.Name == "legacy" {
				wantReads = append(wantReads, [3]string{"nat", "-S", "CNI-test"}) // only a listing tells it exists
			}
			assert.Equal(t, wantReads, reads(t, runs),
				"a removal lists POSTROUTING, whose jumps it cannot rebuild, and deletes its chain unread")
			assert.Equal(t, 1, restores(runs))
			out, err := host.Exec(t, fl.Tool("iptables"), "-t", "nat", "-S")
			require.NoError(t, err)
			assert.NotContains(t, out, "CNI-test")
			assert.Contains(t, out, "-A POSTROUTING -m comment --comment \"kubernetes postrouting rules\" -j KUBE-POSTROUTING")
		})
	}
}

// reads are the questions of a log's runs (testns.IPTablesRun.Reads); it fails on any
// iptables-save.
func reads(t *testing.T, runs []testns.IPTablesRun) [][3]string {
	var out [][3]string
	for _, r := range runs {
		require.False(t, strings.HasSuffix(r.Args[0], "-save"), "%q ran", r.Args)
		out = append(out, r.Reads()...)
	}
	return out
}

// restores counts the restores that change something (not only -C lines).
func restores(runs []testns.IPTablesRun) int {
	n := 0
	for _, r := range runs {
		if strings.HasSuffix(r.Args[0], "-restore") && strings.Contains(r.Input, "\n-") &&
			slices.ContainsFunc(strings.Split(r.Input, "\n"), func(l string) bool { return strings.HasPrefix(l, "-") && !strings.HasPrefix(l, "-C ") }) {
			n++
		}
	}
	return n
}

// TestPrefetchAsksEveryRuleInOneRestore asks, with each flavour, about six rules of
// which two are missing: the restore of -C lines runs once for all of them and once
// more after each missing one (three runs), and Has then answers each without an exec,
// rightly. A rule of two matches found as written counts.
func TestPrefetchAsksEveryRuleInOneRestore(t *testing.T) {
	testns.RequireRoot(t)
	for _, fl := range testns.IPTablesFlavours(t) {
		t.Run(fl.Name, func(t *testing.T) {
			host := testns.New(t)
			out, err := host.ExecInput(t, "*nat\n-N CNI-x\n-A CNI-x -j RETURN\n-A CNI-x -p tcp -m tcp --dport 80 -j ACCEPT\n"+
				"-A CNI-x -p tcp -m comment --comment two -m multiport --dports 81,82 -j ACCEPT\n"+
				"-A POSTROUTING -m comment --comment jump -j CNI-x\nCOMMIT\n", fl.Tool("iptables-restore"), "-w")
			require.NoError(t, err, out)
			log := testns.LogIPTables(t, fl.Dir)
			probes := []Probe{
				{"CNI-x", Rule{"-j", "RETURN"}},
				{"CNI-x", Rule{"-j", "MASQUERADE"}},
				{"CNI-x", Rule{"-p", "tcp", "--dport", "80", "-j", "ACCEPT"}},
				{"POSTROUTING", Rule{"-m", "comment", "--comment", "other", "-j", "CNI-x"}},
				{"POSTROUTING", Rule{"-m", "comment", "--comment", "jump", "-j", "CNI-x"}},
				{"CNI-x", Rule{"-p", "tcp", "-m", "comment", "--comment", "two", "-m", "multiport", "--dports", "81,82", "-j", "ACCEPT"}},
			}
			var prefetched, after []testns.IPTablesRun
			var answers []bool
			host.Run(t, func() error {
				return Inspect(context.Background(), IPv4, "nat", func(tab *Table) error {
					tab.Prefetch(probes...)
					prefetched = log.Runs(t)
					for _, p := range probes {
						has, err := tab.Has(p.Chain, p.Rule)
						if err != nil {
							return err
						}
						answers = append(answers, has)
					}
					after = log.Runs(t)
					return nil
				})
			})
			want := []string{"iptables-restore", "iptables-restore", "iptables-restore"}
			var ran []string
			for _, r := range prefetched {
				ran = append(ran, r.Args[0])
			}
			assert.Equal(t, want, ran, "%q", prefetched)
			assert.Equal(t, []bool{true, false, true, false, true, true}, answers)

			assert.Empty(t, after, "Has answers what Prefetch asked")
		})
	}
}

// TestPrefetchOfAJumpToNowhereAnswersRightly: iptables refuses to look for a jump to a
// chain that does not exist (iptables-nft names the COMMIT line for it); whatever
// Prefetch makes of it, Has then answers every question rightly, without an error.
func TestPrefetchOfAJumpToNowhereAnswersRightly(t *testing.T) {
	testns.RequireRoot(t)
	for _, fl := range testns.IPTablesFlavours(t) {
		t.Run(fl.Name, func(t *testing.T) {
			t.Setenv("PATH", fl.PATH())
			host := testns.New(t)
			out, err := host.ExecInput(t, "*nat\n-N CNI-x\n-A POSTROUTING -j CNI-x\nCOMMIT\n", fl.Tool("iptables-restore"), "-w")
			require.NoError(t, err, out)
			probes := []Probe{{"POSTROUTING", Rule{"-j", "CNI-x"}}, {"POSTROUTING", Rule{"-j", "CNI-nowhere"}}, {"POSTROUTING", Rule{"-j", "RETURN"}}}
			var answers []bool
			host.Run(t, func() error {
				return Inspect(context.Background(), IPv4, "nat", func(tab *Table) error {
					tab.Prefetch(probes...)
					for _, p := range probes {
						has, err := tab.Has(p.Chain, p.Rule)
						if err != nil {
							return err
						}
						answers = append(answers, has)
					}
					return nil
				})
			})
			assert.Equal(t, []bool{true, false, false}, answers)
		})
	}
}
