package dhcptest

import (
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/cnikit/cni/internal/testbed/testns"
)

// Nobody is the uid AsUser tests run callers as.
const Nobody = 65534

// AsUser runs fn on an OS thread of its own whose effective uid is uid, as a caller of
// another user would connect to the daemon's socket (SO_PEERCRED and the socket file's
// permission both see the thread's credentials). Only that thread changes: the raw
// setresuid is per thread, unlike syscall.Setresuid. The thread gets root back, or dies
// with its goroutine when it cannot. fn runs off the test goroutine: it reports with
// t.Error, never t.FailNow.
func AsUser(t testing.TB, uid int, fn func()) {
	t.Helper()
	testns.RequireRoot(t)
	done := make(chan bool)
	go func() {
		runtime.LockOSThread()
		keep := false
		defer func() { done <- keep }()
		if _, _, e := unix.RawSyscall(unix.SYS_SETRESUID, ^uintptr(0), uintptr(uid), ^uintptr(0)); e != 0 {
			t.Errorf("setresuid(-1, %d, -1): %v", uid, e)
			return
		}
		fn()
		if _, _, e := unix.RawSyscall(unix.SYS_SETRESUID, ^uintptr(0), 0, ^uintptr(0)); e == 0 {
			keep = true
			runtime.UnlockOSThread()
		}
	}()
	if !<-done {
		t.Errorf("the thread that ran as uid %d did not get root back (it ended with its goroutine)", uid)
	}
}

// OpenTempDir is a t.TempDir that other users may enter (the test's temp dirs are
// 0700), for a socket whose own mode or peer check is under test.
func OpenTempDir(t testing.TB) string {
	t.Helper()
	dir := t.TempDir()
	for _, d := range []string{filepath.Dir(dir), dir} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}
