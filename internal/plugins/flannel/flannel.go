// Package flannel is the flannel plugin: it turns the flannel daemon's subnet lease
// (its subnet file) into a network config for a delegate plugin, bridge with host-local
// by default, and runs that delegate; see delegateConfig for the config, which is the
// reference's (flannel-io/cni-plugin) key for key. The delegate config is kept in the
// data dir under the container id, so DEL runs the delegate with what ADD used.
//
// A built-in delegate runs in-process (no exec at all for bridge and host-local); any
// other type is exec'd from CNI_PATH like the reference does. Unlike the reference, a
// failed ADD undoes the delegate and its stored config, CHECK checks through the
// delegate, GC and STATUS reach the delegate, and a missing or partial subnet file is
// an error that names what is missing.
package flannel

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"slices"

	"github.com/cnikit/cni/internal/core/background"
	"github.com/cnikit/cni/internal/core/cnierror"
	"github.com/cnikit/cni/internal/core/rollback"
	"github.com/cnikit/cni/internal/core/version"
	"github.com/cnikit/cni/internal/result"
	"github.com/cnikit/cni/internal/spec/invoke"
	"github.com/cnikit/cni/internal/spec/skel"
)

// New returns the flannel plugin. builtin returns the in-process plugin of a delegate
// type, or nil to exec it; the registry passes its own lookup (this package cannot
// import the registry, which imports it).
func New(builtin func(pluginType string) *skel.Plugin) *skel.Plugin {
	f := &flannel{builtin: builtin}
	return &skel.Plugin{
		Name:     "flannel",
		About:    "runs a delegate (bridge by default) on the flannel daemon's subnet lease",
		Versions: version.All(),
		Add:      f.add,
		Del:      f.del,
		Check:    f.check,
		GC:       f.gc,
		Status:   f.status,
		Repair:   f.repair,
	}
}

type flannel struct {
	builtin func(string) *skel.Plugin
}

// add builds the delegate config, stores it, and runs the delegate's ADD.
func (f *flannel) add(req *skel.Request) (res *result.Result, err error) {
	c, deleg, err := current(req)
	if err != nil {
		return nil, err
	}
	data, err := json.Marshal(deleg)
	if err != nil {
		return nil, fmt.Errorf("flannel: delegate config: %w", err)
	}
	path := storedPath(c.DataDir, req.Args.ContainerID)
	var undo rollback.Stack
	defer undo.OnError(&err)
	if err := writeStored(path, data); err != nil {
		return nil, fmt.Errorf("flannel: %w", err)
	}
	// The delegate's DEL comes first: a delegate that failed half-way (an exec'd one
	// may not clean up after itself) is cleaned before its config is forgotten.
	undo.Push("delegate "+deleg["type"].(string), func() error {
		if _, err := f.run(req.WithContext(req.UndoContext()), skel.CmdDel, deleg, nil); err != nil && !neverRuns(err) {
			return err // kept for the runtime's DEL to try again
		}
		return removeStored(path)
	})
	return f.run(req, skel.CmdAdd, deleg, data)
}

// del runs the delegate's DEL with the stored config (and the runtime's prevResult) and
// then forgets it. Without a stored config there is nothing of this plugin's to delete.
func (f *flannel) del(req *skel.Request) error {
	path, err := storedPathOf(req)
	if err != nil {
		// ADD refuses such a dataDir before it stores anything there.
		fmt.Fprintf(req.Stderr, "flannel: nothing to delete: %v\n", err)
		return nil
	}
	data, deleg, err := readStored(path)
	if errors.Is(err, fs.ErrNotExist) {
		return removeStored(path) // what an ADD killed while writing it may have left
	}
	if errors.Is(err, errUnusable) {
		// It can never be run, and keeping it would fail every DEL.
		fmt.Fprintf(req.Stderr, "flannel: dropping it: %v\n", err)
		return removeStored(path)
	}
	if err != nil {
		return fmt.Errorf("flannel: %w", err)
	}
	if len(req.Net.RawPrevResult) > 0 {
		// The cached result is the delegate's: with it the delegate finds what the
		// netns no longer shows (bridge: the host veth of a namespace that lingers).
		deleg["cniVersion"], deleg["prevResult"] = req.Net.CNIVersion, req.Net.RawPrevResult
		data = nil // run encodes it again, with them
	}
	if _, err := f.run(req, skel.CmdDel, deleg, data); err != nil {
		if !neverRuns(err) {
			return err // kept: the runtime retries DEL
		}
		fmt.Fprintf(req.Stderr, "flannel: forgetting the delegate config of container %s, whose DEL can never succeed: %v\n",
			req.Args.ContainerID, err)
	}
	return removeStored(path)
}

