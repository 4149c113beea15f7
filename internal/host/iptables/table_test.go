package iptables

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// sample is what `iptables -t nat -S` prints of three chains.
const sample = `-P PREROUTING ACCEPT
-P POSTROUTING ACCEPT
-N CNI-abc
-A POSTROUTING -s 10.1.0.5/32 -m comment --comment "name: \"n1\" id: \"c1\"" -j CNI-abc
-A CNI-abc -d 10.1.0.0/24 -m comment --comment "name: \"n1\" id: \"c1\"" -j ACCEPT
-A CNI-abc ! -d 224.0.0.0/4 -m comment --comment "name: \"n1\" id: \"c1\"" -j MASQUERADE
`

func TestParseRulesReadsPoliciesChainsAndRules(t *testing.T) {
	tab, err := ParseRules(IPv4, "nat", sample)
	require.NoError(t, err)
	post := mustChain(t, tab, "POSTROUTING")
	assert.True(t, post.Builtin())
	require.Len(t, post.Rules, 1)
	assert.Equal(t, Rule{"-s", "10.1.0.5/32", "-m", "comment", "--comment", `name: "n1" id: "c1"`, "-j", "CNI-abc"}, post.Rules[0])
	assert.Equal(t, "CNI-abc", post.Rules[0].Target())
	assert.Equal(t, `name: "n1" id: "c1"`, post.Rules[0].Comment())
	user := mustChain(t, tab, "CNI-abc")
	assert.False(t, user.Builtin())
	assert.Len(t, user.Rules, 2)
	assert.Equal(t, []string{"PREROUTING", "POSTROUTING", "CNI-abc"}, listedNames(t, sample))
}

func TestParseRulesTakesAnUnlistedChainAsMissingAndAnUnlistedBuiltinAsEmpty(t *testing.T) {
	tab, err := ParseRules(IPv4, "nat", sample)
	require.NoError(t, err)
	c, err := tab.Chain("CNI-other")
	require.NoError(t, err)
	assert.Nil(t, c)
	out := mustChain(t, tab, "OUTPUT")
	assert.True(t, out.Builtin())
	assert.Empty(t, out.Rules)
}

func TestParseRulesRejectsGarbage(t *testing.T) {
	for _, text := range []string{
		"-A X \"unterminated\n",
		"bogus\n",
		"*nat\n-A X -j ACCEPT\nCOMMIT\n", // save format is not -S output
		"-P X\n", "-N\n", "-A\n", "-N A B\n",
	} {
		_, err := ParseRules(IPv4, "nat", text)
		assert.Error(t, err, text)
	}
}

// quotedRules need iptables-restore's quoting: spaces, quotes, a backslash, an empty
// argument. FuzzRuleString starts from them too.
var quotedRules = []Rule{
	{"-j", "ACCEPT"},
	{"!", "-d", "224.0.0.0/4", "-m", "comment", "--comment", `name: "n" id: "c"`, "-j", "MASQUERADE"},
	{"-m", "comment", "--comment", `back\slash`, "-j", "RETURN"},
	{"-m", "comment", "--comment", "", "-j", "RETURN"},
}

func TestRuleStringRoundTripsThroughSplit(t *testing.T) {
	for _, r := range quotedRules {
		got, err := split(r.String())
		require.NoError(t, err, r.String())
		assert.Equal(t, r, Rule(got), r.String())
	}
}

func TestBatchRecordsOnlyNeededChanges(t *testing.T) {
	tab, err := ParseRules(IPv4, "nat", sample)
	require.NoError(t, err)
	b := NewBatch(tab)
	existing := mustChain(t, tab, "CNI-abc").Rules[0]
	b.EnsureChain("CNI-abc")
	b.AppendRule("CNI-abc", existing)
	assert.Zero(t, b.Len(), "present chain and rule need no change")

	b.EnsureChain("CNI-new")
	b.EnsureChain("CNI-new")
	b.AppendRule("CNI-new", Rule{"-j", "RETURN"})
	b.InsertRule("CNI-new", Rule{"-j", "ACCEPT"})
	b.AppendRule("CNI-new", Rule{"-j", "RETURN"})
	b.DeleteRulesFunc("POSTROUTING", func(r Rule) bool { return r.Target() == "CNI-abc" })
	b.DeleteRule("POSTROUTING", Rule{"-j", "nothing"})
	b.DeleteChain("CNI-abc")
	b.DeleteChain("CNI-abc")
	b.DeleteChain("POSTROUTING") // built-in: never deleted
	require.NoError(t, b.Err())
	assert.Equal(t, "*nat\n"+
		"-N CNI-new\n"+
		"-A CNI-new -j RETURN\n"+
		"-I CNI-new 1 -j ACCEPT\n"+
		`-D POSTROUTING -s 10.1.0.5/32 -m comment --comment "name: \"n1\" id: \"c1\"" -j CNI-abc`+"\n"+
		"-F CNI-abc\n"+
		"-X CNI-abc\n"+
		"COMMIT\n", b.Script())
	assert.Equal(t, []Rule{{"-j", "ACCEPT"}, {"-j", "RETURN"}}, mustChain(t, tab, "CNI-new").Rules)
}

