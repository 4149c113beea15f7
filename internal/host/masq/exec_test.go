package masq

import (
	"os/exec"
	"strings"
)

// execIn returns a function that feeds script to a restore command; it is called
// inside the host namespace.
func execIn(cmd, script string) func() error {
	return func() error {
		c := exec.Command(cmd, "--noflush")
		c.Stdin = strings.NewReader(script)
		out, err := c.CombinedOutput()
		if err != nil {
			return &exec.ExitError{ProcessState: c.ProcessState, Stderr: out}
		}
		return nil
	}
}
