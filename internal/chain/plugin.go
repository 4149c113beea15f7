package chain

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/cnikit/cni/internal/core/cnierror"
	"github.com/cnikit/cni/internal/core/version"
	"github.com/cnikit/cni/internal/result"
	"github.com/cnikit/cni/internal/spec/skel"
)

// Plugin returns the chain meta plugin: one plugin object whose "plugins" key holds a
// list, which it runs with the embedded runner exactly as libcni runs a conflist (see
// the package documentation). A runtime sees one plugin and starts one process per
// operation, in which every built-in child runs in-process. builtin returns the
// in-process plugin of a child type, or nil to exec the type from CNI_PATH; the
// registry passes its own lookup (plugin packages never import the runner).
func Plugin(builtin func(pluginType string) *skel.Plugin) *skel.Plugin {
	m := &meta{builtin: builtin}
	return &skel.Plugin{
		Name:     PluginName,
		About:    "runs a nested list of plugins in one process, as libcni runs a conflist",
		Versions: version.All(),
		Add:      m.add,
		Del:      m.del,
		Check:    m.check,
		GC:       m.gc,
		Status:   m.status,
		Repair:   m.repair,
	}
}

type meta struct {
	builtin func(string) *skel.Plugin
}

// call is one invocation of the chain plugin, as the runner runs it: the nested list
// under the outer network's name and version, for the outer attachment.
type call struct {
	runner *Runner
	net    *Network
	att    Attachment
}

// load reads the nested list and the attachment. The runtime config the runtime passed
// (for the capabilities the chain itself declares) becomes the capability args the
// runner offers each child, filtered by the child's own capabilities, as libcni does.
func (m *meta) load(req *skel.Request) (*call, error) {
	net, err := parseNested(req.Config)
	if err != nil {
		return nil, err
	}
	net.Name, net.CNIVersion = req.Net.Name, req.Net.CNIVersion
	var caps map[string]any
	if raw := req.Net.RuntimeConfig; len(raw) > 0 && string(raw) != "null" {
		if err := decodeNumbers(raw, &caps); err != nil {
			return nil, cnierror.Newf(cnierror.CodeInvalidConfig, "chain: runtimeConfig: must be an object: %v", err)
		}
	}
	return &call{
		runner: &Runner{Builtin: m.builtin, PluginPath: req.Args.Path, Env: req.Args.Env, Stderr: req.Stderr},
		net:    net,
		att: Attachment{
			ContainerID: req.Args.ContainerID, Netns: req.Args.Netns, IfName: req.Args.IfName,
			CapabilityArgs: caps, rawArgs: req.Args.CNIArgs,
		},
	}, nil
}

// add runs ADD through the children, the first one getting the chain's own prevResult
// (none unless the chain is itself chained). A child's failure undoes the children that
// succeeded before it is returned; the runtime's DEL that follows finds nothing left.
func (m *meta) add(req *skel.Request) (*result.Result, error) {
	c, err := m.load(req)
	if err != nil {
		return nil, err
	}
	if missing := undeclared(c.net.Plugins, req.Net.Capabilities, c.att.CapabilityArgs); len(missing) > 0 {
		return nil, cnierror.Newf(cnierror.CodeInvalidConfig,
			"chain: capabilities: the children use %s but the chain does not declare it: the runtime passes runtime config only for the capabilities of the chain's own \"capabilities\"",
			strings.Join(missing, ", "))
	}
	res, done, err := c.runner.addPlugins(req.Context(), c.net, &c.att, req.PrevResult)
	if err != nil {
		m.undo(req, c, done, res)
		return nil, childError(err)
	}
	return res, nil
}

// undo runs DEL of the first done children, in reverse order and best effort, each
// with the last result they produced, as a runtime's DEL would pass the cached one.
func (m *meta) undo(req *skel.Request, c *call, done int, last *result.Result) {
	if done == 0 {
		return
	}
	if !version.AtLeast(c.net.CNIVersion, "0.4.0") {
		last = nil // DEL of older versions gets no prevResult
	}
	del := step{command: skel.CmdDel, name: "delete", keepGoing: true}
	if err := c.runner.each(req.UndoContext(), c.net, reversed(c.net.Plugins[:done]), del, last, &c.att, nil); err != nil {
		fmt.Fprintf(req.Stderr, "chain: undoing the ADD of the children before the one that failed: %v\n", childError(err))
	}
}

// del runs DEL through the children in reverse order, each getting the prevResult the
// runtime passed: its cached result of the whole chain, what libcni passes each plugin
// of a conflist. The chain keeps no cache of its own. Unlike libcni's conflist DEL, a
// failing child does not keep the children before it from releasing what they hold:
// DEL is best effort, and the first failure is reported with the others. A nested list
// that ADD refuses ran no child, so there is nothing to delete: DEL says why on stderr
// and succeeds, as bridge, bandwidth and tuning do with a config they refuse, rather
// than keep the runtime's teardown of the pod failing for ever.
func (m *meta) del(req *skel.Request) error {
	c, err := m.load(req)
	if err != nil {
		fmt.Fprintf(req.Stderr, "chain: nothing to delete, no child can have run with this config: %v\n", err)
		return nil
	}
	return childError(c.runner.each(req.Context(), c.net, reversed(c.net.Plugins), step{command: skel.CmdDel, name: "delete", keepGoing: true}, req.PrevResult, &c.att, nil))
}

// check runs CHECK through the children in order with the runtime's prevResult, unless
// the chain sets disableCheck.
func (m *meta) check(req *skel.Request) error {
	c, err := m.load(req)
	if err != nil || c.net.DisableCheck {
		return err
	}
	return childError(c.runner.each(req.Context(), c.net, c.net.Plugins, step{command: skel.CmdCheck, name: "check"}, req.PrevResult, &c.att, nil))
}

// gc sends GC to every child, unless the chain sets disableGC, with the valid
// attachments exactly as the runtime sent them. The runtime's own GC has already deleted
// the stale attachments of its cache through the chain's DEL.
func (m *meta) gc(req *skel.Request) error {
	c, err := m.load(req)
	if err != nil || c.net.DisableGC {
		return err
	}
	extra, err := validAttachmentKeys(req.Config)
	if err != nil {
		return err
	}
	return childError(c.runner.each(req.Context(), c.net, c.net.Plugins, step{command: skel.CmdGC, name: "gc", keepGoing: true}, nil, nil, extra))
}

// status asks every child in order; the first failure's code (50, 51) is the answer's.
func (m *meta) status(req *skel.Request) error {
	c, err := m.load(req)
	if err != nil {
		return err
	}
	return childError(c.runner.each(req.Context(), c.net, c.net.Plugins, step{command: skel.CmdStatus, name: "status"}, nil, nil, nil))
}

// repair asks the children to repair the attachment with the runtime's prevResult (the
// whole chain's cached result), reporting what they found missing as the chain's own.
// Exec'd children cannot be asked (REPAIR is no spec command): stderr names them.
func (m *meta) repair(req *skel.Request) error {
	c, err := m.load(req)
	if err != nil {
		return err
	}
	rep := req.Repair()
	got, err := c.runner.repairPlugins(req.Context(), c.net, c.net.Plugins, req.PrevResult, &c.att, rep == nil || rep.DryRun)
	for _, what := range got.Missing {
		rep.Found(what)
	}
	if len(got.Skipped) > 0 {
		fmt.Fprintf(req.Stderr, "chain: repair: exec'd plugins cannot be asked to repair, skipped: %s\n", strings.Join(got.Skipped, ", "))
	}
	return childError(err)
}

// validAttachmentKeys returns the GC keys of the config as they were written, so that an
// empty list (every attachment stale) stays distinct from no list.
func validAttachmentKeys(config []byte) (map[string]any, error) {
	var keys map[string]json.RawMessage
	if err := json.Unmarshal(config, &keys); err != nil {
		return nil, cnierror.Newf(cnierror.CodeDecode, "chain: %v", err)
	}
	extra := map[string]any{}
	for _, k := range []string{"cni.dev/valid-attachments", "cni.dev/attachments"} {
		if v, ok := keys[k]; ok {
			extra[k] = v
		}
	}
	return extra, nil
}

// undeclared returns, sorted, the capabilities children declare that the chain does
// not: the runtime passes only what the chain declares, so a child's would never reach
// it. One the chain's own runtimeConfig holds (written in the file, or passed) reaches
// the children anyway.
func undeclared(children []PluginConf, own map[string]bool, given map[string]any) []string {
	var out []string
	for _, pc := range children {
		for c, on := range pc.Capabilities {
			_, held := given[c]
			if on && !own[c] && !held && !slices.Contains(out, c) {
				out = append(out, c)
			}
		}
	}
	slices.Sort(out)
	return out
}

// childError turns the runner's errors into the chain plugin's: "chain: <type>: <the
// child's message>", with the code and details of the child's error. Several failures
// (a DEL that went on) are joined in one message, the first one's code winning.
func childError(err error) error {
	if err == nil {
		return nil
	}
	// The runner joins its plugins' errors in one flat list.
	errs := []error{err}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		errs = j.Unwrap()
	}
	var out *cnierror.Error
	for _, e := range errs {
		ce := cnierror.From(e)
		msg := ce.Msg
		if pe := (*PluginError)(nil); errors.As(e, &pe) {
			ce = cnierror.From(pe.Err)
			msg = "chain: " + pe.Type + ": " + ce.Msg
		}
		if out == nil {
			out = &cnierror.Error{Code: ce.Code, Msg: msg, Details: ce.Details}
			continue
		}
		out.Msg += "; " + msg
	}
	return out
}
