package portmap

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strings"

	"github.com/google/nftables/expr"

	"github.com/cnikit/cni/internal/core/cnierror"
	"github.com/cnikit/cni/internal/host/netfilter"
)

// The reference hands conditionsV4/V6 to nft as written, so any condition nft reads
// works there. Conditions parseConditions compiles go over netlink in front of every
// dnat rule; any other list goes to nft, as written, in one rule of the attachment's
// own that lets matching packets on to its dnat rules:
//
//	add rule ip cni_portmap dn-<hash> <conditions> goto dm-<hash>
//
// one `nft -f -` exec per family, only for such conditions.

// condPlan is how one family's conditions are installed.
type condPlan struct {
	field string
	// exprs are the conditions compiled over netlink; nil without conditions.
	exprs []expr.Any
	// text is the conditions as nft reads them, when parseConditions does not compile
	// them; "" otherwise.
	text string
}

// requireNFTFor refuses, where the nft command is not installed, conditions that only
// nft compiles: code 7 naming the element the first such clause starts in, before
// anything is installed.
func requireNFTFor(field string, conds []string, v6 bool) error {
	_, at, err := compileConditions(field, conds, v6)
	if err == nil {
		return nil
	}
	if _, lookErr := exec.LookPath("nft"); lookErr == nil {
		return nil
	}
	return cnierror.Invalid("%s[%d]: %q is beyond the conditions sent over netlink (ip|ip6 saddr|daddr, iifname|oifname, meta mark: %v), "+
		"and the nft command, which would compile it, is not installed", field, at, conds[at], err)
}

func planConditions(field string, conds []string, v6 bool) condPlan {
	exprs, err := parseConditions(field, conds, v6)
	if err != nil {
		return condPlan{field: field, text: strings.Join(conds, " ")}
	}
	return condPlan{field: field, exprs: exprs}
}

// gateScript is the nft input of the attachment's gate rule. The text passed
// checkNFTConditions: it cannot end the command or start another.
func (f *nftFamily) gateScript(hash, text string) string {
	return fmt.Sprintf("add rule %s %s %s%s %s goto %s%s\n", netfilter.FamilyName(f.table.Family), nftTableName, nftDNPrefix, hash, text, nftDMPrefix, hash)
}

// writeGate runs `nft -f -` with script, in the calling thread's network namespace.
// nft refusing the script means the conditions are not nft's syntax: an invalid config
// naming field.
func writeGate(ctx context.Context, field, script string) error {
	cmd := exec.CommandContext(ctx, "nft", "-f", "-")
	cmd.Stdin = strings.NewReader(script)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	var exit *exec.ExitError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &exit):
		return cnierror.Newf(cnierror.CodeInvalidConfig, "%s: nft refused the conditions: %s", field, strings.TrimSpace(out.String()))
	}
	return fmt.Errorf("%s: the nft command is needed for these conditions: %w", field, err)
}

// checkNFTConditions refuses nft conditions that could end the one `add rule` command
// they are written into (see gateScript) and so run commands of their own. The rule,
// over the conditions joined by blanks:
//   - no control character (conditions refuses them first: a newline ends a command);
//   - no backslash and no single quote anywhere: nft has neither escapes nor single-
//     quoted strings today, and a version that had them must not find a string where
//     this check saw none;
//   - double quotes pair up within each condition; inside them anything else goes,
//     as nft reads a quoted string as one token whatever it holds;
//   - outside double quotes, no ';' (it ends the command) and no '#' (a comment that
//     would swallow the rest of the line, the goto included);
//   - '{' and '}' (anonymous sets and maps) pair up, never closing more than was opened.
//
// Whatever passes is one expression list of one rule in the attachment's chain: nft
// parses it or refuses the whole script.
func checkNFTConditions(field string, conds []string) error {
	depth := 0
	for i, c := range conds {
		at := fmt.Sprintf("%s[%d]", field, i)
		if strings.ContainsAny(c, `\'`) {
			return cnierror.Invalid("%s: %q: backslashes and single quotes are not allowed in nft conditions", at, c)
		}
		quoted := false
		for _, r := range c {
			switch {
			case r == '"':
				quoted = !quoted
			case quoted:
			case r == ';' || r == '#':
				return cnierror.Invalid("%s: %q: %q outside a quoted string would end the rule", at, c, r)
			case r == '{':
				depth++
			case r == '}':
				if depth--; depth < 0 {
					return cnierror.Invalid("%s: %q: '}' closes more than was opened", at, c)
				}
			}
		}
		if quoted {
			return cnierror.Invalid("%s: %q: a double quote is not closed", at, c)
		}
	}
	if depth != 0 {
		return cnierror.Invalid("%s: a '{' is not closed", field)
	}
	return nil
}
