package inproc_test

import (
	"bytes"
	"context"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/containernetworking/cni/libcni"
	"github.com/containernetworking/cni/pkg/invoke"
	"github.com/containernetworking/cni/pkg/types"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cnikit/cni/internal/testbed/testns"
	"github.com/cnikit/cni/pkg/inproc"
)

// TestBuiltinsAreTheBinarysPlugins: the types that run in-process are exactly those
// `cni --list` prints.
func TestBuiltinsAreTheBinarysPlugins(t *testing.T) {
	out, err := exec.Command(testns.Binary(t), "--list").Output()
	require.NoError(t, err)
	assert.Equal(t, strings.Fields(string(out)), inproc.Builtins())
}

// TestExecAnswersVersionAsTheBinaryDoes: for every built-in, VERSION in-process gives
// the bytes the exec'd plugin prints, and libcni reads the same versions from both.
func TestExecAnswersVersionAsTheBinaryDoes(t *testing.T) {
	dir := testns.LinkPluginDir(t, inproc.Builtins()...)
	env := (&invoke.Args{Command: "VERSION", NetNS: "dummy", IfName: "dummy", Path: "dummy"}).AsEnv()
	stdin := []byte(`{"cniVersion":"1.1.0"}`)
	ctx := context.Background()
	e := &inproc.Exec{}
	for _, name := range inproc.Builtins() {
		want, err := (&invoke.RawExec{}).ExecPlugin(ctx, filepath.Join(dir, name), stdin, env)
		require.NoError(t, err, name)
		path, err := e.FindInPath(name, nil)
		require.NoError(t, err, name)
		got, err := e.ExecPlugin(ctx, path, stdin, env)
		require.NoError(t, err, name)
		assert.Equal(t, string(want), string(got), name)

		viaExec, err := libcni.NewCNIConfig([]string{t.TempDir()}, e).GetVersionInfo(ctx, name)
		require.NoError(t, err, name)
		viaBinary, err := libcni.NewCNIConfig([]string{dir}, nil).GetVersionInfo(ctx, name)
		require.NoError(t, err, name)
		assert.Equal(t, viaBinary.SupportedVersions(), viaExec.SupportedVersions(), name)
	}
}

// TestExecFailsAsTheBinaryDoes: a refused invocation gives libcni the *types.Error the
// exec'd plugin gives, code, message and details.
func TestExecFailsAsTheBinaryDoes(t *testing.T) {
	testns.RequireRoot(t)
	host := testns.New(t)
	dir := testns.LinkPluginDir(t, "bridge", "host-local", "portmap")
	args := func(cmd string) []string {
		return (&invoke.Args{Command: cmd, ContainerID: "c1", NetNS: "/proc/self/ns/none", IfName: "eth0", Path: dir}).AsEnv()
	}
	for name, c := range map[string]struct {
		plugin, command, conf string
	}{
		"unsupported version": {"bridge", "ADD", `{"cniVersion":"9.9.9","name":"n","type":"bridge"}`},
		"not json":            {"host-local", "ADD", `{"cniVersion":`},
		"bad field":           {"portmap", "ADD", `{"cniVersion":"1.1.0","name":"n","type":"portmap","snat":"yes"}`},
		"no ipam":             {"bridge", "CHECK", `{"cniVersion":"1.1.0","name":"n","type":"bridge"}`},
	} {
		t.Run(name, func(t *testing.T) {
			var want, got error
			host.Run(t, func() error {
				_, want = (&invoke.RawExec{}).ExecPlugin(context.Background(), filepath.Join(dir, c.plugin), []byte(c.conf), args(c.command))
				e := &inproc.Exec{}
				path, err := e.FindInPath(c.plugin, []string{dir})
				require.NoError(t, err)
				_, got = e.ExecPlugin(context.Background(), path, []byte(c.conf), args(c.command))
				return nil
			})
			var te *types.Error
			require.ErrorAs(t, want, &te)
			require.NotZero(t, te.Code)
			assert.Equal(t, want, got)
		})
	}
}

