package skel

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/cnikit/cni/internal/core/background"
	"github.com/cnikit/cni/internal/core/cnierror"
	"github.com/cnikit/cni/internal/core/panics"
	"github.com/cnikit/cni/internal/core/version"
	"github.com/cnikit/cni/internal/host/ns"
	"github.com/cnikit/cni/internal/obs/invlog"
	"github.com/cnikit/cni/internal/result"
)

// Run is the exec'd entry point: it reads the invocation from env and stdin, writes a
// result or an error to stdout, and returns the exit status.
func Run(p *Plugin, env []string, stdin io.Reader, stdout, stderr io.Writer) int {
	return RunContext(context.Background(), p, env, stdin, stdout, stderr)
}

// RunContext is Run under ctx: what a host process that runs plugins in-process as if it
// exec'd them (pkg/inproc, an invoke.Exec for libcni) calls, so that its caller's
// cancellation reaches the plugin and the bytes it answers with are an exec'd plugin's.
func RunContext(ctx context.Context, p *Plugin, env []string, stdin io.Reader, stdout, stderr io.Writer) int {
	args := ArgsFromEnv(env)
	switch args.Command {
	case "":
		about := p.Name
		if p.About != "" {
			about += ": " + p.About
		}
		fmt.Fprintf(stderr, "%s\nCNI protocol versions supported: %s\n", about, strings.Join(p.Versions, ", "))
		return 0
	case CmdVersion:
		return writeJSON(stdout, stderr, p.VersionInfo())
	case CmdRepair:
		// In-process only: an exec'd plugin is never asked to repair (InvokeRepair).
		return writeError(stdout, stderr, "", cnierror.Newf(cnierror.CodeInvalidEnv, "unknown CNI_COMMAND: %s", args.Command))
	}
	res, confVersion, err := invoke(ctx, p, args, stdin, nil, stderr)
	if err != nil {
		return writeError(stdout, stderr, confVersion, err)
	}
	if res == nil {
		return 0
	}
	if err := res.Print(stdout); err != nil {
		fmt.Fprintf(stderr, "%s: writing result: %v\n", p.Name, err)
		return 1
	}
	return 0
}

// Invoke is the in-process entry point: the same checks as Run, with the result or a
// typed *cnierror.Error returned instead of printed. ADD returns the result in the
// config's version; the other commands return a nil result. When ctx carries a Pending
// (a delegate called from inside a plugin, a child of the chain runner), the work the
// plugin leaves running joins it and its creator waits; otherwise Invoke returns only
// once that work is done, as Run does.
func Invoke(ctx context.Context, p *Plugin, args Args, config []byte, stderr io.Writer) (*result.Result, error) {
	if args.Command == CmdVersion {
		return nil, nil
	}
	res, _, err := invoke(ctx, p, args, nil, config, stderr)
	if err != nil {
		return nil, cnierror.From(cnierror.WithPrivilegeHint(err))
	}
	return res, nil
}

// VersionInfo is the VERSION answer: the toolkit's spec version and the plugin's list.
type VersionInfo struct {
	CNIVersion        string   `json:"cniVersion"`
	SupportedVersions []string `json:"supportedVersions"`
}

// VersionInfo returns what VERSION prints for p.
func (p *Plugin) VersionInfo() VersionInfo {
	return VersionInfo{CNIVersion: version.Current, SupportedVersions: p.Versions}
}

// invocation is one command on its way through invoke: what prepare read and checked.
type invocation struct {
	ctx    context.Context
	p      *Plugin
	args   Args
	stderr io.Writer
	data   []byte
	conf   NetConf
	prev   *result.Result
	// The log's configuration inherited (openLog) and the config's own (readConfig).
	inheritedLog, ownLog *invlog.Config
	logRefused           bool
}

