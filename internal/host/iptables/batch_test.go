package iptables

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// recording is a source that answers from a listing and records every read that would
// be an exec.
type recording struct {
	whole *Table
	reads []string
	// legacy is a source that cannot tell a chain exists without listing it.
	legacy bool
}

func (r *recording) exists(chain string) (bool, bool) {
	c, err := r.whole.Chain(chain)
	return c != nil && err == nil, !r.legacy
}

func (r *recording) list(chain string) (*Chain, error) {
	r.reads = append(r.reads, "-S "+chain)
	return r.whole.Chain(chain)
}

func (r *recording) check(chain string, rule Rule) (bool, error) {
	r.reads = append(r.reads, "-C "+chain+" "+rule.String())
	return r.whole.Has(chain, rule)
}

func (r *recording) checkFirst(probes []Probe) (int, error) {
	r.reads = append(r.reads, "restore -C")
	for i, p := range probes {
		if has, _ := r.whole.Has(p.Chain, p.Rule); !has {
			return i, nil
		}
	}
	return len(probes), nil
}

func recorded(t *testing.T, listing string) (*Table, *recording) {
	t.Helper()
	whole, err := ParseRules(IPv4, "nat", listing)
	require.NoError(t, err)
	src := &recording{whole: whole}
	return newTable(IPv4, "nat", src), src
}

func TestBatchAppendsAJumpToAChainItCreatedWithoutReadingTheChainItGoesInto(t *testing.T) {
	tab, src := recorded(t, sample)
	b := NewBatch(tab)
	b.SetRules("CNI-new", []Rule{{"-j", "MASQUERADE"}})
	b.AppendRule("POSTROUTING", Rule{"-s", "10.1.0.9/32", "-j", "CNI-new"})
	require.NoError(t, b.Err())
	assert.Empty(t, src.reads, "a new chain and the jump to it need no read")
	assert.Equal(t, "*nat\n-N CNI-new\n-A CNI-new -j MASQUERADE\n-A POSTROUTING -s 10.1.0.9/32 -j CNI-new\nCOMMIT\n", b.Script())
}

func TestBatchAsksABuiltinChainAboutOneRuleAndListsOnlyWhatItMustMatch(t *testing.T) {
	tab, src := recorded(t, sample)
	b := NewBatch(tab)
	jump := Rule{"-s", "10.1.0.5/32", "-m", "comment", "--comment", `name: "n1" id: "c1"`, "-j", "CNI-abc"}
	b.AppendRule("POSTROUTING", jump)
	assert.Equal(t, []string{"-C POSTROUTING " + jump.String()}, src.reads, "a rule of one match is asked about")
	assert.Zero(t, b.Len())
	b.DeleteRulesFunc("POSTROUTING", func(r Rule) bool { return r.Target() == "CNI-abc" })
	b.DeleteChain("CNI-abc")
	require.NoError(t, b.Err())
	assert.Equal(t, []string{"-C POSTROUTING " + jump.String(), "-S POSTROUTING"}, src.reads,
		"rules found by a function need the listing; a chain deleted whole needs none")
	assert.Equal(t, "*nat\n-D POSTROUTING "+jump.String()+"\n-F CNI-abc\n-X CNI-abc\nCOMMIT\n", b.Script())
}

func TestBatchLooksForARuleOfSeveralMatchesInAListing(t *testing.T) {
	tab, src := recorded(t, "-N CNI-x\n-A CNI-x -m comment --comment c -m mark --mark 0x1/0x1 -j ACCEPT\n")
	b := NewBatch(tab)
	b.AppendRule("CNI-x", Rule{"-m", "mark", "--mark", "1/1", "-m", "comment", "--comment", "c", "-j", "ACCEPT"})
	require.NoError(t, b.Err())
	assert.Zero(t, b.Len(), "found in the listing in another order")
	assert.Equal(t, []string{"-S CNI-x"}, src.reads)
}

func TestBatchRefusesToListAChainItChangedWithoutListing(t *testing.T) {
	tab, _ := recorded(t, "-N CNI-x\n")
	b := NewBatch(tab)
	b.AppendRule("CNI-x", Rule{"-j", "RETURN"})
	b.AppendRule("CNI-x", Rule{"-m", "comment", "--comment", "c", "-m", "mark", "--mark", "0x1/0x1", "-j", "ACCEPT"})
	assert.ErrorContains(t, b.Err(), "after changes were planned without one")
	assert.Empty(t, b.Script())
}

func TestPrefetchTakesOnlyAYesForARuleOfSeveralMatches(t *testing.T) {
	tab, src := recorded(t, "-N CNI-x\n-A CNI-x -j RETURN\n")
	several := Rule{"-m", "comment", "--comment", "c", "-m", "mark", "--mark", "0x1/0x1", "-j", "ACCEPT"}
	tab.Prefetch(Probe{"CNI-x", Rule{"-j", "RETURN"}}, Probe{"CNI-x", several}, Probe{"POSTROUTING", Rule{"-j", "CNI-x"}})
	assert.Equal(t, []string{"restore -C"}, src.reads, "the one question left after the missing rule is left to Has")
	has, err := tab.Has("CNI-x", several)
	require.NoError(t, err)
	assert.False(t, has)
	assert.Equal(t, []string{"restore -C", "-S CNI-x"}, src.reads, "a no for several matches is checked in a listing")
}

// TestARuleFoundTellsThatItsChainAndItsTargetExist: with legacy tables only a listing
// tells that a chain exists, but a rule found there (or jumping there) tells it too, so
// a CHECK that found its rules needs no listing.
func TestARuleFoundTellsThatItsChainAndItsTargetExist(t *testing.T) {
	tab, src := recorded(t, "-N CNI-x\n-N CNI-y\n-A CNI-x -j RETURN\n-A POSTROUTING -j CNI-y\n")
	src.legacy = true
	tab.Prefetch(Probe{"CNI-x", Rule{"-j", "RETURN"}}, Probe{"POSTROUTING", Rule{"-j", "CNI-y"}})
	for _, chain := range []string{"CNI-x", "CNI-y"} {
		ok, err := tab.Exists(chain)
		require.NoError(t, err)
		assert.True(t, ok, chain)
	}
	assert.Equal(t, []string{"restore -C"}, src.reads)
}
