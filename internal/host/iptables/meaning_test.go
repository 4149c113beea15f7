package iptables

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cnikit/cni/internal/testbed/testns"
)

func rule(s string) Rule {
	args, err := split(s)
	if err != nil {
		panic(err)
	}
	return Rule(args)
}

// TestSameHoldsAcrossSpellings: each pair is one rule, in the spelling a plugin writes
// and in one that iptables-legacy, iptables-nft, an older version or an operator uses.
func TestSameHoldsAcrossSpellings(t *testing.T) {
	for _, tc := range []struct{ ours, theirs string }{
		{`-s 10.1.0.5/32 -j CNI-x`, `--source 10.1.0.5 --jump CNI-x`},
		{`-s 10.1.0.5/32 -j CNI-x`, `--src 10.1.0.5/255.255.255.255 -j CNI-x`},
		{`-d 10.1.0.0/24 -j ACCEPT`, `--destination 10.1.0.9/255.255.255.0 -j ACCEPT`},
		{`-d fd00::5/128 -j ACCEPT`, `--dst fd00::5 -j ACCEPT`},
		{`! -d 224.0.0.0/4 -j MASQUERADE`, `-d ! 224.0.0.0/4 -j MASQUERADE`},
		{`! -d 224.0.0.0/4 -m comment --comment "a b" -j MASQUERADE`, `-m comment --comment "a b" ! -d 224.0.0.0/4 -j MASQUERADE`},
		{`-p tcp -m comment --comment c -m multiport --dports 80,81 -j CNI-DN`, `-m comment --comment c -p tcp -m multiport --destination-ports 81,80 -j CNI-DN`},
		{`-s 10.1.1.0/24 -p udp -m udp --dport 8081 -j M`, `-p udp --destination-port 8081 -s 10.1.1.7/24 -j M`},
		{`-p tcp -m tcp --dport 8080 -j DNAT --to-destination 10.1.1.2:80`, `--protocol TCP --dport 8080 -j DNAT --to-destination 10.1.1.2:80`},
		{`-p tcp -m tcp --dport 80 -j ACCEPT`, `-p tcp --dport http -j ACCEPT`},
		{`-p tcp -m tcp --dport 1000:2000 -j ACCEPT`, `-p tcp -m tcp --destination-port 01000:2000 -j ACCEPT`},
		{`-p udp -m udp --dport 8081 -j DNAT --to-destination [fd01::2]:8001`, `-p 17 -m udp --dport 8081 -j DNAT --to-destination [fd01:0::2]:8001`},
		{`-s 0.0.0.0/0 -p all -j ACCEPT`, `-j ACCEPT`},
		{`-m mark --mark 0x2000/0x2000 -j MASQUERADE`, `-m mark --mark 8192/8192 -j MASQUERADE`},
		{`-m mark --mark 0x1 -j MASQUERADE`, `-m mark --mark 1/0xffffffff -j MASQUERADE`},
		{`-j MARK --set-xmark 0x2000/0x2000`, `-j MARK --set-mark 0x2000/0x2000`},
		{`-j MARK --set-xmark 0x2000/0xffffffff`, `-j MARK --set-mark 0x2000`},
		{`-d 10.1.0.5/32 -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT`, `-m conntrack --ctstate established,related -d 10.1.0.5 -j ACCEPT`},
		{`-m addrtype --dst-type LOCAL -j CNI-HOSTPORT-DNAT`, `-m addrtype --dst-type local -j CNI-HOSTPORT-DNAT`},
		{`-i br0 ! -o br0 -m comment --comment c -j CNI-ISOLATION-STAGE-2`, `-m comment --comment c --in-interface br0 ! --out-interface br0 -j CNI-ISOLATION-STAGE-2`},
		{`-m comment --comment "dnat name: \"n\" id: \"c\"" -j X`, `--match comment --comment "dnat name: \"n\" id: \"c\"" -j X`},
	} {
		ours, theirs := rule(tc.ours), rule(tc.theirs)
		assert.True(t, ours.Same(theirs), "%s\n%s", tc.ours, tc.theirs)
		assert.True(t, theirs.Same(ours), "%s\n%s", tc.theirs, tc.ours)
	}
}

// TestSameTellsDifferentRulesApart: each pair differs in something iptables acts on.
func TestSameTellsDifferentRulesApart(t *testing.T) {
	for _, tc := range []struct{ a, b string }{
		{`-s 10.1.0.5/32 -j CNI-x`, `-s 10.1.0.6/32 -j CNI-x`},
		{`-s 10.1.0.5/32 -j CNI-x`, `-d 10.1.0.5/32 -j CNI-x`},
		{`-s 10.1.0.5/32 -j CNI-x`, `! -s 10.1.0.5/32 -j CNI-x`},
		{`-s 10.1.0.0/24 -j CNI-x`, `-s 10.1.0.0/25 -j CNI-x`},
		{`-s 10.1.0.5/32 -j CNI-x`, `-s 10.1.0.5/32 -g CNI-x`},
		{`-s 10.1.0.5/32 -j CNI-x`, `-s 10.1.0.5/32 -j CNI-y`},
		{`-m comment --comment "name: \"n\" id: \"c1\"" -j A`, `-m comment --comment "name: \"n\" id: \"c2\"" -j A`},
		{`-p tcp -m tcp --dport 80 -j A`, `-p udp -m udp --dport 80 -j A`},
		{`-p tcp -m tcp --dport 80 -j A`, `-p tcp -m tcp --sport 80 -j A`},
		{`-p tcp -m multiport --dports 80,81 -j A`, `-p tcp -m multiport --dports 80 -j A`},
		{`-m mark --mark 0x2000/0x2000 -j A`, `-m connmark --mark 0x2000/0x2000 -j A`},
		{`-j DNAT --to-destination 10.1.1.2:80`, `-j DNAT --to-destination 10.1.1.2:81`},
		{`-j MARK --set-xmark 0x2000/0x2000`, `-j MARK --set-xmark 0x2000/0xffffffff`},
		{`-i br0 -j A`, `-o br0 -j A`},
		{`-j A`, `-j A --some-option x`},
		{`-m set --match-set s1 src -j A`, `-m set --match-set s1 dst -j A`},
	} {
		assert.False(t, rule(tc.a).Same(rule(tc.b)), "%s\n%s", tc.a, tc.b)
	}
}

func TestValueReadsAnySpelling(t *testing.T) {
	r := rule(`--protocol TCP -m comment --comment "x y" --destination-port 8080 --jump DNAT --to-destination 10.1.1.2:80`)
	for opt, want := range map[string]string{"-p": "tcp", "--dport": "8080", "--destination-port": "8080",
		"--comment": "x y", "--to-destination": "10.1.1.2:80", "-j": "DNAT"} {
		got, ok := r.Value(opt)
		assert.True(t, ok, opt)
		assert.Equal(t, want, got, opt)
	}
	_, ok := r.Value("-s")
	assert.False(t, ok)
	assert.Equal(t, "DNAT", r.Target())
	assert.Equal(t, "x y", r.Comment())
}

// A chain holds what a plugin wants, in both spellings; Holds also minds the order.
func TestChainHoldsComparesInOrder(t *testing.T) {
	c := &Chain{Name: "X", Policy: "-", Rules: []Rule{rule(`--source 10.1.0.5 -j A`), rule(`-j B`)}}
	assert.True(t, c.Holds([]Rule{rule(`-s 10.1.0.5/32 -j A`), rule(`-j B`)}))
	assert.False(t, c.Holds([]Rule{rule(`-j B`), rule(`-s 10.1.0.5/32 -j A`)}))
	assert.False(t, c.Holds([]Rule{rule(`-s 10.1.0.5/32 -j A`)}))
}

// flavourRules are rules as an operator, an older release or the other flavour wrote
// them (theirs), with the spelling a plugin of ours uses for each (ours).
var flavourRules = map[Family][]struct{ chain, theirs, ours string }{
	IPv4: {
		{"POSTROUTING", `--source 10.1.0.5 -m comment --comment "name: \"n\" id: \"c\"" --jump CNI-post`,
			`-s 10.1.0.5/32 -m comment --comment "name: \"n\" id: \"c\"" -j CNI-post`},
		{"CNI-test", `-d 10.1.0.0/255.255.255.0 -m comment --comment "name: \"n\" id: \"c\"" -j ACCEPT`,
			`-d 10.1.0.0/24 -m comment --comment "name: \"n\" id: \"c\"" -j ACCEPT`},
		{"CNI-test", `-m comment --comment "name: \"n\" id: \"c\"" ! --destination 224.0.0.0/4 -j MASQUERADE`,
			`! -d 224.0.0.0/4 -m comment --comment "name: \"n\" id: \"c\"" -j MASQUERADE`},
		{"CNI-test", `-p 6 --destination-port 8080 -s 10.1.0.7 -j DNAT --to-destination 10.1.0.5:80`,
			`-s 10.1.0.7/32 -p tcp -m tcp --dport 8080 -j DNAT --to-destination 10.1.0.5:80`},
		{"CNI-test", `-m comment --comment "dnat x" -m multiport -p udp --destination-ports 53,5353 -j RETURN`,
			`-p udp -m comment --comment "dnat x" -m multiport --dports 5353,53 -j RETURN`},
		{"CNI-test", `-m mark --mark 8192/8192 -j MASQUERADE`, `-m mark --mark 0x2000/0x2000 -j MASQUERADE`},
		{"CNI-test", `-j MARK --set-mark 0x2000/0x2000`, `-j MARK --set-xmark 0x2000/0x2000`},
		{"CNI-test", `-m comment --comment "name: \"n\" id: \"c\"" -m conntrack --ctstate ESTABLISHED,RELATED -d 10.1.0.5 -j ACCEPT`,
			`-d 10.1.0.5/32 -m conntrack --ctstate RELATED,ESTABLISHED -m comment --comment "name: \"n\" id: \"c\"" -j ACCEPT`},
		{"CNI-test", `-m addrtype --dst-type LOCAL -j RETURN`, `-m addrtype --dst-type LOCAL -j RETURN`},
		{"CNI-test", `-m comment --comment c -i br0 ! -o br0 -j RETURN`, `-i br0 ! -o br0 -m comment --comment c -j RETURN`},
	},
	IPv6: {
		{"POSTROUTING", `--source fd00::5 -m comment --comment "name: \"n\" id: \"c\"" --jump CNI-post`,
			`-s fd00::5/128 -m comment --comment "name: \"n\" id: \"c\"" -j CNI-post`},
		{"CNI-test", `-m comment --comment "name: \"n\" id: \"c\"" ! -d ff00::/8 -j MASQUERADE`,
			`! -d ff00::/8 -m comment --comment "name: \"n\" id: \"c\"" -j MASQUERADE`},
		{"CNI-test", `-p udp --dport 8081 -j DNAT --to-destination [fd01:0:0::2]:8001`,
			`-p udp -m udp --dport 8081 -j DNAT --to-destination [fd01::2]:8001`},
	},
}

