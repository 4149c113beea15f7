// Package testns gives tests throwaway network namespaces: a "host" in which a plugin
// runs and "containers" it configures. A namespace is held by an open file descriptor
// and addressed as /proc/<pid>/fd/<n>, so nothing is mounted and nothing outlives the
// test process, even when it is killed.
package testns

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/cnikit/cni/internal/host/ns"
)

// NS is one throwaway network namespace.
type NS struct {
	handle netns.NsHandle
	// Path is what a runtime would pass as CNI_NETNS.
	Path string
	once sync.Once
}

// New creates a network namespace that is closed (and so destroyed, once nothing else
// holds it) when the test ends.
func New(t testing.TB) *NS {
	t.Helper()
	n, err := create()
	if err != nil {
		t.Fatalf("testns: %v", err)
	}
	t.Cleanup(n.Close)
	return n
}

// NewWithLoopback is New with lo up, as a real host or a chained loopback would leave it.
func NewWithLoopback(t testing.TB) *NS {
	t.Helper()
	n := New(t)
	n.Run(t, func() error {
		lo, err := netlink.LinkByName("lo")
		if err != nil {
			return err
		}
		return netlink.LinkSetUp(lo)
	})
	return n
}

// Create makes a namespace without a test to tie it to (benchmark programs); the caller
// closes it.
func Create() (*NS, error) { return create() }

func create() (*NS, error) {
	type made struct {
		h   netns.NsHandle
		err error
	}
	c := make(chan made, 1)
	go func() {
		runtime.LockOSThread()
		orig, err := netns.Get()
		if err != nil {
			runtime.UnlockOSThread()
			c <- made{err: err}
			return
		}
		defer orig.Close()
		h, err := netns.New()
		if err != nil {
			runtime.UnlockOSThread()
			c <- made{err: fmt.Errorf("unshare: %w", err)}
			return
		}
		if err := netns.Set(orig); err != nil {
			c <- made{h: h, err: fmt.Errorf("return to original netns: %w", err)}
			return // thread stays locked and is discarded
		}
		runtime.UnlockOSThread()
		c <- made{h: h}
	}()
	m := <-c
	if m.err != nil {
		if m.h.IsOpen() {
			m.h.Close()
		}
		return nil, m.err
	}
	h, err := uniqueFd(m.h)
	if err != nil {
		return nil, err
	}
	return &NS{handle: h, Path: fmt.Sprintf("/proc/%d/fd/%d", os.Getpid(), int(h))}, nil
}

// nextFd numbers namespace descriptors upwards from high above the ones the process
// uses, so a path of a closed namespace never comes to name another test's namespace
// (or a socket) through descriptor reuse: ordinary opens take the lowest free number.
var nextFd atomic.Int64

func uniqueFd(h netns.NsHandle) (netns.NsHandle, error) {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return h, nil
	}
	base := int64(lim.Cur / 2)
	nextFd.CompareAndSwap(0, base)
	min := nextFd.Add(1)
	if uint64(min) >= lim.Cur {
		return h, nil // out of high numbers: keep the ordinary descriptor
	}
	fd, _, errno := syscall.Syscall(syscall.SYS_FCNTL, uintptr(h), syscall.F_DUPFD_CLOEXEC, uintptr(min))
	if errno != 0 {
		return h, nil
	}
	h.Close()
	if int64(fd) >= min {
		nextFd.Store(int64(fd))
	}
	return netns.NsHandle(fd), nil
}

// Close releases the namespace; its path stops existing. Closing twice is harmless.
func (n *NS) Close() {
	n.once.Do(func() { n.handle.Close() })
}

// Do runs fn inside the namespace on a locked OS thread.
func (n *NS) Do(fn func() error) error { return ns.DoHandle(n.handle, fn) }

// Run is Do that fails the test on error.
func (n *NS) Run(t testing.TB, fn func() error) {
	t.Helper()
	if err := n.Do(fn); err != nil {
		t.Fatalf("in netns %s: %v", n.Path, err)
	}
}

// Handle returns a netlink handle bound to the namespace, closed with the test.
func (n *NS) Handle(t testing.TB) *netlink.Handle {
	t.Helper()
	h, err := netlink.NewHandleAt(n.handle)
	if err != nil {
		t.Fatalf("netlink handle for %s: %v", n.Path, err)
	}
	t.Cleanup(h.Close)
	return h
}