func TestBatchRuleForMissingChainIsAnError(t *testing.T) {
	tab, err := ParseRules(IPv4, "nat", sample)
	require.NoError(t, err)
	b := NewBatch(tab)
	b.AppendRule("CNI-missing", Rule{"-j", "RETURN"})
	assert.ErrorContains(t, b.Err(), "CNI-missing")
}

func mustChain(t *testing.T, tab *Table, name string) *Chain {
	t.Helper()
	c, err := tab.Chain(name)
	require.NoError(t, err)
	require.NotNil(t, c, name)
	return c
}

// listedNames are the chains of a listing in the order it names them.
func listedNames(t *testing.T, listing string) []string {
	t.Helper()
	chains, err := parseRules(IPv4, listing)
	require.NoError(t, err)
	var out []string
	for _, c := range chains {
		out = append(out, c.Name)
	}
	return out
}

// TestBatchRefusesTextThatCouldEscapeItsLine: a chain name or argument that could end
// its line of the restore script (or not stand as one token) makes the whole batch an
// error with no script, whatever the rest of the batch holds.
func TestBatchRefusesTextThatCouldEscapeItsLine(t *testing.T) {
	for name, plan := range map[string]func(*Batch){
		"newline in argument": func(b *Batch) { b.AppendRule("POSTROUTING", Rule{"-s", "10.0.0.0/8\n-F", "-j", "ACCEPT"}) },
		"CR in comment": func(b *Batch) {
			b.InsertRule("POSTROUTING", Rule{"-m", "comment", "--comment", "a\rb", "-j", "ACCEPT"})
		},
		"NUL in argument":       func(b *Batch) { b.DeleteRule("POSTROUTING", Rule{"-s", "10.0.0.0/8\x00"}) },
		"newline in new chain":  func(b *Batch) { b.EnsureChain("RELX\n-F") },
		"blank in chain":        func(b *Batch) { b.AppendRule("CNI abc", Rule{"-j", "ACCEPT"}) },
		"quote in chain":        func(b *Batch) { b.FlushChain(`CNI"abc`) },
		"dash chain":            func(b *Batch) { b.DeleteChain("-F") },
		"empty chain":           func(b *Batch) { b.EnsureChain("") },
		"too long chain":        func(b *Batch) { b.EnsureChain("CNI-0123456789012345678901234") },
		"non-ASCII chain":       func(b *Batch) { b.EnsureChain("CNI-é") },
		"DEL in target":         func(b *Batch) { b.AppendRule("POSTROUTING", Rule{"-j", "ACC\x7fEPT"}) },
		"valid after a refusal": func(b *Batch) { b.EnsureChain("A\nB"); b.EnsureChain("GOOD") },
	} {
		t.Run(name, func(t *testing.T) {
			tab, err := ParseRules(IPv4, "nat", sample)
			require.NoError(t, err)
			b := NewBatch(tab)
			b.EnsureChain("FIRST") // a valid change before the bad one is dropped too
			plan(b)
			require.Error(t, b.Err())
			assert.Empty(t, b.Script())
		})
	}
}

func TestCheckChainNameAcceptsIptablesNames(t *testing.T) {
	for _, name := range []string{"CNI-ADMIN", "KUBE-MARK-MASQ", "a", "CNI-DN-0123456789abcdef01234", "x_y.z:1"} {
		assert.NoError(t, CheckChainName(name), name)
	}
}

// Found by FuzzRuleString: a rule whose last argument ended in a non-ASCII blank (here
// U+00A0) lost it when read back, so the rule never matched its own listing.
func TestParseRulesKeepsNonASCIIBlanksOfTheLastArgument(t *testing.T) {
	r := Rule{"-i", "eth\u00a0", "-j", "DROP\u00a0"}
	tab, err := ParseRules(IPv4, "filter", "-N X\r\n  -A X "+r.String()+" \t\r\n")
	require.NoError(t, err)
	require.Len(t, mustChain(t, tab, "X").Rules, 1)
	assert.Equal(t, r, mustChain(t, tab, "X").Rules[0])
}

func TestFamilyOfNamesTheToolsOfEachFamily(t *testing.T) {
	assert.Equal(t, IPv4, FamilyOf(false))
	assert.Equal(t, IPv6, FamilyOf(true))
	assert.Equal(t, "iptables", FamilyOf(false).String())
	assert.Equal(t, "ip6tables", FamilyOf(true).String())
}
