// Package reftest gives tests the reference plugins (containernetworking/plugins at one
// pinned release) as real binaries, so that interop tests run the programs operators are
// replacing beside ours: the reference ADDs, ours CHECKs and DELs, and the other way round.
// They are built from the Go module proxy the first time a machine needs them and kept in
// the user's cache dir; nothing of them is linked into cni or committed.
package reftest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

// Version is the reference release the interop tests hold us to.
const Version = "v1.9.1"

// module is what `go install` builds: every plugin of the release.
const module = "github.com/containernetworking/plugins/plugins/..."

// DirEnv names a directory of prebuilt reference binaries, used as it is: the full-kernel
// VM has no Go toolchain, and a CI that built them once can say where.
const DirEnv = "CNI_TEST_REFERENCE_DIR"

// Dir returns the directory holding the reference plugin binaries (bridge, host-local,
// portmap, firewall, ...), building them on first use. Test processes of one `go test`
// run share the build: a flock beside the cache makes the first one build and the others
// wait for it.
//
// Where the firewall binaries are hidden (testns.FirewallBinariesHidden) the reference
// plugins run as on a node without them: those that exec iptables or nft there
// (masquerade, portmap, firewall, the spoof check) fail, so an interop test of theirs
// calls testns.RequireFirewallBinaries first, on the test's goroutine (a skip from a
// namespace's goroutine would never return to it).
func Dir(t testing.TB) string {
	t.Helper()
	if dir := os.Getenv(DirEnv); dir != "" {
		return dir
	}
	if _, err := exec.LookPath("go"); err != nil {
		t.Skipf("no Go toolchain to build the reference plugins %s with, and %s is unset", Version, DirEnv)
	}
	dir, err := cached()
	if err != nil {
		t.Fatalf("reference plugins %s: %v", Version, err)
	}
	return dir
}

// Bin returns the path of the reference plugin called name.
func Bin(t testing.TB, name string) string {
	t.Helper()
	bin := filepath.Join(Dir(t), name)
	if _, err := os.Stat(bin); err != nil {
		if os.Getenv(DirEnv) != "" {
			t.Skipf("%s has no reference %s (the full-kernel VM gets only what its harness copied)", DirEnv, name)
		}
		t.Fatalf("reference plugin %s: %v", name, err)
	}
	return bin
}

// cached returns the cache directory of Version, building it first when it is missing.
// A build goes to a temp dir beside the cache and is renamed into place whole, so a
// build killed half way leaves nothing that looks complete.
func cached() (string, error) {
	base, err := os.UserCacheDir()
	if err != nil {
		return "", err
	}
	root := filepath.Join(base, "cni-reference-plugins")
	if err := os.MkdirAll(root, 0o755); err != nil {
		return "", err
	}
	dir := filepath.Join(root, Version)
	lock, err := os.OpenFile(filepath.Join(root, ".lock"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return "", err
	}
	defer lock.Close()
	if err := unix.Flock(int(lock.Fd()), unix.LOCK_EX); err != nil {
		return "", fmt.Errorf("lock: %w", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "bridge")); err == nil {
		return dir, nil
	}
	tmp, err := os.MkdirTemp(root, ".build-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(tmp)
	cmd := exec.Command("go", "install", "-trimpath", module+"@"+Version)
	// The build must not see this module's go.mod (go install pkg@version ignores it, but
	// GOFLAGS such as -mod=vendor would not), nor write into its tree.
	cmd.Dir = tmp
	cmd.Env = append(os.Environ(), "GOBIN="+tmp, "CGO_ENABLED=0", "GOFLAGS=-mod=mod")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go install %s@%s: %v: %s", module, Version, err, out)
	}
	os.RemoveAll(dir)
	if err := os.Rename(tmp, dir); err != nil {
		return "", err
	}
	return dir, nil
}
