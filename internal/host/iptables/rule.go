package iptables

import (
	"fmt"
	"strings"
	"unicode"
)

// Rule is one rule's arguments after `-A <chain>`, e.g. {"-s", "10.1.0.5", "-m",
// "comment", "--comment", "x", "-j", "CNI-abc"}, in any spelling iptables accepts.
//
// Rules are compared by what they mean (Same), never by their text: iptables-legacy,
// iptables-nft and their versions print one rule differently (iptables-nft puts -p
// before the other matches, `-m tcp` appears or not, an address gains /32, an old
// version writes `-d ! x` where a new one writes `! -d x`), and a rule written by an
// operator or an older release is spelled as they chose.
type Rule []string

// Same reports whether r and o are the same rule to iptables: the same options with
// the same values and the same target, however each is spelled and in whatever order
// the matches come (see options for the equivalences).
func (r Rule) Same(o Rule) bool { return r.meaning() == o.meaning() }

// Value returns the value of option name (any spelling: "--dport" finds
// "--destination-port") in its canonical form, e.g. "10.1.0.5/32" for -s; ok is false
// when the rule does not have the option.
func (r Rule) Value(name string) (value string, ok bool) {
	name, _ = canonicalName(name)
	for o := range r.walk {
		if o.name == name {
			return canonicalValue(o).value, true
		}
	}
	return "", false
}

// Target returns the target of -j (or the chain of -g), or "".
func (r Rule) Target() string {
	for o := range r.walk {
		if o.name == "-j" || o.name == "-g" {
			return o.value
		}
	}
	return ""
}

// Comment returns the text of the comment match, or "".
func (r Rule) Comment() string {
	v, _ := r.Value("--comment")
	return v
}

// String renders r as iptables-restore reads it, quoting arguments that need it. An
// argument holding a control character cannot be written safely (a newline would start
// a new line of the script); Batch refuses such rules before rendering them.
func (r Rule) String() string {
	var b strings.Builder
	for i, a := range r {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(quote(a))
	}
	return b.String()
}

// checkLine refuses a chain name, or an argument of r (nil for none), that
// iptables-restore could read as something else.
func checkLine(chain string, r Rule) error {
	if err := CheckChainName(chain); err != nil {
		return err
	}
	for _, a := range r {
		if err := CheckArg(a); err != nil {
			return fmt.Errorf("chain %s: %w", chain, err)
		}
	}
	return nil
}

func quote(a string) string {
	if a != "" && !strings.ContainsAny(a, " \t\"'\\") {
		return a
	}
	return `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(a) + `"`
}

// CheckArg refuses an argument that quoting cannot make safe in an iptables-restore
// script: a control character (a newline above all, which would end the line and let
// the rest be read as commands, or a NUL, which would cut it short). Blanks, quotes and
// backslashes are quoted by String.
func CheckArg(a string) error {
	if i := strings.IndexFunc(a, unicode.IsControl); i >= 0 {
		return fmt.Errorf("%q contains the control character %q", a, a[i])
	}
	return nil
}
