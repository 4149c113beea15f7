package invoke

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cnikit/cni/internal/core/cnierror"
	"github.com/cnikit/cni/internal/core/tracectx"
)

// plugin writes a shell script named name into dir and returns its path: a stand-in for
// a plugin binary, which Exec runs as it runs any.
func plugin(t *testing.T, dir, name, body string) string {
	t.Helper()
	path := filepath.Join(dir, name)
	require.NoError(t, os.WriteFile(path, []byte("#!/bin/sh\n"+body+"\n"), 0o755))
	return path
}

func TestFindInPathReturnsTheFirstRegularFileOfThePath(t *testing.T) {
	first, second, third := t.TempDir(), t.TempDir(), t.TempDir()
	require.NoError(t, os.Mkdir(filepath.Join(first, "bridge"), 0o755)) // a directory is no plugin
	want := plugin(t, second, "bridge", "exit 0")
	plugin(t, third, "bridge", "exit 0")
	got, err := FindInPath("bridge", []string{first, second, third})
	require.NoError(t, err)
	assert.Equal(t, want, got)
}

func TestFindInPathFollowsLinksAndIgnoresTheExecBit(t *testing.T) {
	dir := t.TempDir()
	target := filepath.Join(dir, "cni")
	require.NoError(t, os.WriteFile(target, nil, 0o644))
	require.NoError(t, os.Symlink(target, filepath.Join(dir, "loopback")))
	got, err := FindInPath("loopback", []string{dir})
	require.NoError(t, err)
	assert.Equal(t, filepath.Join(dir, "loopback"), got)
}

func TestFindInPathRefusals(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct {
		name, typ string
		paths     []string
		code      uint
		cannotRun bool
		msg       string
	}{
		{"no type", "", []string{dir}, cnierror.CodeInvalidConfig, true, "no plugin name provided"},
		{"a path", "../bin/sh", []string{dir}, cnierror.CodeInvalidConfig, true, `invalid plugin name "../bin/sh": must not contain a path separator`},
		{"no path", "bridge", nil, cnierror.CodeInvalidEnv, false, `no paths provided to find plugin "bridge" in`},
		{"not there", "bridge", []string{dir}, cnierror.CodeInvalidConfig, true, `failed to find plugin "bridge" in path [` + dir + `]`},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := FindInPath(c.typ, c.paths)
			require.Error(t, err)
			assert.Equal(t, c.code, cnierror.Code(err))
			assert.Equal(t, c.cannotRun, errors.Is(err, cnierror.ErrCannotRun), "marked: no ADD can have run it")
			assert.Equal(t, c.msg, err.Error())
		})
	}
}

func TestExecHandsThePluginEnvAndStdinAndReturnsItsStdout(t *testing.T) {
	path := plugin(t, t.TempDir(), "p", `echo "$CNI_COMMAND $CNI_IFNAME"; cat`)
	out, err := Exec(context.Background(), path, []string{"CNI_COMMAND=ADD", "CNI_IFNAME=eth0"}, []byte(`{"name":"n"}`), nil)
	require.NoError(t, err)
	assert.Equal(t, "ADD eth0\n{\"name\":\"n\"}", string(out))
}

func TestExecPassesThePluginsStderrOn(t *testing.T) {
	path := plugin(t, t.TempDir(), "p", `echo warning >&2; echo '{}'`)
	var stderr bytes.Buffer
	out, err := Exec(context.Background(), path, nil, nil, &stderr)
	require.NoError(t, err)
	assert.Equal(t, "{}\n", string(out))
	assert.Equal(t, "warning\n", stderr.String())
}

func TestExecFailures(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct {
		name, body string
		code       uint
		msg        string
		cannotRun  bool
	}{
		{"error JSON keeps its code", `echo '{"code":7,"msg":"bad mtu","details":"d"}'; exit 1`, 7, "bad mtu; d", false},
		{"incompatible version cannot have run", `echo '{"code":1,"msg":"incompatible CNI versions"}'; exit 1`, 1, "incompatible CNI versions", true},
		{"no JSON quotes stderr", `echo oops >&2; exit 3`, 0, `netplugin failed: "oops\n": exit status 3`, false},
		{"nothing said", `exit 2`, 0, "netplugin failed with no error message: exit status 2", false},
		{"stdout no JSON", `echo garbage; exit 1`, 0, `netplugin failed but error parsing its diagnostic message "garbage\n": invalid character 'g' looking for beginning of value`, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := Exec(context.Background(), plugin(t, dir, "p", c.body), nil, nil, nil)
			require.Error(t, err)
			var ce *cnierror.Error
			require.ErrorAs(t, err, &ce, "a failure is a *cnierror.Error")
			assert.Equal(t, c.code, ce.Code)
			assert.Equal(t, c.msg, ce.Error())
			assert.Equal(t, c.cannotRun, errors.Is(err, cnierror.ErrCannotRun))
		})
	}
}