// neverRuns reports whether a delegate's failure is one that trying again with the same
// stored config and environment cannot change: the delegate cannot run with it
// (cnierror.ErrCannotRun: the type is not on CNI_PATH, a typo or an uninstalled plugin,
// or it does not speak the config's version), or it ran and refused the stored config or
// the CNI_* variables as invalid. Keeping the config would make every later DEL fail the
// same way and leave the pod terminating for ever; the reference forgets it after the
// first try. The stored config is this plugin's own state, written at ADD and never
// changed, which is why a refusal of it counts here and not for a chain's child.
func neverRuns(err error) bool {
	switch cnierror.Code(err) {
	case cnierror.CodeInvalidEnv, cnierror.CodeDecode, cnierror.CodeInvalidConfig:
		return true
	}
	return errors.Is(err, cnierror.ErrCannotRun)
}

// check runs the delegate's CHECK with the stored config and the request's prevResult.
// (The reference's CHECK does nothing.)
func (f *flannel) check(req *skel.Request) error {
	deleg, err := f.stored(req)
	if err != nil {
		return err
	}
	_, err = f.run(req, skel.CmdCheck, deleg, nil)
	return err
}

// stored is the delegate config ADD ran, with the request's version and prevResult.
func (f *flannel) stored(req *skel.Request) (map[string]any, error) {
	path, err := storedPathOf(req)
	if err != nil {
		return nil, err
	}
	_, deleg, err := readStored(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("flannel: no delegate config for container %q: was it added?", req.Args.ContainerID)
	}
	if err != nil {
		return nil, fmt.Errorf("flannel: %w", err)
	}
	deleg["cniVersion"] = req.Net.CNIVersion
	if len(req.Net.RawPrevResult) > 0 {
		deleg["prevResult"] = req.Net.RawPrevResult
	}
	return deleg, nil
}

// repair asks a built-in delegate to repair with the stored config (its masquerade,
// when flanneld does not masquerade itself); a delegate exec'd from CNI_PATH cannot be
// asked, REPAIR being no spec command.
func (f *flannel) repair(req *skel.Request) error {
	deleg, err := f.stored(req)
	if err != nil {
		return err
	}
	typ, err := delegateType(deleg)
	if err != nil {
		return fmt.Errorf("flannel: %w", err)
	}
	p := f.builtin(typ)
	if p == nil {
		fmt.Fprintf(req.Stderr, "flannel: repair: delegate %s is exec'd, it cannot be asked to repair\n", typ)
		return nil
	}
	data, err := json.Marshal(deleg)
	if err != nil {
		return fmt.Errorf("flannel: delegate config: %w", err)
	}
	rep := req.Repair()
	missing, err := skel.InvokeRepair(ctxOf(req), p, f.args(req, skel.CmdRepair), data, req.Stderr, rep == nil || rep.DryRun)
	for _, what := range missing {
		rep.Found(typ + ": " + what)
	}
	return err
}

// status checks the subnet file and then asks the delegate. A subnet file that does not
// exist yet means the plugin cannot serve ADD: code 50.
func (f *flannel) status(req *skel.Request) error {
	_, deleg, err := current(req)
	if cnierror.Code(err) == cnierror.CodeTryAgainLater {
		return cnierror.New(cnierror.CodeNotAvailable, cnierror.From(err).Msg)
	}
	if err != nil {
		return err
	}
	_, err = f.run(req, skel.CmdStatus, deleg, nil)
	return err
}

