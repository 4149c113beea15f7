package iptables

import (
	"context"
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
				tab, err := Load(ctx, fam, "nat")
				if err != nil {
					return err
				}
				assert.True(t, tab.Chain("POSTROUTING").Has(jump), "save prints the rule as written")
				b := NewBatch(tab)
				_ = plan(b)
				assert.Empty(t, b.Script(), "a second identical plan changes nothing")
				assert.True(t, TableInUse(fam, "nat"))
				return nil
			})
			host.Run(t, func() error {
				return Update(ctx, fam, "nat", func(b *Batch) error {
					b.DeleteRulesFunc("POSTROUTING", func(r Rule) bool { return r.Comment() == comment })
					b.DeleteChain("CNI-test")
					return nil
				})
			})
			out, err := host.Exec(t, fam.String()+"-save", "-t", "nat")
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
			if calls == 1 {
				// Another process creates and fills the chain after our snapshot.
				if err := Restore(ctx, IPv4, "*nat\n-N CNI-race\n-A CNI-race -j RETURN\nCOMMIT\n"); err != nil {
					return err
				}
			}
			b.EnsureChain("CNI-race")
			b.AppendRule("CNI-race", Rule{"-j", "ACCEPT"})
			return nil
		})
	})
	assert.Equal(t, 2, calls)
	host.Run(t, func() error {
		tab, err := Load(ctx, IPv4, "nat")
		if err != nil {
			return err
		}
		assert.Equal(t, []Rule{{"-j", "RETURN"}, {"-j", "ACCEPT"}}, tab.Chain("CNI-race").Rules,
			"the other writer's rule survives: no :CHAIN flush")
		return nil
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