// Exec runs a command (e.g. iptables-save, ping) inside the namespace and returns its
// combined output.
func (n *NS) Exec(t testing.TB, name string, arg ...string) (string, error) {
	t.Helper()
	var out []byte
	err := n.Do(func() error {
		var err error
		out, err = exec.Command(name, arg...).CombinedOutput()
		return err
	})
	return string(out), err
}

// ExecInput is Exec with stdin (an iptables-restore script, an nft -f - ruleset).
func (n *NS) ExecInput(t testing.TB, stdin, name string, arg ...string) (string, error) {
	t.Helper()
	var out []byte
	err := n.Do(func() error {
		cmd := exec.Command(name, arg...)
		cmd.Stdin = strings.NewReader(stdin)
		var err error
		out, err = cmd.CombinedOutput()
		return err
	})
	return string(out), err
}

// RequireRoot skips tests that need CAP_NET_ADMIN when run unprivileged; the project's
// suite runs as root, so in CI this never skips.
func RequireRoot(t testing.TB) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root (CAP_NET_ADMIN) to create network namespaces")
	}
}

// Binary returns the path of the cni binary for exec-level tests: $CNI_TEST_BINARY when
// set (the full-kernel VM has no Go toolchain), otherwise a build of ./cmd/cni made once
// per test process.
func Binary(t testing.TB) string {
	t.Helper()
	if p := os.Getenv("CNI_TEST_BINARY"); p != "" {
		return p
	}
	bin, err := buildOnce()
	if err != nil {
		t.Fatalf("building cni: %v", err)
	}
	return bin.path
}

// heldBinary is the build, held in memory for as long as the test process lives.
type heldBinary struct {
	file *os.File
	path string
}

// buildOnce builds into a temp dir that it removes at once: the binary lives on in an
// anonymous memory file (memfd), which other processes exec through its /proc path
// and which vanishes with the test process, so no test run leaves a build behind.
var buildOnce = sync.OnceValues(func() (*heldBinary, error) { return build() })

// crashPointBuildOnce is buildOnce with the crashpoint tag (CrashPointBinary).
var crashPointBuildOnce = sync.OnceValues(func() (*heldBinary, error) { return build("-tags", "crashpoint") })

// build builds ./cmd/cni with the go build flags given, held in memory.
func build(flags ...string) (*heldBinary, error) {
	root, err := moduleRoot()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "cni-test-bin-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	bin := filepath.Join(dir, "cni")
	cmd := exec.Command("go", append(append([]string{"build"}, flags...), "-o", bin, "./cmd/cni")...)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("%v: %s", err, out)
	}
	return holdInMemory(bin)
}

// CrashPointBinary is Binary built with the crashpoint tag: a cni binary that kills
// itself at the end of the step that $CNI_TEST_CRASHPOINT counts to
// (internal/core/steps/crashpoint.go). $CNI_TEST_CRASHPOINT_BINARY names a prebuilt one
// (the full-kernel VM has no Go toolchain).
func CrashPointBinary(t testing.TB) string {
	t.Helper()
	if p := os.Getenv("CNI_TEST_CRASHPOINT_BINARY"); p != "" {
		return p
	}
	bin, err := crashPointBuildOnce()
	if err != nil {
		t.Fatalf("building cni with the crashpoint tag: %v", err)
	}
	return bin.path
}

// holdInMemory copies the file at path into a memfd and returns it opened read-only:
// exec refuses a file that is open for writing ("text file busy"), so the writable
// descriptor is closed once the copy is made.
func holdInMemory(path string) (*heldBinary, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	fd, err := unix.MemfdCreate("cni", unix.MFD_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("memfd: %w", err)
	}
	w := os.NewFile(uintptr(fd), "cni")
	defer w.Close()
	if _, err := w.Write(data); err != nil {
		return nil, fmt.Errorf("memfd: %w", err)
	}
	r, err := os.Open(fmt.Sprintf("/proc/self/fd/%d", fd))
	if err != nil {
		return nil, fmt.Errorf("memfd: %w", err)
	}
	if err := r.Chmod(0o755); err != nil {
		r.Close()
		return nil, fmt.Errorf("memfd: %w", err)
	}
	return &heldBinary{file: r, path: fmt.Sprintf("/proc/%d/fd/%d", os.Getpid(), r.Fd())}, nil
}

