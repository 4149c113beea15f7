package reftest

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"testing"
	"time"
)

// Call is one invocation of a reference plugin, as a runtime makes it.
type Call struct {
	Plugin, Command, ContainerID, Netns, IfName string
	Config                                      []byte
}

// execTimeout bounds one call: a reference plugin that hangs fails the test.
const execTimeout = 60 * time.Second

// Exec runs the reference plugin c.Plugin the way a runtime does, in the calling
// thread's network namespace (a test's "host", from inside its Do), with the reference
// plugins' own directory as CNI_PATH, so that its IPAM is the reference's too. It
// returns stdout; a failing plugin gives an error quoting what it printed.
func Exec(t testing.TB, c Call) ([]byte, error) {
	t.Helper()
	bin := Bin(t, c.Plugin)
	ctx, cancel := context.WithTimeout(context.Background(), execTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin)
	cmd.Env = []string{"CNI_COMMAND=" + c.Command, "CNI_CONTAINERID=" + c.ContainerID, "CNI_NETNS=" + c.Netns,
		"CNI_IFNAME=" + c.IfName, "CNI_PATH=" + Dir(t)}
	var stdout, stderr bytes.Buffer
	cmd.Stdin, cmd.Stdout, cmd.Stderr = bytes.NewReader(c.Config), &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.Bytes(), fmt.Errorf("reference %s %s: %v: %s %s", c.Plugin, c.Command, err, stdout.Bytes(), stderr.Bytes())
	}
	return stdout.Bytes(), nil
}
