package chain

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/cnikit/cni/internal/cnierror"
	"github.com/cnikit/cni/internal/result"
	"github.com/cnikit/cni/internal/skel"
)

// busyRetries bounds the retries of an exec that fails with "text file busy", which
// happens while a plugin binary is being replaced. libcni means to retry but reuses the
// spent exec.Cmd (its issue #855); each attempt here is a fresh command.
const busyRetries = 5

// busyBackoff is the first wait after a busy binary; it doubles per attempt.
const busyBackoff = 50 * time.Millisecond

// FindInPath returns the first <dir>/<type> of paths that is a regular file (links
// followed), as libcni's invoke.FindInPath does; the exec bit is not checked.
func FindInPath(pluginType string, paths []string) (string, error) {
	if pluginType == "" {
		return "", errors.New("no plugin name provided")
	}
	if strings.ContainsRune(pluginType, os.PathSeparator) {
		return "", fmt.Errorf("invalid plugin name: %s", pluginType)
	}
	if len(paths) == 0 {
		return "", errors.New("no paths provided")
	}
	for _, dir := range paths {
		p := filepath.Join(dir, pluginType)
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() {
			return p, nil
		}
	}
	return "", fmt.Errorf("failed to find plugin %q in path %s", pluginType, paths)
}

// Invoke runs one plugin once: a built-in in-process through skel.Invoke, anything else
// exec'd from the plugin path. conf is sent unchanged. ADD returns the result (a missing
// "cniVersion" in an exec'd plugin's output means the config's version); other commands
// return nil. A plugin's failure is a *cnierror.Error with the plugin's code.
func (r *Runner) Invoke(ctx context.Context, pluginType, command string, conf []byte, att Attachment) (*result.Result, error) {
	args := skel.Args{
		Command: command, ContainerID: att.ContainerID, Netns: att.Netns, IfName: att.IfName,
		CNIArgs: att.cniArgs(), Path: r.PluginPath, Env: r.environ(),
	}
	if p := r.builtin(pluginType); p != nil {
		return skel.Invoke(ctx, p, args, conf, r.Stderr)
	}
	path, err := FindInPath(pluginType, r.PluginPath)
	if err != nil {
		return nil, err
	}
	out, err := r.exec(ctx, path, conf, args.Environ(command))
	if err != nil || command != skel.CmdAdd {
		return nil, err
	}
	var head struct {
		CNIVersion string `json:"cniVersion"`
	}
	_ = json.Unmarshal(conf, &head) // a config that is no JSON object was refused by the plugin already
	return result.Parse(out, head.CNIVersion)
}

// Version asks a plugin which spec versions it speaks.
func (r *Runner) Version(ctx context.Context, pluginType string) (skel.VersionInfo, error) {
	if p := r.builtin(pluginType); p != nil {
		return p.VersionInfo(), nil
	}
	path, err := FindInPath(pluginType, r.PluginPath)
	if err != nil {
		return skel.VersionInfo{}, err
	}
	// Dummy netns, ifname and path keep plugins built on very old skeletons happy, as in libcni.
	args := skel.Args{Netns: "dummy", IfName: "dummy", Path: []string{"dummy"}, Env: r.environ()}
	out, err := r.exec(ctx, path, []byte(`{"cniVersion":"1.1.0"}`), args.Environ(skel.CmdVersion))
	if err != nil {
		return skel.VersionInfo{}, err
	}
	var vi skel.VersionInfo
	if err := json.Unmarshal(out, &vi); err != nil {
		return skel.VersionInfo{}, cnierror.Newf(cnierror.CodeDecode, "decoding version info of %s: %v", pluginType, err)
	}
	if vi.CNIVersion == "" {
		return skel.VersionInfo{}, cnierror.Newf(cnierror.CodeDecode, "decoding version info of %s: missing cniVersion", pluginType)
	}
	return vi, nil
}

func (r *Runner) builtin(pluginType string) *skel.Plugin {
	if r.Builtin == nil {
		return nil
	}
	return r.Builtin(pluginType)
}

func (r *Runner) environ() []string {
	if r.Env != nil {
		return r.Env
	}
	return os.Environ()
}

// exec runs a plugin binary and returns its stdout. The plugin's stderr is copied to
// r.Stderr; a failure becomes a *cnierror.Error decoded from stdout as libcni does.
func (r *Runner) exec(ctx context.Context, path string, stdin []byte, env []string) ([]byte, error) {
	var stdout, stderr bytes.Buffer
	for attempt := 1; ; attempt++ {
		stdout.Reset()
		stderr.Reset()
		cmd := exec.CommandContext(ctx, path)
		cmd.Env = env
		cmd.Stdin = bytes.NewReader(stdin)
		cmd.Stdout = &stdout
		cmd.Stderr = &stderr
		// A plugin that leaves a child holding its pipes must not hang the runtime.
		cmd.WaitDelay = 2 * time.Second
		err := cmd.Run()
		if r.Stderr != nil && stderr.Len() > 0 {
			_, _ = r.Stderr.Write(stderr.Bytes())
		}
		if err == nil {
			return stdout.Bytes(), nil
		}
		if attempt < busyRetries && errors.Is(err, syscall.ETXTBSY) {
			if werr := sleep(ctx, busyBackoff<<(attempt-1)); werr != nil {
				return nil, pluginFailure(ctx, err, nil, nil)
			}
			continue
		}
		return nil, pluginFailure(ctx, err, stdout.Bytes(), stderr.Bytes())
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

// pluginFailure turns a failed run into the plugin's CNI error: the error JSON it printed
// on stdout, or a message built from its stderr when it printed none.
func pluginFailure(ctx context.Context, runErr error, stdout, stderr []byte) *cnierror.Error {
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
