// Command nofirewall runs a command (the test suite: `make test-nofirewall`) as on a node
// that has no iptables and no nft at all: in a mount namespace of its own where every
// iptables*, ip6tables*, ebtables*, arptables*, xtables-* and nft in PATH and the usual
// bin directories is hidden, by bind-mounting an empty, non-executable file over it.
// Nothing outside that namespace changes: its mounts do not propagate, and they vanish
// with it.
//
// Meanwhile it traces every exec in the namespace (fanotify FAN_OPEN_EXEC on each of its
// mounts) and fails when one of them ran a firewall binary by any path or name (a copy,
// a busybox applet, a tool outside the hidden directories). A firewall binary looked up
// by name is not found (exec.LookPath reports exec.ErrNotFound), so a plugin that would
// run one fails where the test would see it. The command sees CNI_TEST_NO_FIREWALL_BINARIES=1,
// which the tests that need the binaries by nature (the iptables backend's own tests,
// comparisons with nft's listing) read to skip with that reason (testns.RequireFirewallBinaries).
//
// Usage: nofirewall [-trace FILE] -- COMMAND [ARG...]
//
// The exit status is the command's, or 3 when the trace holds a firewall binary's exec
// (each is printed with the pid and the command line that ran it), or 2 when the
// namespace could not be set up. It must run as root.
package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"syscall"

	"github.com/cnikit/cni/internal/testbed/testns"
)

// stageEnv marks the re-exec of nofirewall inside the new mount namespace.
const stageEnv = "NOFIREWALL_STAGE"

const (
	exitSetup    = 2
	exitViolated = 3
)

func main() {
	trace := flag.String("trace", "", "write every exec seen (pid, path, command line) to this file")
	flag.Usage = func() {
		fmt.Fprintf(flag.CommandLine.Output(), "usage: %s [-trace FILE] -- COMMAND [ARG...]\n", os.Args[0])
		flag.PrintDefaults()
	}
	flag.Parse()
	if flag.NArg() == 0 {
		flag.Usage()
		os.Exit(exitSetup)
	}
	if os.Getenv(stageEnv) == "" {
		os.Exit(reexec())
	}
	os.Exit(run(*trace, flag.Args()))
}

// reexec runs this program again in a new mount namespace, where run does the work: the
// namespace is the child's from its first instruction, so nothing of this process (the
// Go runtime's other threads) is ever half in one namespace and half in the other.
func reexec() int {
	self, err := os.Executable()
	if err != nil {
		return fail(err)
	}
	cmd := passOn(self, os.Args[1:], stageEnv)
	cmd.SysProcAttr = &syscall.SysProcAttr{Unshareflags: syscall.CLONE_NEWNS}
	return exitCode(cmd.Run())
}

func run(tracePath string, argv []string) int {
	// Every mount of this namespace private: the bind mounts made here must never reach
	// the namespace it was copied from.
	if err := syscall.Mount("", "/", "", syscall.MS_REC|syscall.MS_PRIVATE, ""); err != nil {
		return fail(fmt.Errorf("make mounts private: %w", err))
	}
	hidden, err := hideFirewallBinaries(searchDirs())
	if err != nil {
		return fail(err)
	}
	fmt.Fprintf(os.Stderr, "nofirewall: hid %d firewall binaries (%s=1)\n", len(hidden), testns.NoFirewallBinariesEnv)
	tr, err := startTrace()
	if err != nil {
		return fail(err)
	}
	status := exitCode(passOn(argv[0], argv[1:], testns.NoFirewallBinariesEnv).Run())
	execs, err := tr.stop()
	if err != nil {
		return fail(err)
	}
	if tracePath != "" {
		if err := writeTrace(tracePath, execs); err != nil {
			return fail(err)
		}
	}
	if bad := firewallExecs(execs, hidden); len(bad) > 0 {
		for _, e := range bad {
			fmt.Fprintf(os.Stderr, "nofirewall: a firewall binary was exec'd: %s\n", e)
		}
		return exitViolated
	}
	fmt.Fprintf(os.Stderr, "nofirewall: %d execs traced, none of a firewall binary\n", len(execs))
	return status
}

// passOn is a command that runs with this process's stdio and environment, and flag set
// to 1 in it.
func passOn(name string, args []string, flag string) *exec.Cmd {
	cmd := exec.Command(name, args...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	cmd.Env = append(os.Environ(), flag+"=1")
	return cmd
}

func exitCode(err error) int {
	var exit *exec.ExitError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &exit):
		if exit.ExitCode() < 0 {
			return 1 // killed by a signal
		}
		return exit.ExitCode()
	}
	return fail(err)
}

func fail(err error) int {
	fmt.Fprintf(os.Stderr, "nofirewall: %v\n", err)
	return exitSetup
}