// invoke runs one invocation for Run and Invoke alike, as the spec tells it: prepare,
// call (the callback and the work it left running), answer. The invocation log wraps
// them: it opens before, takes up the config's "log" object after prepare, waits with
// call, and writes its line at the end. The config's version is returned for errors.
func invoke(ctx context.Context, p *Plugin, args Args, stdin io.Reader, data []byte, stderr io.Writer) (res *result.Result, confVersion string, err error) {
	in := invocation{ctx: cmp.Or(ctx, context.Background()), p: p, args: args, stderr: cmp.Or(stderr, io.Discard), data: data}
	lg, err := openLog(&in)
	defer func() { lg.finish(&in, res, err) }()
	if err != nil {
		return nil, "", err
	}
	done, err := in.prepare(stdin)
	lg = lg.configure(&in)
	if done || err != nil {
		return nil, in.conf.CNIVersion, err
	}
	res, err = in.call(lg)
	res, err = in.answer(res, err)
	return res, in.conf.CNIVersion, err
}

// prepare reads and checks everything before the plugin runs: the environment, stdin,
// a DEL with nothing to delete, the config, the netns, a caller that gave up. done
// reports an exit with nothing to do, a success.
func (in *invocation) prepare(stdin io.Reader) (done bool, err error) {
	if err := in.args.validate(); err != nil {
		return false, err
	}
	if stdin != nil {
		if in.data, err = io.ReadAll(stdin); err != nil {
			return false, cnierror.Newf(cnierror.CodeIO, "reading from stdin: %v", err)
		}
	}
	if why := in.args.nothingToDelete(); why != nil {
		fmt.Fprintf(in.stderr, "%s: DEL: nothing to delete, no ADD can have made this attachment: %v\n", in.p.Name, why)
		return true, nil
	}
	if done, err := in.readConfig(); done || err != nil {
		return done, err
	}
	if err := checkNetnsIsNotOwn(in.args); err != nil {
		return false, err
	}
	// A caller that gave up before the plugin started gets what an exec'd plugin gives
	// it then (a process never started): a failure, with nothing done. In-process, this
	// is where a cancelled chain stops: the next plugin, or the next delegate, whose
	// failure makes its caller undo what it did (with UndoContext).
	if err := in.ctx.Err(); err != nil {
		return false, cnierror.Newf(cnierror.CodeInternal, "%s: %s not started: %v", in.p.Name, in.args.Command, err)
	}
	return false, nil
}

// readConfig parses the config, its prevResult and its "log" object, which the log
// takes up (logged.configure) unless it is refused (tolerate). A DEL or GC whose config
// no ADD can have run (cnierror.CannotHaveMade) is done, with nothing to do.
func (in *invocation) readConfig() (done bool, err error) {
	in.conf, in.prev, err = parseNetConf(in.p, in.args.Command, in.data)
	var logErr error // nil without a "log" object
	in.ownLog, logErr = invlog.ParseConfig(in.conf.Log)
	logErr = in.tolerate(logErr, "the log object")
	in.logRefused = logErr != nil
	if cnierror.CannotHaveMade(in.args.Command, err) {
		fmt.Fprintf(in.stderr, "%s: %s: nothing to do, no ADD with this config can have run: %v\n", in.p.Name, in.args.Command, err)
		return true, nil
	}
	return false, cmp.Or(err, logErr)
}

// call runs the callback under a Pending of its own (unless the context brought its
// creator's) and waits for the work the callback left running (link deletions), which
// is part of the command: its errors are the command's. The log takes part in both.
func (in *invocation) call(lg *logged) (*result.Result, error) {
	ctx, wait, owned := background.Own(in.ctx)
	ctx = lg.ownWork(ctx, owned)
	req := &Request{
		ctx: ctx, Args: in.args, Config: in.data, Net: in.conf, PrevResult: in.prev,
		ValidAttachments: in.conf.ValidAttachments, Stderr: in.stderr, plugin: in.p.Name,
	}
	if in.args.Command == CmdRepair {
		req.repair, _ = ctx.Value(repairKey{}).(*Repair) // InvokeRepair's
	}
	res, err := callback(in.p, req)
	return res, lg.waitWork(in, ctx, owned, wait, res, err)
}