func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("go.mod not found above the test's directory")
		}
		dir = parent
	}
}

// LinkPluginDir makes a temp dir holding links named after plugins, all pointing at the
// cni binary, as /opt/cni/bin would; it returns the dir for CNI_PATH.
func LinkPluginDir(t testing.TB, names ...string) string {
	t.Helper()
	return LinkBinaryDir(t, Binary(t), names...)
}

// LinkBinaryDir is LinkPluginDir for the binary bin (CrashPointBinary).
func LinkBinaryDir(t testing.TB, bin string, names ...string) string {
	t.Helper()
	dir := t.TempDir()
	for _, name := range names {
		if err := os.Symlink(bin, filepath.Join(dir, name)); err != nil {
			t.Fatalf("link %s: %v", name, err)
		}
	}
	return dir
}

// LinkPlugin is the path of a link called name to the cni binary, alone in a plugin dir
// of its own (LinkPluginDir): the plugin a test execs as a runtime would.
func LinkPlugin(t testing.TB, name string) string {
	t.Helper()
	return filepath.Join(LinkPluginDir(t, name), name)
}

// BuildHelper returns a binary of the main package pkg (a path relative to the calling
// test's package directory, e.g. "./testdata/recorder"). In the full-kernel VM, which
// has no Go toolchain, the harness prebuilds such packages under $CNI_TEST_HELPER_DIR
// (the binary at the package's module-relative path); elsewhere it is built into a new temp dir. The
// caller removes filepath.Dir of the result when it built one (see Prebuilt).
func BuildHelper(pkg string) (string, error) {
	root, err := moduleRoot()
	if err != nil {
		return "", err
	}
	cwd, err := os.Getwd()
	if err != nil {
		return "", err
	}
	rel, err := filepath.Rel(root, filepath.Join(cwd, pkg))
	if err != nil {
		return "", err
	}
	if dir := os.Getenv("CNI_TEST_HELPER_DIR"); dir != "" {
		bin := filepath.Join(dir, rel)
		if _, err := os.Stat(bin); err != nil {
			return "", fmt.Errorf("prebuilt helper %s: %w", rel, err)
		}
		return bin, nil
	}
	dir, err := os.MkdirTemp("", "cni-test-helper-")
	if err != nil {
		return "", err
	}
	bin := filepath.Join(dir, filepath.Base(rel))
	cmd := exec.Command("go", "build", "-o", bin, "./"+rel)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		os.RemoveAll(dir)
		return "", fmt.Errorf("go build %s: %v: %s", rel, err, out)
	}
	return bin, nil
}

// Helper is a BuildHelper binary shared by a test process: built on its first use, at
// most once, and removed by Remove, which builds nothing (a fuzz worker stopped at the
// end of its run would leave such a build behind).
type Helper struct {
	pkg  string
	once sync.Once
	used atomic.Bool
	bin  string
	err  error
}

// NewHelper names the helper package, as for BuildHelper.
func NewHelper(pkg string) *Helper { return &Helper{pkg: pkg} }

// Path builds the helper on first use and returns its binary.
func (h *Helper) Path() (string, error) {
	h.once.Do(func() {
		h.used.Store(true)
		h.bin, h.err = BuildHelper(h.pkg)
	})
	return h.bin, h.err
}

// Remove deletes what Path built, if it built anything; for TestMain, after m.Run.
func (h *Helper) Remove() {
	if !h.used.Load() || Prebuilt() {
		return
	}
	if bin, err := h.Path(); err == nil {
		os.RemoveAll(filepath.Dir(bin))
	}
}

// Main is the TestMain of a package that uses h: it runs the tests, then removes what
// Path built.
func (h *Helper) Main(m *testing.M) {
	code := m.Run()
	h.Remove()
	os.Exit(code)
}

// Prebuilt reports whether BuildHelper hands out prebuilt binaries (which the caller
// must not remove).
func Prebuilt() bool { return os.Getenv("CNI_TEST_HELPER_DIR") != "" }
