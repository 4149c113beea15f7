package testns

import (
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

// IPTablesRun is one logged run: the tool's name then its arguments, and for a restore
// tool the script it read.
type IPTablesRun struct {
	Args  []string
	Input string
}

// iptablesTools are the programs an iptables backend could run.
var iptablesTools = []string{"iptables", "iptables-save", "iptables-restore", "ip6tables", "ip6tables-save", "ip6tables-restore"}

// The log's separators: between arguments, between the arguments and a restore's
// script, and after each run. No rule or script holds them.
const (
	logArgSep    = "\x1f"
	logInputSep  = "\x1e"
	logRecordEnd = "\x1d\n"
)

// LogIPTables puts first in PATH, for the test, a wrapper of each iptables tool
// (iptables, ip6tables and their -save and -restore) that appends its command line,
// and a restore's script, to a log and runs the tool it stands for: dir's (an
// IPTables flavour's Dir) when dir is not empty, else the one PATH named before.
// Exec'd plugins see the wrappers when the test passes them PATH.
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
		// One write per run, so that runs side by side do not interleave their
		// records; a restore's script is read first and handed on.
		script := "#!/bin/sh\nline=" + shellQuote(tool) + "\nfor a in \"$@\"; do line=\"$line$(printf '\\037')$a\"; done\n"
		if strings.HasSuffix(tool, "-restore") {
			script += "input=$(cat)\nprintf '%s\\036%s\\035\\n' \"$line\" \"$input\" >>" + shellQuote(l.path) + "\n" +
				"printf '%s\\n' \"$input\" | exec " + shellQuote(real) + " \"$@\"\n"
		} else {
			script += "printf '%s\\036\\035\\n' \"$line\" >>" + shellQuote(l.path) + "\nexec " + shellQuote(real) + " \"$@\"\n"
		}
		if err := os.WriteFile(filepath.Join(shims, tool), []byte(script), 0o755); err != nil {
			t.Fatalf("log %s: %v", tool, err)
		}
	}
	t.Setenv("PATH", shims+string(os.PathListSeparator)+os.Getenv("PATH"))
	return l
}

// Runs returns the logged runs and empties the log.
func (l *IPTablesLog) Runs(t testing.TB) []IPTablesRun {
	t.Helper()
	b, err := os.ReadFile(l.path)
	if err != nil && !os.IsNotExist(err) {
		t.Fatalf("iptables log: %v", err)
	}
	if err := os.Remove(l.path); err != nil && !os.IsNotExist(err) {
		t.Fatalf("iptables log: %v", err)
	}
	var out []IPTablesRun
	for _, rec := range strings.Split(string(b), logRecordEnd) {
		if rec == "" {
			continue
		}
		args, input, _ := strings.Cut(rec, logInputSep)
		out = append(out, IPTablesRun{Args: strings.Split(args, logArgSep), Input: input})
	}
	return out
}

// Reads are the questions of the logged runs, each as the table, the option (-S, -C)
// and the chain: the listings and checks of iptables and ip6tables runs, and the -C
// lines of restore scripts.
func (r IPTablesRun) Reads() [][3]string {
	switch tool := r.Args[0]; {
	case tool == "iptables" || tool == "ip6tables":
		// iptables -w -t TABLE OP CHAIN [RULE...]
		if len(r.Args) >= 6 && r.Args[1] == "-w" && r.Args[2] == "-t" {
			return [][3]string{{r.Args[3], r.Args[4], r.Args[5]}}
		}
		return [][3]string{{"?", strings.Join(r.Args[1:], " "), "?"}}
	case strings.HasSuffix(tool, "-restore"):
		var out [][3]string
		table := ""
		for _, line := range strings.Split(r.Input, "\n") {
			f := strings.Fields(line)
			switch {
			case len(f) == 1 && strings.HasPrefix(f[0], "*"):
				table = f[0][1:]
			case len(f) >= 2 && f[0] == "-C":
				out = append(out, [3]string{table, "-C", f[1]})
			}
		}
		return out
	}
	return nil
}

// RequireOwnReads empties the log and fails t, naming what ran (an operation of the
// test), for any run of iptables-save or ip6tables-save and for any read (Reads) that
// allowed refuses, given the table, the option (-S, -C) and the chain. It returns the
// runs.
func (l *IPTablesLog) RequireOwnReads(t testing.TB, what string, allowed func(table, op, chain string) bool) []IPTablesRun {
	t.Helper()
	runs := l.Runs(t)
	for _, r := range runs {
		if strings.HasSuffix(r.Args[0], "-save") {
			t.Errorf("%s ran %s: %q", what, r.Args[0], r.Args)
		}
		for _, q := range r.Reads() {
			if (q[1] != "-S" && q[1] != "-C") || !allowed(q[0], q[1], q[2]) {
				t.Errorf("%s read %s %s in table %s: not its own (%q)", what, q[1], q[2], q[0], r.Args)
			}
		}
	}
	return runs
}

func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }
