package skel

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/cnikit/cni/internal/core/background"
	"github.com/cnikit/cni/internal/core/cnierror"
	"github.com/cnikit/cni/internal/core/panics"
	"github.com/cnikit/cni/internal/core/steps"
	"github.com/cnikit/cni/internal/core/version"
	"github.com/cnikit/cni/internal/host/ns"
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
		fmt.Fprintf(stderr, "%s\nCNI protocol versions supported: %s\n", p.about(), strings.Join(p.Versions, ", "))
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

func (p *Plugin) about() string {
	if p.About == "" {
		return p.Name
	}
	return p.Name + ": " + p.About
}

// invoke runs the pipeline shared by Run and Invoke: the environment's checks, the
// config (read from stdin when it is given), the callback, the wait for the work it
// left running, and the invocation log's line when the log is on. It also returns the
// config's version so that errors can carry it.
func invoke(ctx context.Context, p *Plugin, args Args, stdin io.Reader, data []byte, stderr io.Writer) (res *result.Result, confVersion string, err error) {
	if stderr == nil {
		stderr = io.Discard
	}
	if ctx == nil {
		ctx = context.Background()
	}
	inherited, logErr := inheritedLog(ctx, args)
	lg := beginLog(ctx, inherited, args)
	defer func() { lg.finish(p.Name, args, res, err, stderr) }()
	if logErr != nil {
		if !lenient(args.Command) {
			return nil, "", logErr
		}
		fmt.Fprintf(stderr, "%s: ignoring the invocation log's environment: %v\n", p.Name, logErr)
	}
	if err := args.validate(); err != nil {
		return nil, "", err
	}
	if stdin != nil {
		if data, err = io.ReadAll(stdin); err != nil {
			return nil, "", cnierror.Newf(cnierror.CodeIO, "reading from stdin: %v", err)
		}
	}
	if why := args.nothingToDelete(); why != nil {
		fmt.Fprintf(stderr, "%s: DEL: nothing to delete, no ADD can have made this attachment: %v\n", p.Name, why)
		return nil, "", nil
	}
	conf, prev, err := parseNetConf(p, args.Command, data)
	var confErr error
	lg, ctx, confErr = lg.configure(ctx, inherited, conf, args, stderr, p.Name)
	if cnierror.CannotHaveMade(args.Command, err) {
		fmt.Fprintf(stderr, "%s: %s: nothing to do, no ADD with this config can have run: %v\n", p.Name, args.Command, err)
		return nil, conf.CNIVersion, nil
	}
	if err == nil {
		err = confErr
	}
	if err != nil {
		return nil, conf.CNIVersion, err
	}
	if err := checkNetnsIsNotOwn(args); err != nil {
		return nil, conf.CNIVersion, err
	}
	// A caller that gave up before the plugin started gets what an exec'd plugin gives
	// it then (a process never started): a failure, with nothing done. In-process, this
	// is where a cancelled chain stops: the next plugin, or the next delegate, whose
	// failure makes its caller undo what it did (with UndoContext).
	if err := ctx.Err(); err != nil {
		return nil, conf.CNIVersion, cnierror.Newf(cnierror.CodeInternal, "%s: %s not started: %v", p.Name, args.Command, err)
	}
	ctx, wait, owned := background.Own(ctx)
	ctx = lg.ownWork(ctx, owned)
	req := &Request{
		ctx: ctx, Args: args, Config: data, Net: conf, PrevResult: prev,
		ValidAttachments: conf.ValidAttachments, Stderr: stderr, plugin: p.Name,
	}
	if args.Command == CmdRepair {
		req.repair = repairOf(ctx)
	}
	res, err = call(p, req)
	// The work the callback left running (link deletions) is part of the command: its
	// errors are the command's, and the answer waits for it.
	var waiting *steps.Timer
	if owned && background.PendingOf(ctx).Busy() {
		waiting = lg.begin(steps.WaitPending)
	}
	if werr := waiting.Done(wait()); werr != nil {
		err = errors.Join(err, werr)
	}
	lg.handOff(p.Name, args, res, err, stderr)
	if err != nil {
		return nil, conf.CNIVersion, reportPanic(p.Name, stderr, err)
	}
	if args.Command != CmdAdd {
		return nil, conf.CNIVersion, nil
	}
	if res == nil {
		return nil, conf.CNIVersion, cnierror.Newf(cnierror.CodeInternal, "%s: ADD returned no result", p.Name)
	}
	v := version.OrDefault(conf.CNIVersion)
	if res.CNIVersion == "" {
		res.CNIVersion = v
	}
	out, err := res.Convert(v)
	return out, conf.CNIVersion, err
}

// call runs the callback for the command. A panic of the callback's own goroutine is
// recovered here as a *panics.Error; those of goroutines it started (namespace work,
// Pending work) arrive as one in its error or the Pending's. reportPanic turns them into
// the spec's internal error.
func call(p *Plugin, req *Request) (res *result.Result, err error) {
	defer panics.Recover(&err)
	switch req.Args.Command {
	case CmdAdd:
		if p.Add == nil {
			return nil, cnierror.Newf(cnierror.CodeInternal, "%s does not implement ADD", p.Name)
		}
		return p.Add(req)
	case CmdDel:
		return nil, optional(p.Del, req)
	case CmdCheck:
		if p.Check == nil {
			return nil, cnierror.Newf(cnierror.CodeInternal, "%s does not implement CHECK", p.Name)
		}
		return nil, p.Check(req)
	case CmdGC:
		return nil, optional(p.GC, req)
	case CmdStatus:
		return nil, optional(p.Status, req)
	case CmdRepair:
		return nil, optional(p.Repair, req)
	}
	return nil, cnierror.Newf(cnierror.CodeInvalidEnv, "unknown CNI_COMMAND: %s", req.Args.Command)
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
	if args.NetnsOverride || args.Netns == "" {
		return nil
	}
	switch args.Command {
	case CmdAdd, CmdDel, CmdCheck:
	default:
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