// TestExecExecsOtherTypesFromThePath: a type the toolkit does not hold is found on the
// path as libcni finds it, exec'd, and its failure is libcni's *types.Error with the
// plugin's code; a type found nowhere is an error naming it.
func TestExecExecsOtherTypesFromThePath(t *testing.T) {
	dir := pluginDir(t)
	e := &inproc.Exec{}
	path, err := e.FindInPath("recorder", []string{t.TempDir(), dir})
	require.NoError(t, err)
	assert.Equal(t, filepath.Join(dir, "recorder"), path)
	conf := `{"cniVersion":"1.1.0","name":"n","type":"recorder","recordFile":"` + filepath.Join(t.TempDir(), "rec") +
		`","fail":{"ADD":{"code":11,"msg":"try later","details":"busy"}}}`
	env := (&invoke.Args{Command: "ADD", ContainerID: "c1", NetNS: "/proc/self/ns/none", IfName: "eth0", Path: dir}).AsEnv()
	_, err = e.ExecPlugin(context.Background(), path, []byte(conf), env)
	assert.Equal(t, &types.Error{Code: 11, Msg: "try later", Details: "busy"}, err)

	_, err = e.FindInPath("nosuchplugin", []string{dir})
	assert.ErrorContains(t, err, "nosuchplugin")
}

// TestExecTurnsAPanicIntoACNIError: a plugin that panics on its own goroutine, on a
// thread inside the container's namespace or in the work it leaves running gives libcni
// code 999 with the panic named, its stack on Stderr; the process lives on and every
// thread is back in the process's namespace.
func TestExecTurnsAPanicIntoACNIError(t *testing.T) {
	testns.RequireRoot(t)
	host, ctr := testns.New(t), testns.New(t)
	for _, where := range []string{"callback", "netns", "background"} {
		t.Run(where, func(t *testing.T) {
			var stderr syncBuffer
			e := testExec()
			e.Stderr = &stderr
			conf := `{"cniVersion":"1.1.0","name":"p","plugins":[{"type":"loopback"},{"type":"panicker","panic":"` + where + `"}]}`
			c := newClient(t, host, e, t.TempDir(), t.TempDir(), conf)
			rt := &libcni.RuntimeConf{ContainerID: "p1", NetNS: ctr.Path, IfName: "eth0"}
			_, err := c.add(rt)
			var te *types.Error
			require.ErrorAs(t, err, &te)
			assert.Equal(t, uint(999), te.Code)
			assert.Contains(t, te.Msg, "panicker: internal error: panic: panicker:")
			assert.Contains(t, stderr.String(), "goroutine ")
			require.NoError(t, c.del(rt))
			assert.Empty(t, threadsOutsideOwnNetns(t))
		})
	}
}

// TestExecPluginStopsWhenTheCallersContextIsDone: the context libcni passes reaches an
// in-process plugin, as a killed exec would end a plugin process.
func TestExecPluginStopsWhenTheCallersContextIsDone(t *testing.T) {
	testns.RequireRoot(t)
	ctr := testns.New(t)
	e := testExec()
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	path, err := e.FindInPath("sleeper", nil)
	require.NoError(t, err)
	env := (&invoke.Args{Command: "ADD", ContainerID: "c1", NetNS: ctr.Path, IfName: "eth0", Path: "/nonexistent"}).AsEnv()
	_, err = e.ExecPlugin(ctx, path, []byte(`{"cniVersion":"1.1.0","name":"n","type":"sleeper"}`), env)
	var te *types.Error
	require.ErrorAs(t, err, &te)
	assert.Contains(t, te.Msg, context.DeadlineExceeded.Error())
	assert.NotContains(t, te.Msg, errWaitedOut.Error())
}

// syncBuffer is a bytes.Buffer that takes concurrent writes.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// TestExecDoesNotStartAPluginOnceTheCallerGaveUp: with the caller's context already
// done, libcni with our Exec fails and the plugin does nothing, as an exec'd plugin
// would never start: lo stays down.
func TestExecDoesNotStartAPluginOnceTheCallerGaveUp(t *testing.T) {
	testns.RequireRoot(t)
	host, ctr := testns.New(t), testns.New(t)
	c := newClient(t, host, &inproc.Exec{}, t.TempDir(), t.TempDir(), `{"cniVersion":"1.1.0","name":"lo","plugins":[{"type":"loopback"}]}`)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	var err error
	host.Run(t, func() error {
		_, err = c.cni.AddNetworkList(ctx, c.list, &libcni.RuntimeConf{ContainerID: "c1", NetNS: ctr.Path, IfName: "eth0"})
		return nil
	})
	var te *types.Error
	require.ErrorAs(t, err, &te)
	assert.Equal(t, uint(999), te.Code)
	assert.Contains(t, te.Msg, "loopback: ADD not started: context canceled")
	out, err := ctr.Exec(t, "ip", "-br", "link", "show", "lo")
	require.NoError(t, err, out)
	assert.Contains(t, out, "DOWN")
}