// gc passes GC on to the delegate (with the delegate config the subnet file gives now,
// or, when it is gone, one stored for this network), then forgets the stored configs
// of this network whose containers are not among the valid attachments.
func (f *flannel) gc(req *skel.Request) error {
	c, err := load(req)
	if err != nil {
		return err
	}
	stored, err := storedOf(c.DataDir, req.Net.Name)
	if err != nil {
		return fmt.Errorf("flannel: %w", err)
	}
	_, deleg, err := current(req)
	if err != nil {
		for _, deleg = range stored {
			break // any one of them
		}
		if deleg == nil {
			return nil // no subnet file and nothing stored: nothing anywhere to collect
		}
	}
	deleg["cniVersion"] = req.Net.CNIVersion
	// A list, never null, even without valid attachments.
	deleg["cni.dev/valid-attachments"] = append([]skel.Attachment{}, req.ValidAttachments...)
	if _, err := f.run(req, skel.CmdGC, deleg, nil); err != nil {
		return err
	}
	var errs []error
	for cid := range stored {
		if !slices.ContainsFunc(req.ValidAttachments, func(a skel.Attachment) bool { return a.ContainerID == cid }) {
			errs = append(errs, removeStored(storedPath(c.DataDir, cid)))
		}
	}
	return errors.Join(errs...)
}

// current loads the config and builds the delegate config ADD would build now, from
// the subnet file as it is now.
func current(req *skel.Request) (*Config, map[string]any, error) {
	c, err := load(req)
	if err != nil {
		return nil, nil, err
	}
	env, err := LoadSubnetEnv(c.SubnetFile)
	if err != nil {
		return nil, nil, err
	}
	deleg, err := delegateConfig(c, req.Net, env)
	return c, deleg, err
}

// run runs cmd on the delegate with deleg (data when given, else deleg encoded). For
// ADD it returns the delegate's result in the request's version.
func (f *flannel) run(req *skel.Request, cmd string, deleg map[string]any, data []byte) (*result.Result, error) {
	typ, err := delegateType(deleg)
	if err != nil {
		return nil, fmt.Errorf("flannel: %w", err)
	}
	if data == nil {
		if data, err = json.Marshal(deleg); err != nil {
			return nil, fmt.Errorf("flannel: delegate config: %w", err)
		}
	}
	if p := f.builtin(typ); p != nil {
		return skel.Invoke(ctxOf(req), p, f.args(req, cmd), data, req.Stderr)
	}
	out, err := f.exec(req, cmd, typ, data)
	if err != nil || cmd != skel.CmdAdd {
		return nil, err
	}
	v := version.OrDefault(req.Net.CNIVersion)
	res, err := result.Parse(out, v)
	if err != nil {
		return nil, fmt.Errorf("flannel: delegate %s result: %w", typ, err)
	}
	return res.Convert(v)
}

// exec runs a delegate that is not built in from CNI_PATH, as the reference does.
func (f *flannel) exec(req *skel.Request, cmd, typ string, data []byte) ([]byte, error) {
	bin, err := invoke.FindInPath(typ, req.Args.Path)
	if err != nil {
		return nil, err
	}
	out, err := invoke.Exec(ctxOf(req), bin, req.Args.Environ(cmd), data, req.Stderr)
	if err != nil && cnierror.Code(err) == 0 {
		// A delegate that printed no CNI error has no code of its own.
		err = &cnierror.Error{Code: cnierror.CodeInternal, Msg: fmt.Sprintf("flannel: delegate %s: %v", typ, err)}
	}
	return out, err
}

func (f *flannel) args(req *skel.Request, cmd string) skel.Args {
	a := req.Args
	a.Command = cmd
	return a
}

// ctxOf is the context of a delegate's in-process invocation. It hides the process's
// background.Pending, so that Invoke returns once the work the delegate left running (its
// veth's deletion) is done, with that work's error: flannel acts on the delegate's
// outcome (keeps or forgets its stored config, undoes a failed ADD).
func ctxOf(req *skel.Request) context.Context {
	return background.WithPending(req.Context(), nil)
}
