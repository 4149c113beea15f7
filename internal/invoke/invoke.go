// Package invoke execs a plugin binary the way libcni does: found on the plugin path,
// run with the caller's environment and the config on stdin, its stdout read as a result
// or a CNI error. The chain runner uses it for third-party plugins and IPAM delegation
// for IPAM types that are not built in, so both behave the same.
package invoke

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/cnikit/cni/internal/cnierror"
)

// busyRetries bounds the retries of an exec that fails with "text file busy", which
// happens while a plugin binary is being replaced. libcni means to retry but reuses the
// spent exec.Cmd (its issue #855); each attempt here is a fresh command.
const busyRetries = 5

// busyBackoff is the first wait after a busy binary; it doubles per attempt.
const busyBackoff = 50 * time.Millisecond

// maxStderr bounds how much of a failing plugin's stderr is kept for its error message;
// all of it is still passed through.
const maxStderr = 16 << 10

// FindInPath returns the first <dir>/<type> of paths that is a regular file (links
// followed), as libcni's invoke.FindInPath does; the exec bit is not checked.
func FindInPath(pluginType string, paths []string) (string, error) {
	if pluginType == "" {
		return "", cnierror.New(cnierror.CodeInvalidConfig, "no plugin name provided")
	}
	if strings.ContainsRune(pluginType, os.PathSeparator) {
		return "", cnierror.Newf(cnierror.CodeInvalidConfig, "invalid plugin name %q: must not contain a path separator", pluginType)
	}
	if len(paths) == 0 {
		return "", cnierror.Newf(cnierror.CodeInvalidEnv, "no paths provided to find plugin %q in", pluginType)
	}
	for _, dir := range paths {
		p := filepath.Join(dir, pluginType)
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() {
			return p, nil
		}
	}
	return "", cnierror.Newf(cnierror.CodeInvalidConfig, "failed to find plugin %q in path %s", pluginType, paths)
}

// Exec runs the plugin at path with env and stdin and returns its stdout. Its stderr is
// copied to stderr as it comes. A failure is a *cnierror.Error: the error JSON the
// plugin printed (its code kept), or, when it printed none, code 0 and a message quoting
// its stderr, as libcni reports it.
func Exec(ctx context.Context, path string, env []string, stdin []byte, stderr io.Writer) ([]byte, error) {
	if stderr == nil {
		stderr = io.Discard
	}
	var stdout bytes.Buffer
	var captured headBuffer
	for attempt := 1; ; attempt++ {
		stdout.Reset()
		captured.Reset()
		cmd := exec.CommandContext(ctx, path)
		cmd.Env = env
		cmd.Stdin = bytes.NewReader(stdin)
		cmd.Stdout = &stdout
		cmd.Stderr = io.MultiWriter(stderr, &captured)
		// A plugin that leaves a child holding its pipes must not hang the caller.
		cmd.WaitDelay = 2 * time.Second
		err := cmd.Run()
		if err == nil {
			return stdout.Bytes(), nil
		}
		if attempt < busyRetries && errors.Is(err, syscall.ETXTBSY) {
			if werr := sleep(ctx, busyBackoff<<(attempt-1)); werr != nil {
				return nil, failure(ctx, err, nil, nil)
			}
			continue
		}
		return nil, failure(ctx, err, stdout.Bytes(), captured.Bytes())
	}
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// failure turns a failed run into the plugin's CNI error: the error JSON it printed on
// stdout, or a message built from its stderr when it printed none.
func failure(ctx context.Context, runErr error, stdout, stderr []byte) *cnierror.Error {
	if ctx.Err() != nil {
		return cnierror.Newf(cnierror.CodeInternal, "netplugin did not finish: %v (%v)", ctx.Err(), runErr)
	}
	if len(bytes.TrimSpace(stdout)) == 0 {
		if msg := strings.TrimSpace(string(stderr)); msg != "" {
			return cnierror.Newf(0, "netplugin failed: %s (%v)", msg, runErr)
		}
		return cnierror.Newf(0, "netplugin failed with no error message: %v", runErr)
	}
	var e cnierror.Error
	if err := json.Unmarshal(stdout, &e); err != nil {
		return cnierror.Newf(0, "netplugin failed but error parsing its diagnostic message %q: %v", stdout, err)
	}
	return &e
}

// headBuffer keeps the first maxStderr bytes written to it.
type headBuffer struct{ bytes.Buffer }

func (b *headBuffer) Write(p []byte) (int, error) {
	if room := maxStderr - b.Len(); room > 0 {
		b.Buffer.Write(p[:min(len(p), room)])
	}
	return len(p), nil
}
