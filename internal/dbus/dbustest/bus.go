// Package dbustest lets tests play a D-Bus service (a fake firewalld) on a private bus:
// it starts a dbus-daemon of the test's own and serves method calls with a handler.
// It lives apart from internal/dbus so that the product client carries no serving code.
package dbustest

import (
	"bufio"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// StartBus starts a dbus-daemon of its own on a socket in a temp dir (never the system
// bus), stopped when the test ends, and returns its address. dbus-daemon must be
// installed: the tests that need it fail rather than skip without it.
func StartBus(t testing.TB) string {
	t.Helper()
	if _, err := exec.LookPath("dbus-daemon"); err != nil {
		t.Fatalf("dbus-daemon is needed for this test (apt-get install dbus): %v", err)
	}
	sock := filepath.Join(t.TempDir(), "bus")
	cmd := exec.Command("dbus-daemon", "--session", "--nofork", "--nopidfile", "--print-address", "--address=unix:path="+sock)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start dbus-daemon: %v", err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		t.Fatalf("dbus-daemon printed no address: %v", err)
	}
	return strings.TrimSpace(line)
}
