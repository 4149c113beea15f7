package testns

import (
	"os"
	"path/filepath"
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

// FakeIPTablesTools puts first in PATH, for the test, an iptables-save and an
// iptables-restore that fail if run: what a backend choice looks up to know the iptables
// tools are installed, so that a test of the choice gives the same answer on every
// machine, the no-firewall-binaries mode included. Running one is a test's bug (and
// in that mode an exec nofirewall reports).
func FakeIPTablesTools(t testing.TB) {
	t.Helper()
	dir := t.TempDir()
	for _, tool := range []string{"iptables-save", "iptables-restore"} {
		if err := os.WriteFile(filepath.Join(dir, tool), []byte("#!/bin/sh\nexit 1\n"), 0o755); err != nil {
			t.Fatalf("fake %s: %v", tool, err)
		}
	}
	t.Setenv("PATH", dir+string(os.PathListSeparator)+os.Getenv("PATH"))
}