// TestRulesOfEitherFlavourAreRecognisedHoweverSpelled writes rules with each iptables
// flavour in a spelling other than ours, reads the table back as that flavour prints
// it, and plans our spelling against it: every rule is found, appending ours changes
// nothing, deleting ours removes theirs. All of it in the test's own namespace; the
// machine's legacy tables stay as they were.
func TestRulesOfEitherFlavourAreRecognisedHoweverSpelled(t *testing.T) {
	testns.RequireRoot(t)
	machineLegacy := legacyTables(t)
	for _, fl := range testns.IPTablesFlavours(t) {
		for _, fam := range []Family{IPv4, IPv6} {
			t.Run(fl.Name+"/"+fam.String(), func(t *testing.T) {
				t.Parallel()
				host := testns.New(t)
				tool := func(name string) string { return fl.Tool(fam.String() + name) }
				// No hook reaches CNI-test, so that it may hold DNAT and MASQUERADE alike.
				for _, chain := range []string{"CNI-test", "CNI-post"} {
					out, err := host.Exec(t, tool(""), "-t", "nat", "-N", chain)
					require.NoError(t, err, out)
				}
				for _, r := range flavourRules[fam] {
					out, err := host.Exec(t, tool(""), append([]string{"-t", "nat", "-A", r.chain}, rule(r.theirs)...)...)
					require.NoError(t, err, out)
				}
				load := func() *Table {
					out, err := host.Exec(t, tool(""), "-t", "nat", "-S")
					require.NoError(t, err, out)
					tab, err := ParseRules(fam, "nat", out)
					require.NoError(t, err)
					return tab
				}
				tab := load()
				b := NewBatch(tab)
				for _, r := range flavourRules[fam] {
					assert.True(t, mustChain(t, tab, r.chain).Has(rule(r.ours)), "%s: written as %q, not found as %q", fl.Name, r.theirs, r.ours)
					b.AppendRule(r.chain, rule(r.ours))
				}
				assert.Zero(t, b.Len(), "appending rules that are there records nothing: %s", b.Script())
				assert.False(t, mustChain(t, tab, "CNI-test").Has(rule(`-p tcp -m tcp --dport 8081 -j RETURN`)))

				b = NewBatch(load())
				for _, r := range flavourRules[fam] {
					b.DeleteRule(r.chain, rule(r.ours))
				}
				b.DeleteChain("CNI-test")
				b.DeleteChain("CNI-post")
				require.NoError(t, b.Err())
				require.NoError(t, restore(host, tool("-restore"), b.Script()))
				after := load()
				for _, gone := range []string{"CNI-test", "CNI-post"} {
					c, err := after.Chain(gone)
					require.NoError(t, err)
					assert.Nil(t, c, gone)
				}
				assert.Empty(t, mustChain(t, after, "POSTROUTING").Rules)
			})
		}
	}
	t.Cleanup(func() {
		assert.Equal(t, machineLegacy, legacyTables(t), "the machine's own legacy tables must be untouched")
	})
}

// legacyTables lists the legacy tables of the namespace the test process started in:
// read from a goroutine that is not locked into a test namespace.
func legacyTables(t *testing.T) string {
	var b strings.Builder
	for _, f := range []string{"ip_tables_names", "ip6_tables_names"} {
		data, err := os.ReadFile("/proc/thread-self/net/" + f)
		if err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
		fmt.Fprintf(&b, "%s: %s\n", f, data)
	}
	return b.String()
}

// restore feeds script to a restore tool inside n.
func restore(n *testns.NS, tool, script string) error {
	return n.Do(func() error {
		cmd := exec.Command(tool, "--noflush", "-w")
		cmd.Stdin = strings.NewReader(script)
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Run(); err != nil {
			return fmt.Errorf("%s: %w: %s\n%s", tool, err, out.String(), script)
		}
		return nil
	})
}
