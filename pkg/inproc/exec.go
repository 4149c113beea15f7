package inproc

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/containernetworking/cni/pkg/types"
	"github.com/containernetworking/cni/pkg/version"

	"github.com/cnikit/cni/internal/core/cnierror"
	"github.com/cnikit/cni/internal/dispatch"
	"github.com/cnikit/cni/internal/spec/invoke"
	"github.com/cnikit/cni/internal/spec/skel"
)

// builtinPrefix marks what FindInPath returns for a built-in type: "inproc:bridge". It
// is no file, so no search path can hold it, and libcni hands it back to ExecPlugin
// untouched.
const builtinPrefix = "inproc:"

// Exec is an invoke.Exec for libcni (libcni.NewCNIConfig, NewCNIConfigWithCacheDir)
// that runs the toolkit's plugins in-process. The zero value is ready to use; one value
// serves concurrent calls.
type Exec struct {
	// Stderr receives what the plugins log, in-process and exec'd; it must take
	// concurrent writes. Nil discards it.
	Stderr io.Writer

	// lookup finds a built-in plugin; nil is the toolkit's registry. The package's
	// tests add plugins of their own (one that panics).
	lookup func(pluginType string) *skel.Plugin
}

// FindInPath returns, for a type the toolkit holds, a name that ExecPlugin runs
// in-process, whatever paths hold (no file is needed); for any other type, the first
// <dir>/<type> of paths that is a regular file, as libcni's FindInPath does.
func (e *Exec) FindInPath(plugin string, paths []string) (string, error) {
	if e.builtin(plugin) != nil {
		return builtinPrefix + plugin, nil
	}
	path, err := invoke.FindInPath(plugin, paths)
	if err != nil {
		return "", libcniError(err)
	}
	return path, nil
}

// ExecPlugin runs the plugin FindInPath returned with environ (CNI_COMMAND and the rest)
// and the config on stdin, and returns what it wrote to stdout. A built-in runs
// in-process under ctx: it gives up when ctx is done and leaves nothing running; any
// other path is exec'd, and killed when ctx is done. A plugin's failure is a
// *types.Error with its code, message and details, as libcni's own Exec returns it.
func (e *Exec) ExecPlugin(ctx context.Context, pluginPath string, stdinData []byte, environ []string) ([]byte, error) {
	if name, ok := strings.CutPrefix(pluginPath, builtinPrefix); ok {
		if p := e.builtin(name); p != nil {
			return e.run(ctx, p, stdinData, environ)
		}
	}
	out, err := invoke.Exec(ctx, pluginPath, environ, stdinData, e.Stderr)
	if err != nil {
		return nil, libcniError(err)
	}
	return out, nil
}

// Decode reads a plugin's VERSION answer, as libcni's own Exec does.
func (e *Exec) Decode(jsonBytes []byte) (version.PluginInfo, error) {
	return (&version.PluginDecoder{}).Decode(jsonBytes)
}

// run runs p in-process as its binary runs (skel.RunContext): the same checks, the same
// bytes on stdout, the exit status turned into libcni's error.
func (e *Exec) run(ctx context.Context, p *skel.Plugin, stdin []byte, environ []string) ([]byte, error) {
	stderr := e.Stderr
	if stderr == nil {
		stderr = io.Discard
	}
	var stdout bytes.Buffer
	if skel.RunContext(ctx, p, environ, bytes.NewReader(stdin), &stdout, stderr) == 0 {
		return stdout.Bytes(), nil
	}
	return nil, exitError(stdout.Bytes())
}

func (e *Exec) builtin(pluginType string) *skel.Plugin { return registryOr(e.lookup)(pluginType) }

// registryOr is lookup, or the toolkit's registry when lookup is nil (outside tests).
func registryOr(lookup func(string) *skel.Plugin) func(string) *skel.Plugin {
	if lookup != nil {
		return lookup
	}
	return dispatch.Lookup
}

// exitError is what libcni's Exec makes of a plugin that exited non-zero with stdout:
// the CNI error it printed.
func exitError(stdout []byte) error {
	var te types.Error
	if len(stdout) == 0 {
		return &types.Error{Msg: "netplugin failed with no error message"}
	}
	if err := json.Unmarshal(stdout, &te); err != nil {
		return &types.Error{Msg: fmt.Sprintf("netplugin failed but error parsing its diagnostic message %q: %v", stdout, err)}
	}
	return &te
}

// libcniError is err as libcni's *types.Error, code, message and details kept.
func libcniError(err error) error {
	var ce *cnierror.Error
	if !errors.As(err, &ce) {
		return err
	}
	return &types.Error{Code: ce.Code, Msg: ce.Msg, Details: ce.Details}
}

// Builtins returns the plugin types that run in-process, in the order `cni --list`
// prints them.
func Builtins() []string { return dispatch.Names() }
