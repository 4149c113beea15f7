package main

import (
	"encoding/json"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/vishvananda/netlink"

	"github.com/cnikit/cni/internal/core/cnierror"
	pt "github.com/cnikit/cni/internal/testbed/plugintest"
	"github.com/cnikit/cni/internal/testbed/testns"
)

// execPlugin runs the binary under a plugin name the way a runtime does: CNI_* in the
// environment, config on stdin, inside the test's host netns.
func execPlugin(t *testing.T, host *testns.NS, path string, env []string, stdin string) (stdout string, code int) {
	t.Helper()
	o := pt.Run(t, host, path, env, []byte(stdin))
	return o.Stdout, o.Exit
}

func TestLoopbackExecdAddCheckDel(t *testing.T) {
	testns.RequireRoot(t)
	host := testns.NewWithLoopback(t)
	ctr := testns.New(t)
	dir := testns.LinkPluginDir(t, "loopback")
	conf := `{"cniVersion":"1.0.0","name":"lo-net","type":"loopback"}`
	env := func(cmd string) []string {
		return []string{"CNI_COMMAND=" + cmd, "CNI_CONTAINERID=c1", "CNI_NETNS=" + ctr.Path,
			"CNI_IFNAME=eth0", "CNI_PATH=" + dir}
	}
	out, code := execPlugin(t, host, filepath.Join(dir, "loopback"), env("ADD"), conf)
	require.Equal(t, 0, code, out)
	var res map[string]any
	require.NoError(t, json.Unmarshal([]byte(out), &res))
	assert.Equal(t, "1.0.0", res["cniVersion"])

	ctr.Run(t, func() error {
		lo, err := netlink.LinkByName("lo")
		require.NoError(t, err)
		assert.NotZero(t, lo.Attrs().RawFlags&1, "lo is up")
		return nil
	})
	out, code = execPlugin(t, host, filepath.Join(dir, "loopback"), env("CHECK"), conf)
	assert.Equal(t, 0, code, out)
	out, code = execPlugin(t, host, filepath.Join(dir, "loopback"), env("DEL"), conf)
	assert.Equal(t, 0, code, out)
	assert.Empty(t, out)
	out, code = execPlugin(t, host, filepath.Join(dir, "loopback"), env("CHECK"), conf)
	assert.Equal(t, 1, code, "CHECK after DEL sees lo down: %s", out)
}

func TestExecdErrorsAreJSONOnStdout(t *testing.T) {
	testns.RequireRoot(t)
	host := testns.New(t)
	dir := testns.LinkPluginDir(t, "loopback", "nosuch")
	cases := []struct {
		name   string
		plugin string
		env    []string
		stdin  string
		code   uint
	}{
		{"missing vars", "loopback", []string{"CNI_COMMAND=ADD"}, `{}`, cnierror.CodeInvalidEnv},
		{"bad json", "loopback", []string{"CNI_COMMAND=DEL", "CNI_CONTAINERID=c", "CNI_IFNAME=eth0", "CNI_PATH=/x"}, `{`, cnierror.CodeDecode},
		// A DEL of a version it cannot speak succeeds (it made nothing); ADD names the version.
		{"bad version", "loopback", []string{"CNI_COMMAND=ADD", "CNI_CONTAINERID=c", "CNI_IFNAME=eth0", "CNI_PATH=/x", "CNI_NETNS=/proc/self/ns/net"}, `{"cniVersion":"9.9.9","name":"n"}`, cnierror.CodeIncompatibleVersion},
		{"unknown plugin", "nosuch", []string{"CNI_COMMAND=ADD"}, `{}`, cnierror.CodeInvalidEnv},
		{"vanished netns", "loopback", []string{"CNI_COMMAND=ADD", "CNI_CONTAINERID=c", "CNI_IFNAME=eth0", "CNI_PATH=/x", "CNI_NETNS=/proc/1/fd/999999"}, `{"cniVersion":"1.0.0","name":"n"}`, cnierror.CodeUnknownContainer},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			out, code := execPlugin(t, host, filepath.Join(dir, c.plugin), c.env, c.stdin)
			assert.Equal(t, 1, code)
			var e cnierror.Error
			require.NoError(t, json.Unmarshal([]byte(out), &e), "stdout: %q", out)
			assert.Equal(t, c.code, e.Code, out)
		})
	}
}

func TestDelWithVanishedNetnsSucceeds(t *testing.T) {
	testns.RequireRoot(t)
	host := testns.New(t)
	ctr := testns.New(t)
	path := ctr.Path
	ctr.Close()
	dir := testns.LinkPluginDir(t, "loopback")
	env := []string{"CNI_COMMAND=DEL", "CNI_CONTAINERID=c1", "CNI_NETNS=" + path, "CNI_IFNAME=eth0", "CNI_PATH=" + dir}
	out, code := execPlugin(t, host, filepath.Join(dir, "loopback"), env, `{"cniVersion":"1.1.0","name":"n","type":"loopback"}`)
	assert.Equal(t, 0, code, out)
	for i := 0; i < 2; i++ {
		out, code = execPlugin(t, host, filepath.Join(dir, "loopback"), env, `{"cniVersion":"1.1.0","name":"n","type":"loopback"}`)
		assert.Equal(t, 0, code, "DEL is idempotent: %s", out)
	}
}

// TestNetnsPathThatIsAFIFOIsNoNamespace: a FIFO at CNI_NETNS used to hang every plugin
// (the open for reading waits for a writer). DEL succeeds as for a vanished netns, ADD
// fails with the code for a netns that is not there.
func TestNetnsPathThatIsAFIFOIsNoNamespace(t *testing.T) {
	testns.RequireRoot(t)
	host := testns.New(t)
	fifo := filepath.Join(t.TempDir(), "netns")
	require.NoError(t, syscall.Mkfifo(fifo, 0o600))
	dir := testns.LinkPluginDir(t, "loopback", "bridge")
	for _, plugin := range []string{"loopback", "bridge"} {
		conf := `{"cniVersion":"1.1.0","name":"n","type":"` + plugin + `","ipam":{}}`
		env := func(cmd string) []string {
			return []string{"CNI_COMMAND=" + cmd, "CNI_CONTAINERID=c1", "CNI_NETNS=" + fifo, "CNI_IFNAME=eth0", "CNI_PATH=" + dir}
		}
		out, code := execPlugin(t, host, filepath.Join(dir, plugin), env("DEL"), conf)
		assert.Equal(t, 0, code, "%s DEL: %s", plugin, out)
		out, code = execPlugin(t, host, filepath.Join(dir, plugin), env("ADD"), conf)
		assert.Equal(t, 1, code, "%s ADD: %s", plugin, out)
	}
}
