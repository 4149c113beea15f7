// Package ipam is how main plugins (and the chain runner) delegate address management:
// it runs the IPAM type named in the config's ipam.type with the full network config,
// as the spec's delegation rules demand. The built-in types (host-local, static, dhcp) run
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
	"fmt"

	"github.com/cnikit/cni/internal/core/cnierror"
	"github.com/cnikit/cni/internal/core/steps"
	"github.com/cnikit/cni/internal/core/version"
	"github.com/cnikit/cni/internal/ipam/dhcp"
	"github.com/cnikit/cni/internal/ipam/hostlocal"
	"github.com/cnikit/cni/internal/ipam/static"
	"github.com/cnikit/cni/internal/result"
	"github.com/cnikit/cni/internal/spec/invoke"
	"github.com/cnikit/cni/internal/spec/skel"
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
// The DEL runs without the request's deadline (skel.Request.UndoContext).
func Release(req *skel.Request) func() error {
	detached := req.WithContext(req.UndoContext())
	return func() error { return Del(detached) }
}

func discard(_ *result.Result, err error) error { return err }

// Type is one built-in IPAM type: its name, the function that makes its plugin (whose
// Name is that name), so that a lookup makes only the plugin it finds, and the check of
// its config that ADD makes without reserving anything (Validate).
type Type struct {
	Name     string
	Plugin   func() *skel.Plugin
	Validate func(*skel.Request) error
}

// Types are the built-in IPAM types, one line each: the one table that main plugins'
// in-process delegation (Builtin) and the binary's registry both read.
func Types() []Type {
	return []Type{
		{"host-local", hostlocal.Plugin, hostlocal.Validate},
		{"static", static.Plugin, static.Validate},
		{"dhcp", dhcp.Plugin, dhcp.Validate},
	}
}

// Validate checks, for an ADD, what of the ipam section can be checked without
// reserving anything: a type is named, a built-in type's config is valid (host-local's
// ranges parse, static's addresses), any other type is a binary on CNI_PATH. A main
// plugin calls it before it makes anything, so that a broken ipam section leaves
// nothing behind, not even what a rollback would not remove (a bridge it created, which
// other containers may come to share).
func Validate(req *skel.Request) error {
	typ := req.Net.IPAM.Type
	if typ == "" {
		return cnierror.New(cnierror.CodeInvalidConfig, "ipam.type: missing IPAM plugin type")
	}
	for _, t := range Types() {
		if t.Name == typ {
			return t.Validate(req.Probe())
		}
	}
	_, err := invoke.FindInPath(typ, req.Args.Path)
	return err
}

// Builtin returns the in-process plugin for an IPAM type, or nil.
func Builtin(typ string) *skel.Plugin {
	for _, t := range Types() {
		if t.Name == typ {
			return t.Plugin()
		}
	}
	return nil
}

// run runs the delegate as the invocation log's IPAM step, under whose span the
// delegate runs. A DEL or GC of a delegate that cannot run with the config (its type on
// no directory of CNI_PATH, its version unsupported) succeeds, saying why: no ADD with
// this config can have reserved anything through it, and failing would fail the main
// plugin's DEL for ever. A delegate that runs and fails fails the DEL.
func run(req *skel.Request, cmd string) (*result.Result, error) {
	res, err := delegate(req, cmd)
	if cnierror.CannotHaveMade(cmd, err) {
		fmt.Fprintf(req.Stderr, "ipam %s: %s: nothing to release, no ADD with this config can have run it: %v\n", req.Net.IPAM.Type, cmd, err)
		return nil, nil
	}
	return res, err
}

// delegate runs the IPAM type's command: in-process when it is built in, else exec'd
// from CNI_PATH.
func delegate(req *skel.Request, cmd string) (res *result.Result, err error) {
	typ := req.Net.IPAM.Type
	if typ == "" {
		return nil, cnierror.New(cnierror.CodeInvalidConfig, "ipam.type: missing IPAM plugin type")
	}
	step := steps.Begin(req.Context(), steps.IPAM)
	defer step.End(&err)
	ctx := step.Context(req.Context())
	if p := Builtin(typ); p != nil {
		args := req.Args
		args.Command = cmd
		return skel.Invoke(ctx, p, args, req.Config, req.Stderr)
	}
	bin, err := invoke.FindInPath(typ, req.Args.Path)
	if err != nil {
		return nil, err
	}
	out, err := invoke.Exec(ctx, bin, req.Args.Environ(cmd), req.Config, req.Stderr)
	if err != nil {
		// A delegate that printed no CNI error has no code of its own; to the runtime
		// that is the plugin's internal error.
		if cnierror.Code(err) == 0 {
			err = &cnierror.Error{Code: cnierror.CodeInternal, Msg: fmt.Sprintf("ipam %s: %v", typ, err)}
		}
		return nil, err
	}
	if cmd != skel.CmdAdd {
		return nil, nil
	}
	return parseResult(out, req.Net.CNIVersion)
}

// parseResult reads an exec'd delegate's ADD output, defaulting a missing version to
// the config's as libcni does, and converts it to the config's version.
func parseResult(out []byte, confVersion string) (*result.Result, error) {
	confVersion = version.OrDefault(confVersion)
	res, err := result.Parse(out, confVersion)
	if err != nil {
		return nil, fmt.Errorf("ipam: delegate result: %w", err)
	}
	return res.Convert(confVersion)
}
