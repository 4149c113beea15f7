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
