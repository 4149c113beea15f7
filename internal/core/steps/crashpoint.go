//go:build crashpoint

package steps

import (
	"fmt"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
)

// A binary built with the crashpoint tag (for tests only: the crash-point test of
// internal/testbed/crashtest builds one) stops dead at the end of the Nth step it takes,
// N from CrashPointEnv, the way a SIGKILL from a runtime's timeout or an OOM kill
// would: no rollback, no deferred function, nothing printed. A DEL after it must still
// finish and leave nothing. Every step of the process counts, recorded or not (the
// invocation log may be off), in every plugin a chain runs in-process.

// CrashPointEnv names the step count at whose end the process kills itself.
const CrashPointEnv = "CNI_TEST_CRASHPOINT"

// CrashPointLogEnv names a file to which each ended step's number and name is
// appended before the process may stop, so that a test can say where it stopped.
const CrashPointLogEnv = "CNI_TEST_CRASHPOINT_LOG"

// crash is the process's crash point, read once: global state, which is why it exists
// only in this test build.
var crash = sync.OnceValues(func() (int64, string) {
	n, _ := strconv.ParseInt(os.Getenv(CrashPointEnv), 10, 64)
	return n, os.Getenv(CrashPointLogEnv)
})

// ended counts the steps the process has ended.
var ended atomic.Int64

// unrecorded is the timer of a step without a recorder: it records nothing, but its end
// is counted.
func unrecorded(name string) *Timer { return &Timer{name: name} }

// stepEnded counts the end of the step called name and kills the process when it is
// the crash point.
func stepEnded(name string) {
	at, log := crash()
	if at <= 0 {
		return
	}
	n := ended.Add(1)
	if log != "" {
		if f, err := os.OpenFile(log, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600); err == nil {
			fmt.Fprintf(f, "%d %s\n", n, name)
			f.Close()
		}
	}
	if n == at {
		_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
		select {} // the signal is on its way
	}
}
