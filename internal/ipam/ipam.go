// Package ipam is how main plugins (and the chain runner) delegate address management:
// it runs the IPAM type named in the config's ipam.type with the full network config,
// as the spec's delegation rules demand. The built-in types (host-local, static) run
// in-process through skel.Invoke, which costs no exec; any other type is looked up on
// CNI_PATH and exec'd exactly as the reference library does it.
//
// A main plugin pairs Add with its rollback stack, so a failure after IPAM succeeded
// releases the reservation:
//
//	res, err := ipam.Add(req)
//	if err != nil { return nil, err }
//	undo.Push("release IPAM", ipam.Release(req))
package ipam

import (
	"bytes"
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

	"github.com/cnikit/cni/internal/cnierror"
	"github.com/cnikit/cni/internal/ipam/hostlocal"
	"github.com/cnikit/cni/internal/ipam/static"
	"github.com/cnikit/cni/internal/result"
	"github.com/cnikit/cni/internal/skel"
)

// Add runs the IPAM ADD and returns its result in the config's cniVersion.
func Add(req *skel.Request) (*result.Result, error) { return run(req, skel.CmdAdd) }

// Del runs the IPAM DEL.
func Del(req *skel.Request) error { return discard(run(req, skel.CmdDel)) }

// Check runs the IPAM CHECK.
func Check(req *skel.Request) error { return discard(run(req, skel.CmdCheck)) }

// GC runs the IPAM GC; the valid attachments travel in the config.
func GC(req *skel.Request) error { return discard(run(req, skel.CmdGC)) }

// Status runs the IPAM STATUS.
func Status(req *skel.Request) error { return discard(run(req, skel.CmdStatus)) }

// Release returns the undo step for a rollback stack after a successful Add: it runs
// the IPAM DEL for the same request.
func Release(req *skel.Request) func() error {
	return func() error { return Del(req) }
}

func discard(_ *result.Result, err error) error { return err }

// Builtin returns the in-process plugin for an IPAM type, or nil.
func Builtin(typ string) *skel.Plugin {
	switch typ {
	case "host-local":
		return hostlocal.Plugin()
	case "static":
		return static.Plugin()
	}
	return nil
}

func run(req *skel.Request, cmd string) (*result.Result, error) {
	typ := req.Net.IPAM.Type
	if typ == "" {
		return nil, cnierror.New(cnierror.CodeInvalidConfig, "ipam.type: missing IPAM plugin type")
	}
	ctx := req.Ctx
	if ctx == nil {
		ctx = context.Background()
	}
	if p := Builtin(typ); p != nil {
		args := req.Args
		args.Command = cmd
		return skel.Invoke(ctx, p, args, req.Config, req.Stderr)
	}
	bin, err := FindInPath(typ, req.Args.Path)
	if err != nil {
		return nil, err
	}
	out, err := Exec(ctx, bin, req.Args.Environ(cmd), req.Config, req.Stderr)
	if err != nil || cmd != skel.CmdAdd {
		return nil, err
	}
	return parseResult(out, req.Net.CNIVersion)
}

// parseResult reads an exec'd delegate's ADD output, defaulting a missing version to
// the config's as libcni does, and converts it to the config's version.
func parseResult(out []byte, confVersion string) (*result.Result, error) {
	if confVersion == "" {
		confVersion = "0.1.0"
	}
	res, err := result.Parse(out, confVersion)
	if err != nil {
		return nil, fmt.Errorf("ipam: delegate result: %w", err)
	}
	return res.Convert(confVersion)
}

// FindInPath returns <dir>/<typ> for the first dir of path where that is a regular
// file (symlinks followed, the exec bit not checked), as the reference lookup does.
func FindInPath(typ string, path []string) (string, error) {
	if typ == "" {
		return "", cnierror.New(cnierror.CodeInvalidConfig, "plugin type is empty")
	}
	if strings.ContainsRune(typ, os.PathSeparator) {
		return "", cnierror.Newf(cnierror.CodeInvalidConfig, "plugin type %q must not contain a path separator", typ)
	}
	if len(path) == 0 {
		return "", cnierror.Newf(cnierror.CodeInvalidEnv, "no CNI_PATH to find plugin %q in", typ)
	}
	for _, dir := range path {
		p := filepath.Join(dir, typ)
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() {
			return p, nil
		}
	}
	return "", cnierror.Newf(cnierror.CodeInvalidConfig, "failed to find plugin %q in path %v", typ, path)
}

// maxStderr bounds how much of a failing delegate's stderr is kept for its error.
const maxStderr = 16 << 10

// Exec runs a delegate binary with env and the config on stdin, passing its stderr
// through. It returns stdout on success; on failure the CNI error the delegate printed
// (its code kept), or, with nothing on stdout, an error quoting its stderr. A binary
// that is being written ("text file busy") is retried a few times, as libcni does.
func Exec(ctx context.Context, bin string, env []string, config []byte, stderr io.Writer) ([]byte, error) {
	if stderr == nil {
		stderr = io.Discard
	}
	var stdout bytes.Buffer
	var errOut headBuffer
	for attempt := 0; ; attempt++ {
		stdout.Reset()
		errOut.Reset()
		cmd := exec.CommandContext(ctx, bin)
		cmd.Env = env
		cmd.Stdin = bytes.NewReader(config)
		cmd.Stdout = &stdout
		cmd.Stderr = io.MultiWriter(stderr, &errOut)
		err := cmd.Run()
		if err == nil {
			return stdout.Bytes(), nil
		}
		if errors.Is(err, syscall.ETXTBSY) && attempt < 5 {
			select {
			case <-time.After(50 * time.Millisecond << attempt):
				continue
			case <-ctx.Done():
				return nil, cnierror.Newf(cnierror.CodeInternal, "exec %s: %v", bin, ctx.Err())
			}
		}
		var exitErr *exec.ExitError
		if !errors.As(err, &exitErr) {
			return nil, cnierror.Newf(cnierror.CodeInternal, "exec %s: %v", bin, err)
		}
		return nil, delegateError(bin, err, stdout.Bytes(), errOut.Bytes())
	}
}

// delegateError decodes the CNI error a failed delegate printed.
func delegateError(bin string, runErr error, stdout, stderr []byte) error {
	name := filepath.Base(bin)
	if len(bytes.TrimSpace(stdout)) == 0 {
		if len(bytes.TrimSpace(stderr)) == 0 {
			return cnierror.Newf(cnierror.CodeInternal, "netplugin %s failed with no error message: %v", name, runErr)
		}
		return cnierror.Newf(cnierror.CodeInternal, "netplugin %s failed: %q", name, strings.TrimSpace(string(stderr)))
	}
	e := &cnierror.Error{}
	if err := json.Unmarshal(stdout, e); err != nil {
		return cnierror.Newf(cnierror.CodeInternal, "netplugin %s failed but error parsing its diagnostic message %q: %v",
			name, stdout, err)
	}
	return e
}

// headBuffer keeps the first maxStderr bytes written to it.
type headBuffer struct{ bytes.Buffer }

func (b *headBuffer) Write(p []byte) (int, error) {
	if room := maxStderr - b.Len(); room > 0 {
		b.Buffer.Write(p[:min(len(p), room)])
	}
	return len(p), nil
}