func TestExecQuotesABoundedStderrButPassesAllOfItOn(t *testing.T) {
	path := plugin(t, t.TempDir(), "p", `head -c 40000 /dev/zero | tr '\0' x >&2; exit 1`)
	var stderr bytes.Buffer
	_, err := Exec(context.Background(), path, nil, nil, &stderr)
	require.Error(t, err)
	assert.Equal(t, 40000, stderr.Len())
	assert.Equal(t, `netplugin failed: "`+strings.Repeat("x", maxStderr)+`": exit status 1`, err.Error())
}

func TestExecOfAMissingFileFails(t *testing.T) {
	gone := filepath.Join(t.TempDir(), "gone")
	_, err := Exec(context.Background(), gone, nil, nil, nil)
	require.Error(t, err)
	assert.Equal(t, "netplugin failed with no error message: fork/exec "+gone+": no such file or directory", err.Error())
}

func TestExecStopsAPluginWhenTheContextEnds(t *testing.T) {
	path := plugin(t, t.TempDir(), "p", `exec sleep 30`)
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := Exec(ctx, path, nil, nil, nil)
	require.Error(t, err)
	assert.Less(t, time.Since(start), 10*time.Second)
	assert.Equal(t, cnierror.CodeInternal, cnierror.Code(err))
	assert.Contains(t, err.Error(), "netplugin did not finish: context deadline exceeded")
}

// A plugin that leaves a child running with its stdout open (a daemon it started) is
// done when it exits: its output is what it wrote by then.
func TestExecReturnsWhenThePluginExitsNotItsChildren(t *testing.T) {
	path := plugin(t, t.TempDir(), "p", `echo '{}'; sleep 20 & exit 0`)
	start := time.Now()
	out, err := Exec(context.Background(), path, nil, nil, nil)
	require.NoError(t, err)
	assert.Equal(t, "{}\n", string(out))
	assert.Less(t, time.Since(start), 10*time.Second)
}

func TestExecHandsTheContextsSpanOnOverInheritedCarriers(t *testing.T) {
	path := plugin(t, t.TempDir(), "p", `echo "$TRACEPARENT|$TRACESTATE|$BAGGAGE"`)
	span := tracectx.New()
	span.State = "k=v"
	env := []string{"TRACEPARENT=00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01", "BAGGAGE=stale=1"}
	out, err := Exec(tracectx.With(context.Background(), span), path, env, nil, nil)
	require.NoError(t, err)
	assert.Equal(t, span.Traceparent()+"|k=v|\n", string(out), "the context's span wins; a stale carrier it lacks is dropped")

	out, err = Exec(context.Background(), path, env, nil, nil)
	require.NoError(t, err)
	assert.Equal(t, "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01||stale=1\n", string(out), "without a span, env is as given")
}

// A binary being replaced is busy ("text file busy") while its writer holds it open:
// Exec tries again, each time with a fresh command, and runs it once it is free.
func TestExecRetriesABusyBinary(t *testing.T) {
	path := plugin(t, t.TempDir(), "p", `echo '{}'`)
	w, err := os.OpenFile(path, os.O_WRONLY, 0)
	require.NoError(t, err)
	released := make(chan struct{})
	go func() {
		time.Sleep(120 * time.Millisecond)
		w.Close()
		close(released)
	}()
	out, err := Exec(context.Background(), path, nil, nil, nil)
	<-released
	require.NoError(t, err)
	assert.Equal(t, "{}\n", string(out))
}

func TestExecGivesUpOnABinaryThatStaysBusy(t *testing.T) {
	path := plugin(t, t.TempDir(), "p", `echo '{}'`)
	w, err := os.OpenFile(path, os.O_WRONLY, 0)
	require.NoError(t, err)
	defer w.Close()
	start := time.Now()
	_, err = Exec(context.Background(), path, nil, nil, nil)
	require.Error(t, err)
	assert.Contains(t, err.Error(), syscall.ETXTBSY.Error())
	// Five attempts, waiting 50, 100, 200 and 400 ms between them.
	assert.GreaterOrEqual(t, time.Since(start), 750*time.Millisecond)
}

func TestExecStopsRetryingWhenTheContextEnds(t *testing.T) {
	path := plugin(t, t.TempDir(), "p", `echo '{}'`)
	w, err := os.OpenFile(path, os.O_WRONLY, 0)
	require.NoError(t, err)
	defer w.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 80*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err = Exec(ctx, path, nil, nil, nil)
	require.Error(t, err)
	assert.Less(t, time.Since(start), 700*time.Millisecond, "no wait past the context's end")
	assert.Equal(t, cnierror.CodeInternal, cnierror.Code(err))
	assert.Contains(t, err.Error(), "netplugin did not finish")
}
