package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cnikit/cni/internal/testbed/testns"
)

// helperEnv makes the test binary act as nofirewall's second stage (run), which it
// reaches through a re-exec of itself in a new mount namespace, as main's reexec does.
const helperEnv = "NOFIREWALL_TEST_HELPER"

func TestMain(m *testing.M) {
	if os.Getenv(helperEnv) == "1" {
		os.Exit(run(os.Getenv("NOFIREWALL_TEST_TRACE"), os.Args[1:]))
	}
	os.Exit(m.Run())
}

// runHidden runs argv under nofirewall's second stage in a mount namespace of its own
// and returns its exit status, its output and the trace file.
func runHidden(t *testing.T, argv ...string) (int, string, string) {
	t.Helper()
	testns.RequireRoot(t)
	trace := filepath.Join(t.TempDir(), "trace")
	cmd := exec.Command(os.Args[0], argv...)
	cmd.Env = append(os.Environ(), helperEnv+"=1", "NOFIREWALL_TEST_TRACE="+trace)
	cmd.SysProcAttr = &syscall.SysProcAttr{Unshareflags: syscall.CLONE_NEWNS}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	status := exitCode(cmd.Run())
	b, _ := os.ReadFile(trace)
	return status, out.String(), string(b)
}

// The firewall tools are not found by name in the namespace, the command's status comes
// back, the trace lists what ran, and the machine's own tools are untouched.
func TestFirewallBinariesAreHiddenInTheNamespaceOnly(t *testing.T) {
	before, beforeErr := exec.LookPath("nft")
	status, out, trace := runHidden(t, "sh", "-c",
		`for t in iptables ip6tables iptables-restore iptables-legacy-save ebtables arptables nft; do
			command -v $t && exit 1
		done
		test "$`+testns.NoFirewallBinariesEnv+`" = 1 && ip link show lo >/dev/null && exit 7`)
	assert.Equal(t, 7, status, out)
	assert.Contains(t, trace, "/ip\t", "the trace lists the commands run")
	assert.Contains(t, out, "none of a firewall binary")
	after, afterErr := exec.LookPath("nft")
	assert.Equal(t, before, after, "the machine's nft is where it was")
	assert.Equal(t, beforeErr, afterErr)
	if beforeErr == nil {
		fi, err := os.Stat(after)
		require.NoError(t, err)
		assert.NotZero(t, fi.Mode()&0o111, "and still executable outside the namespace")
	}
}

// A firewall tool run by a path the hiding does not cover (a copy, a tool outside PATH)
// is caught by the trace: the run fails, naming it.
func TestAnExecOfAFirewallBinaryFailsTheRun(t *testing.T) {
	dir := t.TempDir()
	tool := filepath.Join(dir, "iptables-restore")
	require.NoError(t, os.WriteFile(tool, []byte("#!/bin/sh\nexit 0\n"), 0o755))
	status, out, _ := runHidden(t, "sh", "-c", tool)
	assert.Equal(t, exitViolated, status, out)
	assert.Contains(t, out, "a firewall binary was exec'd: pid")
	assert.Contains(t, out, tool)
}

func TestFirewallNames(t *testing.T) {
	for _, name := range []string{"iptables", "iptables-nft-restore", "ip6tables-legacy-save", "ebtables", "arptables-nft",
		"xtables-nft-multi", "xtables-legacy-multi", "nft"} {
		assert.True(t, isFirewallName(name), name)
	}
	for _, name := range []string{"ip", "nftables", "cni", "tc", "bridge", "nft-helper"} {
		assert.False(t, isFirewallName(name), name)
	}
	assert.False(t, strings.Contains(strings.Join(searchDirs(), ":"), "::"))
}
