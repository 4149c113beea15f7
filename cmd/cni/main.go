// A plugin lives for milliseconds, so sizing GOMAXPROCS from the cgroup CPU limit, and
// updating it while the process runs, buy nothing: GOMAXPROCS stays the CPU count. The
// runtime (Go 1.25 on) still reads /proc/self/cgroup, /proc/self/mountinfo and the limit
// once at start whatever these say, to count in its metrics what the setting changed,
// as the reference's plugins do (strace, 2026-12-06).
//
//go:debug containermaxprocs=0
//go:debug updatemaxprocs=0

// Command cni is the multi-call CNI toolkit binary. main only hands the process to
// internal/dispatch; nothing else reads os.Args, the environment or the exit code.
package main

import (
	"os"

	"github.com/cnikit/cni/internal/dispatch"
)

func main() {
	os.Exit(dispatch.Main(dispatch.Process{
		Args:   os.Args,
		Env:    os.Environ(),
		Stdin:  os.Stdin,
		Stdout: os.Stdout,
		Stderr: os.Stderr,
	}))
}
