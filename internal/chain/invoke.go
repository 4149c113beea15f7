package chain

import (
	"context"
	"encoding/json"
	"os"

	"github.com/cnikit/cni/internal/core/cnierror"
	"github.com/cnikit/cni/internal/core/tracectx"
	"github.com/cnikit/cni/internal/result"
	"github.com/cnikit/cni/internal/spec/invoke"
	"github.com/cnikit/cni/internal/spec/skel"
)

// Invoke runs one plugin once: a built-in in-process through skel.Invoke, anything else
// exec'd from the plugin path. conf is sent unchanged. ADD returns the result (a missing
// "cniVersion" in an exec'd plugin's output means the config's version); other commands
// return nil. A plugin's failure is a *cnierror.Error with the plugin's code.
func (r *Runner) Invoke(ctx context.Context, pluginType, command string, conf []byte, att Attachment) (*result.Result, error) {
	return r.invoke(r.traced(ctx), r.procEnv(), pluginType, command, conf, att)
}

// procEnv is what every plugin of one operation gets from the runner: the plugin path,
// the environment exec'd plugins inherit and what it says of CNI_NETNS_OVERRIDE,
// CNI_LOG_FILE and CNI_LOG_LEVEL, read once per operation instead of once per plugin.
// pluginArgs completes it for one plugin.
func (r *Runner) procEnv() skel.Args {
	env := r.environ()
	a := skel.ArgsFromEnv(env)
	return skel.Args{Path: r.PluginPath, Env: env, NetnsOverride: a.NetnsOverride, LogFile: a.LogFile, LogLevel: a.LogLevel}
}

// pluginArgs are a plugin's CNI_* inputs for command on att: pe with the attachment's.
func pluginArgs(pe skel.Args, command string, att *Attachment) skel.Args {
	pe.Command, pe.ContainerID, pe.Netns, pe.IfName, pe.CNIArgs = command, att.ContainerID, att.Netns, att.IfName, att.cniArgs()
	return pe
}

// traced is ctx with a current span, as a runtime with a tracer would run an operation:
// the caller's, else the one of TRACEPARENT in the runner's environment, else a new
// trace. Every plugin runs under it, in-process or exec'd (invoke.Exec passes it on).
func (r *Runner) traced(ctx context.Context) context.Context {
	ctx, _ = tracectx.Ensure(ctx, r.environ())
	return ctx
}

// invoke is Invoke with the environment already read.
func (r *Runner) invoke(ctx context.Context, pe skel.Args, pluginType, command string, conf []byte, att Attachment) (*result.Result, error) {
	args := pluginArgs(pe, command, &att)
	if p := r.builtin(pluginType); p != nil {
		return skel.Invoke(ctx, p, args, conf, r.Stderr)
	}
	path, err := invoke.FindInPath(pluginType, r.PluginPath)
	if err != nil {
		return nil, err
	}
	out, err := invoke.Exec(ctx, path, args.Environ(command), conf, r.Stderr)
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
	path, err := invoke.FindInPath(pluginType, r.PluginPath)
	if err != nil {
		return skel.VersionInfo{}, err
	}
	// Dummy netns, ifname and path keep plugins built on very old skeletons happy, as in libcni.
	args := skel.Args{Netns: "dummy", IfName: "dummy", Path: []string{"dummy"}, Env: r.environ()}
	out, err := invoke.Exec(ctx, path, args.Environ(skel.CmdVersion), []byte(`{"cniVersion":"1.1.0"}`), r.Stderr)
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
