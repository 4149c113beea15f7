package testns

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// NoFirewallBinariesEnv is set to 1 by the no-firewall-binaries test mode (cmd/nofirewall,
// `make test-nofirewall`): the tests then run where iptables*, ip6tables*, ebtables*,
// arptables* and nft are hidden, as on a node that has none of them.
const NoFirewallBinariesEnv = "CNI_TEST_NO_FIREWALL_BINARIES"

// FirewallBinariesHidden reports whether the tests run in the no-firewall-binaries mode.
func FirewallBinariesHidden() bool { return os.Getenv(NoFirewallBinariesEnv) == "1" }

// RequireFirewallBinaries skips, in the no-firewall-binaries mode only, a test that needs
// those binaries by its nature (the iptables backend's own tests, a comparison with nft's
// listing, the reference plugins, which exec them); why says what it needs them for. Out
// of that mode it never skips: a missing binary then fails the test where it is run.
func RequireFirewallBinaries(t testing.TB, why string) {
	t.Helper()
	if FirewallBinariesHidden() {
		t.Skipf("needs the firewall binaries (%s); %s=1 hides them", why, NoFirewallBinariesEnv)
	}
}

// FakeIPTablesTools puts first in PATH, for the test, an iptables, an iptables-save and
// an iptables-restore that fail if run: what a backend choice looks up to know the
// iptables tools are installed, so that a test of the choice gives the same answer on
// every machine, the no-firewall-binaries mode included. Running one is a test's bug
// (and in that mode an exec nofirewall reports).
func FakeIPTablesTools(t testing.TB) {
	t.Helper()
	dir := t.TempDir()
	for _, tool := range []string{"iptables", "iptables-save", "iptables-restore"} {
		if err := os.WriteFile(filepath.Join(dir, tool), []byte("#!/bin/sh\nexit 1\n"), 0o755); err != nil {
			t.Fatalf("fake %s: %v", tool, err)
		}
	}
	t.Setenv("PATH", dir+string(os.PathListSeparator)+os.Getenv("PATH"))
}

// IPTablesLog records every run of the iptables tools while a test runs (LogIPTables).
type IPTablesLog struct{ path string }

// iptablesTools are the programs an iptables backend could run.
var iptablesTools = []string{"iptables", "iptables-save", "iptables-restore", "ip6tables", "ip6tables-save", "ip6tables-restore"}

// LogIPTables puts first in PATH, for the test, a wrapper of each iptables tool
// (iptables, ip6tables and their -save and -restore) that appends its command line to
// a log and runs the tool it stands for: dir's (an IPTables flavour's Dir) when dir is
// not empty, else the one PATH named before. Exec'd plugins see the wrappers when the
// test passes them PATH.
func LogIPTables(t testing.TB, dir string) *IPTablesLog {
	t.Helper()
	RequireFirewallBinaries(t, "the log wraps the iptables tools")
	shims := t.TempDir()
	l := &IPTablesLog{path: filepath.Join(shims, "log")}
	for _, tool := range iptablesTools {
		real := filepath.Join(dir, tool)
		if dir == "" {
			var err error
			if real, err = exec.LookPath(tool); err != nil {
				t.Fatalf("log %s: %v", tool, err)
			}
		}
		// One write per run: concurrent runs must not interleave their lines. The
		// arguments are separated by the unit separator, which no rule holds.
		script := fmt.Sprintf("#!/bin/sh\nline=%s\nfor a in \"$@\"; do line=\"$line$(printf '\\037')$a\"; done\nprintf '%%s\\n' \"$line\" >>%s\nexec %s \"$@\"\n",
			shellQuote(tool), shellQuote(l.path), shellQuote(real))
		if err := os.WriteFile(filepath.Join(shims, tool), []byte(script), 0o755); err != nil {
			t.Fatalf("log %s: %v", tool, err)
		}
	}
	t.Setenv("PATH", shims+string(os.PathListSeparator)+os.Getenv("PATH"))
	return l
}

// Runs returns the logged command lines, each the tool's name then its arguments, and
// empties the log.
func (l *IPTablesLog) Runs(t testing.TB) [][]string {
	t.Helper()
	b, err := os.ReadFile(l.path)
	if err != nil && !os.IsNotExist(err) {
		t.Fatalf("iptables log: %v", err)
	}
	if err := os.Remove(l.path); err != nil && !os.IsNotExist(err) {
		t.Fatalf("iptables log: %v", err)
	}
	var out [][]string
	for _, line := range strings.Split(strings.TrimSuffix(string(b), "\n"), "\n") {
		if line != "" {
			out = append(out, strings.Split(line, "\x1f"))
		}
	}
	return out
}

func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// RequireOwnReads empties the log and fails t, naming what ran (an operation of the
// test), for any run of iptables-save or ip6tables-save and for any iptables or
// ip6tables run that is not a listing (-S) or a check (-C) of a chain that allowed
// accepts, given the table, the option (-S, -C) and the chain. It returns the runs.
func (l *IPTablesLog) RequireOwnReads(t testing.TB, what string, allowed func(table, op, chain string) bool) [][]string {
	t.Helper()
	runs := l.Runs(t)
	for _, r := range runs {
		switch tool := r[0]; {
		case strings.HasSuffix(tool, "-save"):
			t.Errorf("%s ran %s: %q", what, tool, r)
		case tool == "iptables" || tool == "ip6tables":
			// iptables -w -t TABLE OP CHAIN [RULE...]
			if len(r) < 6 || r[1] != "-w" || r[2] != "-t" || (r[4] != "-S" && r[4] != "-C") || !allowed(r[3], r[4], r[5]) {
				t.Errorf("%s ran %q: a read of a chain not its own", what, r)
			}
		}
	}
	return runs
}
