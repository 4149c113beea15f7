package portmap

import (
	"strings"
	"testing"
)

// FuzzCheckNFTConditions feeds the nft condition check config text (through the control
// character check every condition passes first). Whatever it accepts must give a gate
// script that nft reads as one command: one line, no backslash or single quote, double
// quotes that pair up, and no ';' or '#' outside them.
func FuzzCheckNFTConditions(f *testing.F) {
	for _, seed := range [][3]string{
		{"tcp flags syn / syn,ack", "", ""},
		{"ip saddr { 10.0.0.0/8, 192.168.0.0/16 }", `iifname "a;b#"`, ""},
		{"ip saddr", "{", "10.0.0.0/8 }"},
		{"ip saddr 10.0.0.0/8; flush ruleset", "", ""},
		{`iifname "eth0`, `; flush ruleset "`, ""},
		{"} ; {", "#", `\`},
		{`'";'`, "\n", "\x00"},
	} {
		f.Add(seed[0], seed[1], seed[2])
	}
	f.Fuzz(func(t *testing.T, a, b, c string) {
		conds := []string{a, b, c}
		checked, err := conditions("conditionsV4", &conds)
		if err != nil || checkNFTConditions("conditionsV4", checked) != nil {
			return
		}
		script := newNFTFamily(false).gateScript("0123456789abcdef01234", strings.Join(checked, " "))
		if strings.Count(script, "\n") != 1 || !strings.HasSuffix(script, "\n") {
			t.Fatalf("script is not one line: %q", script)
		}
		if strings.ContainsAny(script, `\'`) {
			t.Fatalf("script holds a backslash or single quote: %q", script)
		}
		parts := strings.Split(script, `"`)
		if len(parts)%2 == 0 {
			t.Fatalf("unpaired double quote: %q", script)
		}
		for i := 0; i < len(parts); i += 2 {
			if strings.ContainsAny(parts[i], ";#") {
				t.Fatalf("';' or '#' outside a string: %q", script)
			}
		}
		if !strings.HasSuffix(script, " goto dm-0123456789abcdef01234\n") {
			t.Fatalf("the goto is not the end of the rule: %q", script)
		}
	})
}
