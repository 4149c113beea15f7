package dispatch

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cnikit/cni/internal/core/cnierror"
	pt "github.com/cnikit/cni/internal/testbed/plugintest"
	"github.com/cnikit/cni/internal/testbed/testns"
)

// nobody is the user the unprivileged calls run as.
const nobody = 65534

// TestWithoutPrivilegeTheErrorSaysSo: a plugin run by a user without root's privileges
// (by hand, by a helper of a rootless runtime) fails at the first netns, netlink
// request or state dir it touches; its error says that privilege may be what is
// missing, once, in its CNI error and in the CLI's message.
func TestWithoutPrivilegeTheErrorSaysSo(t *testing.T) {
	host := testns.NewWithLoopback(t)
	bin := unprivilegedBinary(t, "loopback", "host-local", "bridge")
	ctr := testns.NewWithLoopback(t)
	stateDir := t.TempDir() // root's, mode 0700
	hostLocal := fmt.Sprintf(`{"cniVersion":"1.0.0","name":"p","type":"host-local","ipam":{"type":"host-local","dataDir":%q,"subnet":"10.7.0.0/24"}}`,
		filepath.Join(stateDir, "ipam"))
	cases := []struct {
		name, plugin, netns, config string
	}{
		{"netns of another user", "loopback", ctr.Path, `{"cniVersion":"1.0.0","name":"p","type":"loopback"}`},
		{"netlink in a netns of its own", "bridge", "/proc/self/ns/net", `{"cniVersion":"1.0.0","name":"p","type":"bridge"}`},
		{"state dir", "host-local", "/proc/self/ns/net", hostLocal},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := pt.Call{Bin: filepath.Join(bin, tc.plugin), Command: "ADD", ContainerID: "unpriv-1", Netns: tc.netns, IfName: "eth0",
				Config: []byte(tc.config), Env: []string{"CNI_NETNS_OVERRIDE=1"}}
			stdout, exit := runAs(t, host, nobody, c)
			require.Equal(t, 1, exit, stdout)
			var ce cnierror.Error
			require.NoError(t, json.Unmarshal([]byte(stdout), &ce), stdout)
			assert.Equal(t, 1, strings.Count(ce.Msg, "(are you root? this needs root"), "said once: %s", ce.Msg)
		})
	}
}

// unprivilegedBinary copies the cni binary where any user may run it, with links named
// after plugins, and returns the directory.
func unprivilegedBinary(t *testing.T, plugins ...string) string {
	dir, err := os.MkdirTemp("", "cni-unprivileged-")
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(dir) })
	require.NoError(t, os.Chmod(dir, 0o755))
	src, err := os.Open(testns.Binary(t))
	require.NoError(t, err)
	defer src.Close()
	dst, err := os.OpenFile(filepath.Join(dir, "cni"), os.O_CREATE|os.O_WRONLY, 0o755)
	require.NoError(t, err)
	_, err = io.Copy(dst, src)
	require.NoError(t, err)
	require.NoError(t, dst.Close())
	for _, p := range plugins {
		require.NoError(t, os.Symlink("cni", filepath.Join(dir, p)))
	}
	return dir
}

// runAs execs c as uid inside host, returning stdout and the exit status.
func runAs(t *testing.T, host *testns.NS, uid uint32, c pt.Call) (string, int) {
	ctx, cancel := context.WithTimeout(context.Background(), pt.Timeout)
	defer cancel()
	cmd := pt.Command(ctx, c)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uid, Gid: uid}}
	var stdout strings.Builder
	cmd.Stdout = &stdout
	var err error
	host.Run(t, func() error { err = cmd.Run(); return nil })
	var exit *exec.ExitError
	if err != nil {
		require.ErrorAs(t, err, &exit)
		return stdout.String(), exit.ExitCode()
	}
	return stdout.String(), 0
}
