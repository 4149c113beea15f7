package inproc_test

import (
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// procState is what a plugin run inside a host process must leave as it found it.
type procState struct {
	goroutines, fds, threads, netlinkSockets  int
	cwd, umask, sigIgnored, sigCaught, limits string
	env                                       []string
}

func snapshot(t testing.TB) procState {
	t.Helper()
	cwd, err := os.Getwd()
	require.NoError(t, err)
	status := readFile(t, "/proc/self/status")
	s := procState{
		goroutines: runtime.NumGoroutine(),
		threads:    len(list(t, "/proc/self/task")),
		cwd:        cwd,
		umask:      statusField(status, "Umask"),
		sigIgnored: statusField(status, "SigIgn"),
		sigCaught:  statusField(status, "SigCgt"),
		limits:     readFile(t, "/proc/self/limits"),
		env:        os.Environ(),
	}
	for _, name := range list(t, "/proc/self/fd") {
		s.fds++
		fd, err := strconv.Atoi(name)
		require.NoError(t, err)
		if domain, err := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_DOMAIN); err == nil && domain == unix.AF_NETLINK {
			s.netlinkSockets++
		}
	}
	return s
}

// threadsOutsideOwnNetns lists the threads of the process whose network namespace is
// not the main thread's, the process's own.
func threadsOutsideOwnNetns(t testing.TB) []string {
	t.Helper()
	own, err := os.Readlink("/proc/self/ns/net")
	require.NoError(t, err)
	var out []string
	for _, tid := range list(t, "/proc/self/task") {
		ns, err := os.Readlink(filepath.Join("/proc/self/task", tid, "ns/net"))
		if err != nil {
			continue // the thread exited meanwhile
		}
		if ns != own {
			out = append(out, tid+" in "+ns)
		}
	}
	return out
}

func list(t testing.TB, dir string) []string {
	t.Helper()
	es, err := os.ReadDir(dir)
	require.NoError(t, err)
	names := make([]string, len(es))
	for i, e := range es {
		names[i] = e.Name()
	}
	return names
}

func readFile(t testing.TB, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	return string(b)
}

func statusField(status, key string) string {
	for _, line := range strings.Split(status, "\n") {
		if v, ok := strings.CutPrefix(line, key+":"); ok {
			return strings.TrimSpace(v)
		}
	}
	return ""
}
