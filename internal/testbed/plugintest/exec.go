// Package plugintest is the harness plugin tests share, so that each plugin's tests say
// only what is particular to the plugin. A Call is one invocation as a runtime makes it:
// Exec runs it through the cni binary (CNI_* environment, config on stdin, result or
// CNI error JSON on stdout, exit status), Invoke runs the same call in-process through
// skel, and Libcni drives a conflist through the reference runtime library. Beside them
// are the config helpers every plugin test needs (Config, WithPrev, HostLocal) and the
// listings a test compares to prove that nothing was left behind (Links, Reservations,
// Entries).
package plugintest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cnikit/cni/internal/core/cnierror"
	"github.com/cnikit/cni/internal/spec/invoke"
	"github.com/cnikit/cni/internal/testbed/testns"
)

// Call is one invocation of a plugin, as a runtime makes it.
type Call struct {
	// Bin is the plugin's executable: a link to the cni binary named after the plugin
	// (testns.LinkPluginDir), or a reference plugin. Exec only.
	Bin string
	// Command, ContainerID, Netns and IfName are CNI_COMMAND, CNI_CONTAINERID,
	// CNI_NETNS and CNI_IFNAME.
	Command, ContainerID, Netns, IfName string
	// Args is CNI_ARGS, set only when not empty.
	Args string
	// Path is CNI_PATH: Bin's directory when empty for Exec, "/nonexistent" for Invoke.
	Path string
	// Config is the network config, on stdin.
	Config []byte
	// Env is added to the CNI_* variables of an Exec (PATH=..., CNI_LOG_FILE=...). For
	// Invoke, it is the environment that delegates the plugin execs inherit.
	Env []string
}

// In returns c for another command, as a runtime's next call for the same attachment.
func (c Call) In(command string, config []byte) Call {
	c.Command, c.Config = command, config
	return c
}

// Environ is the environment Exec gives the plugin: the CNI_* variables of c, then
// c.Env.
func (c Call) Environ() []string {
	path := c.Path
	if path == "" {
		path = filepath.Dir(c.Bin)
	}
	env := []string{"CNI_COMMAND=" + c.Command, "CNI_CONTAINERID=" + c.ContainerID, "CNI_NETNS=" + c.Netns,
		"CNI_IFNAME=" + c.IfName, "CNI_PATH=" + path}
	if c.Args != "" {
		env = append(env, "CNI_ARGS="+c.Args)
	}
	return append(env, c.Env...)
}

// Outcome is what a runtime sees of one exec'd call.
type Outcome struct {
	Stdout, Stderr string
	// Exit is the exit status, 0 on success.
	Exit int
	// Err is the CNI error the plugin printed on stdout (a *cnierror.Error) when it
	// exited non-zero, nil when it succeeded.
	Err error
	// CPU is the user and system time of the plugin and of the processes it waited
	// for, a figure that a loaded machine distorts less than wall time.
	CPU time.Duration
}

// Code is the code of the CNI error, 0 on success.
func (o Outcome) Code() uint { return cnierror.Code(o.Err) }

// CNIError is the CNI error the plugin printed, nil on success.
func (o Outcome) CNIError() *cnierror.Error {
	var ce *cnierror.Error
	errors.As(o.Err, &ce)
	return ce
}

// String shows the outcome in a failure message: the status, stdout and stderr.
func (o Outcome) String() string {
	return fmt.Sprintf("exit %d, stdout %q, stderr %q", o.Exit, o.Stdout, o.Stderr)
}

// Timeout bounds every exec'd call: a plugin that hangs (on a FIFO, a lock it should not
// wait for) fails the test instead of stalling it.
const Timeout = 30 * time.Second

// Exec runs c through c.Bin inside ns (the test's own namespace when nil), the way a
// runtime does.
func Exec(t testing.TB, ns *testns.NS, c Call) Outcome {
	t.Helper()
	return Run(t, ns, c.Bin, c.Environ(), c.Config)
}

// Command is the exec.Cmd of c, for a test that starts the plugin and stops it itself
// (a runtime killed mid-ADD); it starts in the namespace of the thread that starts it.
func Command(ctx context.Context, c Call) *exec.Cmd {
	return command(ctx, c.Bin, c.Environ(), c.Config)
}

func command(ctx context.Context, bin string, env []string, stdin []byte) *exec.Cmd {
	cmd := exec.CommandContext(ctx, bin)
	cmd.Env, cmd.Stdin = env, bytes.NewReader(stdin)
	return cmd
}

// Run execs bin inside ns (the test's own namespace when nil) with exactly env and
// stdin, within Timeout. A plugin's failure must be a CNI error on stdout, as the spec
// says: a non-zero exit whose stdout is not one fails the test, and so does a bin that
// cannot be started at all.
func Run(t testing.TB, ns *testns.NS, bin string, env []string, stdin []byte) Outcome {
	t.Helper()
	o := run(t, ns, Timeout, env, stdin, bin)
	if o.Exit != 0 {
		var ce cnierror.Error
		require.NoError(t, json.Unmarshal([]byte(o.Stdout), &ce), "a failed call's stdout is a CNI error: %s", o)
		o.Err = &ce
	}
	return o
}

