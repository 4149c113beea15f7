// A plugin lives for milliseconds, so sizing GOMAXPROCS from the cgroup CPU limit buys
// nothing, and finding that limit reads /proc/self/mountinfo, which on a busy node
// (hundreds of container mounts) is the largest file the process would read at start.
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