// answer is what the invocation returns for the call's outcome: a panic as the spec's
// internal error, nothing but for ADD, ADD's result in the config's version.
func (in *invocation) answer(res *result.Result, err error) (*result.Result, error) {
	if err != nil {
		return nil, reportPanic(in.p.Name, in.stderr, err)
	}
	if in.args.Command != CmdAdd {
		return nil, nil
	}
	if res == nil {
		return nil, cnierror.Newf(cnierror.CodeInternal, "%s: ADD returned no result", in.p.Name)
	}
	v := version.OrDefault(in.conf.CNIVersion)
	if res.CNIVersion == "" {
		res.CNIVersion = v
	}
	return res.Convert(v)
}

// callback runs the plugin's callback for the command. A panic of the callback's own
// goroutine is recovered here as a *panics.Error; those of goroutines it started
// (namespace work, Pending work) arrive as one in its error or the Pending's. answer
// turns them into the spec's internal error (reportPanic).
func callback(p *Plugin, req *Request) (res *result.Result, err error) {
	defer panics.Recover(&err)
	switch req.Args.Command {
	case CmdAdd:
		if p.Add != nil {
			return p.Add(req)
		}
	case CmdCheck:
		if p.Check != nil {
			return nil, p.Check(req)
		}
	case CmdDel:
		return nil, optional(p.Del, req)
	case CmdGC:
		return nil, optional(p.GC, req)
	case CmdStatus:
		return nil, optional(p.Status, req)
	case CmdRepair:
		return nil, optional(p.Repair, req)
	default:
		return nil, cnierror.Newf(cnierror.CodeInvalidEnv, "unknown CNI_COMMAND: %s", req.Args.Command)
	}
	return nil, cnierror.Newf(cnierror.CodeInternal, "%s does not implement %s", p.Name, req.Args.Command)
}

// reportPanic turns a panic anywhere in err into a CNI error (code 999) with its stack
// on stderr, so that a runtime never sees a Go stack trace where it expects JSON and an
// in-process caller never dies.
func reportPanic(name string, stderr io.Writer, err error) error {
	var pe *panics.Error
	if !errors.As(err, &pe) {
		return err
	}
	fmt.Fprintf(stderr, "%s: %v\n%s", name, pe, pe.Stack)
	return cnierror.Newf(cnierror.CodeInternal, "%s: internal error: %v", name, err)
}

func optional(fn func(*Request) error, req *Request) error {
	if fn == nil {
		return nil
	}
	return fn(req)
}

// checkNetnsIsNotOwn refuses an ADD, DEL or CHECK whose CNI_NETNS is the namespace the
// plugin itself runs in: acting there would rename or delete the host's own interfaces.
// The reference checks this only after the callback ran; checking first is safer.
func checkNetnsIsNotOwn(args Args) error {
	if args.NetnsOverride || args.Netns == "" ||
		args.Command != CmdAdd && args.Command != CmdDel && args.Command != CmdCheck {
		return nil
	}
	// A vanished netns is not the plugin's own: it is the plugin's to handle (DEL must
	// succeed).
	if ns.IsCurrent(args.Netns) {
		return cnierror.Newf(cnierror.CodeInvalidNetNS,
			"netns %q is the plugin's own network namespace; refusing to act on it", args.Netns)
	}
	return nil
}

func writeJSON(stdout, stderr io.Writer, v any) int {
	b, err := json.Marshal(v)
	if err == nil {
		_, err = stdout.Write(append(b, '\n'))
	}
	if err != nil {
		fmt.Fprintf(stderr, "writing output: %v\n", err)
		return 1
	}
	return 0
}

func writeError(stdout, stderr io.Writer, confVersion string, err error) int {
	ce := cnierror.From(cnierror.WithPrivilegeHint(err))
	if ce.CNIVersion == "" {
		ce = &cnierror.Error{CNIVersion: confVersion, Code: ce.Code, Msg: ce.Msg, Details: ce.Details}
	}
	if _, werr := stdout.Write(append(ce.JSON(), '\n')); werr != nil {
		fmt.Fprintf(stderr, "%v (and writing the error failed: %v)\n", ce, werr)
	}
	return 1
}
