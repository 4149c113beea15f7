// Package invoke execs a plugin binary the way libcni does: found on the plugin path,
// run with the caller's environment and the config on stdin, its stdout read as a result
// or a CNI error. The chain runner uses it for third-party plugins and IPAM delegation
// for IPAM types that are not built in, so both behave the same.
package invoke

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/cnikit/cni/internal/core/cnierror"
	"github.com/cnikit/cni/internal/core/tracectx"
)

// busyRetries bounds the retries of an exec that fails with "text file busy", which
// happens while a plugin binary is being replaced. libcni means to retry but reuses the
// spent exec.Cmd (its issue #855); each attempt here is a fresh command.
const busyRetries = 5

// busyBackoff is the first wait after a busy binary; it doubles per attempt.
const busyBackoff = 50 * time.Millisecond

// maxStderr bounds how much of a failing plugin's stderr is quoted in its error message;
// all of it is still passed through.
const maxStderr = 16 << 10

// FindInPath returns the first <dir>/<type> of paths that is a regular file (links
// followed), as libcni's invoke.FindInPath does; the exec bit is not checked. A type
// that names no plugin there, or no plugin anywhere (empty, with a path separator), is
// code 7 marked cnierror.ErrCannotRun: no ADD can have run it.
func FindInPath(pluginType string, paths []string) (string, error) {
	if pluginType == "" {
		return "", cnierror.CannotRun(cnierror.New(cnierror.CodeInvalidConfig, "no plugin name provided"))
	}
	if strings.ContainsRune(pluginType, os.PathSeparator) {
		return "", cnierror.CannotRun(cnierror.Newf(cnierror.CodeInvalidConfig, "invalid plugin name %q: must not contain a path separator", pluginType))
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
	return "", cnierror.CannotRun(cnierror.Newf(cnierror.CodeInvalidConfig, "failed to find plugin %q in path %s", pluginType, paths))
}

// Exec runs the plugin at path with env and stdin and returns its stdout. Its stderr is
// copied to stderr once it exits. A failure is a *cnierror.Error: the error JSON the
// plugin printed (its code kept), or, when it printed none, code 0 and a message quoting
// its stderr, as libcni reports it. The plugin's code 1 (it does not support the
// config's version) is marked cnierror.ErrCannotRun.
//
// When ctx carries a span (tracectx), the plugin gets it as its parent in TRACEPARENT,
// TRACESTATE and BAGGAGE, appended after env so that they win over inherited ones: what
// libcni does for a caller with a span.
//
// The plugin's exit is what ends the call: its stdin, stdout and stderr are files, not
// pipes (see scratchFile), so a child it left running with them open delays nothing.
// libcni reads pipes to their end and so waits for such a child to exit.
func Exec(ctx context.Context, path string, env []string, stdin []byte, stderr io.Writer) ([]byte, error) {
	stderr = cmp.Or(stderr, io.Discard)
	if span, ok := tracectx.From(ctx); ok {
		env = span.Env(env)
	}
	for attempt := 1; ; attempt++ {
		out, errOut, err := run(ctx, path, env, stdin)
		stderr.Write(errOut) // nothing when the exec itself failed
		if err == nil {
			return out, nil
		}
		if attempt < busyRetries && errors.Is(err, syscall.ETXTBSY) {
			select {
			case <-time.After(busyBackoff << (attempt - 1)):
				continue
			case <-ctx.Done():
				return nil, failure(ctx, err, nil, nil)
			}
		}
		ce := failure(ctx, err, out, errOut[:min(len(errOut), maxStderr)])
		if ce.Code == cnierror.CodeIncompatibleVersion {
			return nil, cnierror.CannotRun(ce)
		}
		return nil, ce
	}
}

// run execs the plugin once and returns what it wrote to stdout and stderr by the time
// it exited.
func run(ctx context.Context, path string, env []string, stdin []byte) (stdout, stderr []byte, err error) {
	files := make([]*os.File, 3)
	defer func() {
		for _, f := range files {
			f.Close() // nil for a file never made: ErrInvalid, no panic
		}
	}()
	for i, name := range [...]string{"cni-plugin-stdin", "cni-plugin-stdout", "cni-plugin-stderr"} {
		if files[i], err = scratchFile(name); err != nil {
			return nil, nil, fmt.Errorf("netplugin %s: %w", path, err)
		}
	}
	if _, err := files[0].WriteAt(stdin, 0); err != nil {
		return nil, nil, fmt.Errorf("netplugin %s: writing its stdin: %w", path, err)
	}
	cmd := exec.CommandContext(ctx, path)
	cmd.Env = env
	cmd.Stdin, cmd.Stdout, cmd.Stderr = files[0], files[1], files[2]
	err = cmd.Run()
	// A child the plugin left running may still be writing: read what is there now.
	stdout, outErr := readAll(files[1])
	stderr, errErr := readAll(files[2])
	return stdout, stderr, cmp.Or(err, errors.Join(outErr, errErr))
}

// scratchFile returns an anonymous read-write file that disappears once closed by us
// and by every process it was handed to: a memfd, or an unlinked temp file where the
// kernel has no memfd.
func scratchFile(name string) (*os.File, error) {
	fd, err := unix.MemfdCreate(name, unix.MFD_CLOEXEC)
	if err == nil {
		return os.NewFile(uintptr(fd), name), nil
	}
	f, err := os.CreateTemp("", name+"-*")
	if err != nil {
		return nil, err
	}
	if err := os.Remove(f.Name()); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// readAll returns the current content of a scratch file.
func readAll(f *os.File) ([]byte, error) {
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	buf := make([]byte, fi.Size())
	n, err := f.ReadAt(buf, 0)
	if errors.Is(err, io.EOF) {
		err = nil
	}
	return buf[:n], err
}

// failure turns a failed run into the plugin's CNI error: the error JSON it printed on
// stdout, or a message built from its stderr when it printed none.
func failure(ctx context.Context, runErr error, stdout, stderr []byte) *cnierror.Error {
	if ctx.Err() != nil {
		return cnierror.Newf(cnierror.CodeInternal, "netplugin did not finish: %v (%v)", ctx.Err(), runErr)
	}
	if len(bytes.TrimSpace(stdout)) == 0 {
		// libcni's words since its #1163, which runtimes show and users grep for.
		if len(stderr) > 0 {
			return cnierror.Newf(0, "netplugin failed: %q: %v", stderr, runErr)
		}
		return cnierror.Newf(0, "netplugin failed with no error message: %v", runErr)
	}
	var e cnierror.Error
	if err := json.Unmarshal(stdout, &e); err != nil {
		return cnierror.Newf(0, "netplugin failed but error parsing its diagnostic message %q: %v", stdout, err)
	}
	return &e
}