// CommandTimeout bounds a RunCommand: the cni CLI runs whole chains.
const CommandTimeout = 2 * time.Minute

// RunCommand runs bin with args, a program that is no plugin call (the cni CLI, a
// tool), inside ns (the test's own namespace when nil) with exactly env and stdin,
// within CommandTimeout: Exit says how it ended, Err stays nil.
func RunCommand(t testing.TB, ns *testns.NS, env []string, stdin []byte, bin string, args ...string) Outcome {
	t.Helper()
	return run(t, ns, CommandTimeout, env, stdin, bin, args...)
}

// run runs bin and says how it ended; only a bin that cannot be started or does not
// finish within timeout fails the test.
func run(t testing.TB, ns *testns.NS, timeout time.Duration, env []string, stdin []byte, bin string, args ...string) Outcome {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := command(ctx, bin, env, stdin)
	cmd.Args = append(cmd.Args, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	// The child starts in the namespace of the thread that forks it.
	var err error
	if ns == nil {
		err = cmd.Run()
	} else {
		ns.Run(t, func() error { err = cmd.Run(); return nil })
	}
	o := Outcome{Stdout: stdout.String(), Stderr: stderr.String()}
	if cmd.ProcessState != nil {
		o.CPU = cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
	}
	require.NoError(t, ctx.Err(), "%s did not finish within %v: %s", filepath.Base(bin), timeout, o)
	if err != nil {
		var exit *exec.ExitError
		require.ErrorAs(t, err, &exit, "exec %s", bin)
		o.Exit = exit.ExitCode()
	}
	return o
}

// AssertFailed checks what a runtime must see of a call the plugin refuses: exit status
// 1 and a CNI error of code on stdout whose message names each of names. It reports
// whether all of that held.
func AssertFailed(t testing.TB, o Outcome, code uint, names ...string) bool {
	t.Helper()
	ok := assert.Equal(t, 1, o.Exit, "exit status: %s", o)
	if !assert.NotNil(t, o.CNIError(), "a CNI error: %s", o) {
		return false
	}
	ok = assert.Equal(t, code, o.Code(), "code: %s", o) && ok
	for _, n := range names {
		ok = assert.Contains(t, o.CNIError().Msg, n) && ok
	}
	return ok
}

// RequireRefused checks what a runtime must see of a call the plugin refuses when run
// in-process (Invoke): an error (the test ends when there is none) of code, whose
// message names each of names. It reports whether all of that held.
func RequireRefused(t testing.TB, err error, code uint, names ...string) bool {
	t.Helper()
	require.Error(t, err)
	ok := assert.Equal(t, code, Code(err), "code: %v", err)
	for _, n := range names {
		ok = assert.Contains(t, err.Error(), n) && ok
	}
	return ok
}

// AssertEachRefused execs c once per config of configs (a subtest each, named by its
// key), inside ns as Exec does, and checks that each is refused as AssertFailed says,
// with code, and that then leftNothing holds: the test's "nothing left behind".
func AssertEachRefused(t *testing.T, ns *testns.NS, c Call, code uint, configs map[string][]byte, leftNothing func(t *testing.T)) {
	for name, config := range configs {
		t.Run(name, func(t *testing.T) {
			AssertFailed(t, Exec(t, ns, c.In(c.Command, config)), code)
			leftNothing(t)
		})
	}
}

// AssertAnswersVersion checks that bin, asked for its versions as a runtime asks
// (CNI_COMMAND=VERSION and nothing else), answers with the spec's version object. It
// execs through invoke.Exec, which retries an exec that finds the file still open for
// writing: parallel tests write binaries, and another test's fork may hold one.
func AssertAnswersVersion(t testing.TB, bin string) bool {
	t.Helper()
	out, err := invoke.Exec(context.Background(), bin, []string{"CNI_COMMAND=VERSION"}, nil, nil)
	if !assert.NoError(t, err, bin) {
		return false
	}
	return assert.Contains(t, string(out), `"cniVersion"`, bin) && assert.Contains(t, string(out), `"supportedVersions"`, bin)
}

// ForEachBackend runs body as a subtest per rule backend a plugin with rules offers,
// "nftables" and "iptables", the latter skipped where the firewall binaries are hidden
// (make test-nofirewall): the iptables backend runs them.
func ForEachBackend(t *testing.T, body func(t *testing.T, backend string)) {
	for _, backend := range []string{"nftables", "iptables"} {
		t.Run(backend, func(t *testing.T) {
			if backend == "iptables" {
				testns.RequireFirewallBinaries(t, "the iptables backend's own test")
			}
			body(t, backend)
		})
	}
}
