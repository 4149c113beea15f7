package chain_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cnikit/cni/internal/chain"
	"github.com/cnikit/cni/internal/core/cnierror"
	"github.com/cnikit/cni/internal/testbed/testns"
)

// daemonizingPlugin writes a plugin that starts a child keeping its stdout and stderr
// (as a plugin starting a daemon without redirecting it does), writes the child's pid
// to pidFile, prints output and exits with status. The child lives childSeconds.
func daemonizingPlugin(t testing.TB, dir, pidFile, output string, status, childSeconds int) {
	t.Helper()
	script := fmt.Sprintf(`#!/bin/sh
cat >/dev/null
sleep %d &
echo $! >%s
echo "plugin: started a child" >&2
printf '%%s\n' '%s'
exit %d
`, childSeconds, pidFile, output, status)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "daemonizing"), []byte(script), 0o755))
	t.Cleanup(func() {
		if pid, err := readPid(pidFile); err == nil {
			syscall.Kill(pid, syscall.SIGKILL)
		}
	})
}

func readPid(file string) (int, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return 0, err
	}
	return strconv.Atoi(strings.TrimSpace(string(b)))
}

// TestPluginExitEndsTheCallWhateverItsChildHolds: a plugin that exits while a child it
// started still holds its stdout and stderr is done. libcni waits for the child (it
// reads a pipe to its end); this runner returns at once, with the plugin's result, its
// stderr passed through, and the child still running.
func TestPluginExitEndsTheCallWhateverItsChildHolds(t *testing.T) {
	testns.RequireRoot(t)
	ctr := testns.New(t)
	dir := t.TempDir()
	pidFile := filepath.Join(t.TempDir(), "pid")
	daemonizingPlugin(t, dir, pidFile, `{"cniVersion":"1.1.0","interfaces":[{"name":"daemon0"}]}`, 0, 60)
	r := newRunner(t, dir)
	var stderr bytes.Buffer
	r.Stderr = &stderr
	n := parse(t, `{"cniVersion":"1.1.0","name":"n","plugins":[{"type":"daemonizing"}]}`)

	res, err := r.Add(context.Background(), n, chain.Attachment{ContainerID: "c1", Netns: ctr.Path, IfName: "eth0"})
	require.NoError(t, err)
	require.Len(t, res.Interfaces, 1)
	assert.Equal(t, "daemon0", res.Interfaces[0].Name)
	assert.Equal(t, "plugin: started a child\n", stderr.String())
	pid, err := readPid(pidFile)
	require.NoError(t, err)
	assert.NoError(t, syscall.Kill(pid, 0), "the child still runs, holding the plugin's stdout")
}

func TestPluginFailureIsReportedWhateverItsChildHolds(t *testing.T) {
	testns.RequireRoot(t)
	ctr := testns.New(t)
	dir := t.TempDir()
	pidFile := filepath.Join(t.TempDir(), "pid")
	daemonizingPlugin(t, dir, pidFile, `{"cniVersion":"1.1.0","code":11,"msg":"try again"}`, 1, 60)
	r := newRunner(t, dir)
	n := parse(t, `{"cniVersion":"1.1.0","name":"n","plugins":[{"type":"daemonizing"}]}`)

	_, err := r.Add(context.Background(), n, chain.Attachment{ContainerID: "c1", Netns: ctr.Path, IfName: "eth0"})
	assert.Equal(t, uint(cnierror.CodeTryAgainLater), cnierror.Code(err))
	assert.ErrorContains(t, err, "try again")
	pid, err := readPid(pidFile)
	require.NoError(t, err)
	assert.NoError(t, syscall.Kill(pid, 0))
}
