package chain

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/cnikit/cni/internal/core/background"
	"github.com/cnikit/cni/internal/core/cnierror"
	"github.com/cnikit/cni/internal/core/panics"
	"github.com/cnikit/cni/internal/core/version"
	"github.com/cnikit/cni/internal/host/ns"
	"github.com/cnikit/cni/internal/result"
	"github.com/cnikit/cni/internal/spec/skel"
)

// Runner runs network configuration lists. The zero value execs every plugin from an
// empty path; set at least PluginPath. A Runner holds no state between calls (the
// result cache is on disk), so one value may serve concurrent calls for different
// attachments; like any CNI runtime, never run two operations on one attachment at once.
type Runner struct {
	// Builtin returns the in-process plugin for a type, or nil to exec the type from
	// PluginPath. The cni binary passes its registry lookup.
	Builtin func(pluginType string) *skel.Plugin
	// PluginPath is CNI_PATH: where exec'd plugins are found, and what every plugin
	// (built-in or not) is told for its own delegates.
	PluginPath []string
	// CacheDir holds the result cache; empty means DefaultCacheDir (/var/lib/cni).
	CacheDir string
	// Env is the environment exec'd plugins inherit (the CNI_* variables are replaced);
	// nil means this process's environment, as libcni does.
	Env []string
	// Stderr receives the plugins' logs; nil discards them.
	Stderr io.Writer
	// Timeout bounds each operation (Add, Check, Del, GC, Status) as a whole; zero means
	// only the caller's context does. An exec'd plugin still running at the deadline is
	// killed.
	Timeout time.Duration

	// cacheWritten, when set, is called with a cache entry written under its
	// temporary name, before the rename (tests kill the process there).
	cacheWritten func()
}

// Attachment says which container a network is attached to: what a runtime passes as
// CNI_CONTAINERID, CNI_NETNS, CNI_IFNAME, CNI_ARGS and capability args.
type Attachment struct {
	ContainerID string
	Netns       string
	IfName      string
	// Args are the CNI_ARGS pairs, sent as K=V;K2=V2.
	Args [][2]string
	// CapabilityArgs are offered to each plugin as "runtimeConfig", filtered by the
	// capabilities the plugin declares true.
	CapabilityArgs map[string]any

	// rawArgs, when Args is empty, is CNI_ARGS as the chain plugin received it, handed
	// on to its children byte for byte.
	rawArgs string
}

func (a *Attachment) cniArgs() string {
	if len(a.Args) == 0 {
		return a.rawArgs
	}
	pairs := make([]string, len(a.Args))
	for i, kv := range a.Args {
		pairs[i] = kv[0] + "=" + kv[1]
	}
	return strings.Join(pairs, ";")
}

// validate applies libcni's checks before ADD, and ours (no control character in the
// interface name), before ADD and CHECK; they also keep the cache file name a plain
// file name.
func (a *Attachment) validate(network string) error {
	if err := skel.ValidateContainerID(a.ContainerID); err != nil {
		return err
	}
	if err := skel.ValidateNetworkName(network); err != nil {
		return err
	}
	return skel.ValidateIfName(a.IfName)
}

// GCArgs is what GC is told about the attachments still in use. A nil *GCArgs means
// none was given: every cached attachment of the network is stale and the plugins get no
// valid-attachments key (cnitool's gc).
type GCArgs struct {
	ValidAttachments []skel.Attachment
}

// context is the context of one operation: traced (see traced) and bounded by Timeout.
func (r *Runner) context(ctx context.Context) (context.Context, context.CancelFunc) {
	ctx = r.traced(ctx)
	if r.Timeout > 0 {
		return context.WithTimeout(ctx, r.Timeout)
	}
	return context.WithCancel(ctx)
}

// Add runs ADD through the plugins in order, each getting the previous result as
// prevResult, and caches the final result. On failure nothing is cached and nothing is
// undone: as with libcni, the caller should DEL.
func (r *Runner) Add(ctx context.Context, n *Network, att Attachment) (*result.Result, error) {
	ctx, cancel := r.context(ctx)
	defer cancel()
	if err := att.validate(n.Name); err != nil {
		return nil, err
	}
	if err := checkCacheName(n.Name, &att); err != nil {
		return nil, err
	}
	res, _, err := r.addPlugins(ctx, n, &att, nil)
	if err != nil {
		return nil, err
	}
	if err := r.writeCache(n, &att, res); err != nil {
		return nil, fmt.Errorf("failed to set network %q cached result: %w", n.Name, err)
	}
	return res, nil
}

// Check runs CHECK through the plugins in order with the cached result as prevResult
// (none when nothing is cached, as libcni). It needs a config of 0.4.0 or later and does
// nothing when the list sets disableCheck.
func (r *Runner) Check(ctx context.Context, n *Network, att Attachment) error {
	ctx, cancel := r.context(ctx)
	defer cancel()
	if !version.AtLeast(n.CNIVersion, "0.4.0") {
		return fmt.Errorf("configuration version %q does not support the CHECK command", n.CNIVersion)
	}
	if n.DisableCheck {
		return nil
	}
	if err := att.validate(n.Name); err != nil {
		return err
	}
	prev, err := r.CachedResult(n, att)
	if err != nil {
		return fmt.Errorf("failed to get network %q cached result: %w", n.Name, err)
	}
	return r.each(ctx, n, n.Plugins, step{command: skel.CmdCheck, name: "check"}, prev, &att, nil)
}

// Del runs DEL through the plugins in reverse order with the cached result as
// prevResult (configs of 0.4.0 or later), then removes the cache entry and the
// leftover an interrupted write of it leaves in results.tmp (GC removes the former
// writer's leftovers in results/). An empty or corrupt cache entry never blocks DEL: it
// is dropped and DEL runs without prevResult.
//
// Unlike ADD, DEL does not refuse a container id or interface name: an attachment that
// another runtime added (libcni takes interface names with control characters, which
// ADD here refuses) can always be deleted, and one that no ADD can have made
// (skel.Attachable: an id against the spec's rule, a name the kernel refuses) has
// nothing to delete, so DEL succeeds without running a plugin, where libcni's plugins
// would refuse it for ever. An id or name that does not make a plain file name of the
// cache entry reaches no cache entry.
//
// A netns that is the runner's own network namespace (the one it runs plugins in) is
// no container's: the path now names the host, as when /proc/<pid>/ns/net outlived its
// process and the pid was reused. Plugins refuse to act there (code 8), so such a DEL
// could never finish. It runs as for a netns that is gone, with CNI_NETNS empty: the
// plugins release what they hold on the host (addresses, rules, qdiscs) and touch no
// namespace. CNI_NETNS_OVERRIDE=1 in the runner's environment turns this off.
func (r *Runner) Del(ctx context.Context, n *Network, att Attachment) error {
	ctx, cancel := r.context(ctx)
	defer cancel()
	if err := skel.ValidateNetworkName(n.Name); err != nil {
		return err
	}
	if err := skel.Attachable(att.ContainerID, att.IfName); err != nil {
		r.logf("DEL of network %q: nothing to delete, no ADD can have made this attachment: %v", n.Name, err)
		return nil
	}
	dir, err := openResults(r.cacheDir(), false)
	if err != nil {
		r.logf("ignoring the unusable result cache: %v", err) // dir is nil: nothing cached
	}
	defer dir.Close()
	return r.del(ctx, dir, n, &att)
}

// del is Del with the results directory open (nil when there is none).
func (r *Runner) del(ctx context.Context, dir *results, n *Network, att *Attachment) error {
	// CNI_NETNS_OVERRIDE says to act in the runner's own netns anyway.
	if att.Netns != "" && !r.procEnv().NetnsOverride && ns.IsCurrent(att.Netns) {
		r.logf("netns %q of container %s is this runner's own network namespace, not a container's: deleting %s as for a netns that is gone (CNI_NETNS empty)",
			att.Netns, att.ContainerID, att.IfName)
		gone := *att
		gone.Netns = ""
		att = &gone
	}
	var prev *result.Result
	if version.AtLeast(n.CNIVersion, "0.4.0") {
		var err error
		if prev, err = dir.cachedResult(n, att); err != nil {
			r.logf("ignoring unusable cached result: %v", err)
			prev = nil
		}
	}
	if err := r.each(ctx, n, reversed(n.Plugins), step{command: skel.CmdDel, name: "delete"}, prev, att, nil); err != nil {
		return err
	}
	if err := dir.remove(cacheName(n.Name, att)); err != nil {
		r.logf("removing cached result: %v", err)
	}
	return nil
}

// GC removes the leftovers of interrupted cache writes, deletes every cached attachment
// of the network that args does not list as valid (a full DEL each, with the cached
// netns and args), then, for configs of 1.1.0 or later, sends GC to every plugin with
// the valid list under both "cni.dev/valid-attachments" and "cni.dev/attachments". It
// keeps going after errors and returns them all. Nothing happens when the list sets
// disableGC.
//
// Only what GC can act on makes it fail: a stale attachment whose DEL failed, a
// plugin's GC. Cache entries it cannot use (unreadable, not a regular file, a symlink,
// not a cache entry) are skipped, as libcni does; an entry naming an attachment that
// libcni's ADD refuses too (a container id against the spec's rule, an interface name
// the kernel refuses), which no runtime writes, is dropped. Any other stale entry is
// deleted, also one that ADD here would refuse (an interface name with a control
// character, which libcni takes).
func (r *Runner) GC(ctx context.Context, n *Network, args *GCArgs) error {
	ctx, cancel := r.context(ctx)
	defer cancel()
	if n.DisableGC {
		return nil
	}
	errs := r.gcCache(ctx, n, args)
	if version.AtLeast(n.CNIVersion, "1.1.0") {
		var extra map[string]any
		if args != nil {
			extra = map[string]any{
				"cni.dev/valid-attachments": args.ValidAttachments,
				"cni.dev/attachments":       args.ValidAttachments,
			}
		}
		errs = append(errs, r.each(ctx, n, n.Plugins, step{command: skel.CmdGC, name: "gc", keepGoing: true}, nil, nil, extra))
	}
	return errors.Join(errs...)
}

// gcCache is GC's part on the result cache.
func (r *Runner) gcCache(ctx context.Context, n *Network, args *GCArgs) []error {
	dir, err := openResults(r.cacheDir(), false)
	if err != nil {
		return []error{fmt.Errorf("listing cached attachments: %w", err)}
	}
	defer dir.Close()
	if err := dir.sweep(ctx); err != nil {
		r.logf("removing leftovers of interrupted cache writes: %v", err)
	}
	cached, err := cachedAttachments(dir, "")
	if err != nil {
		return []error{fmt.Errorf("listing cached attachments: %w", err)}
	}
	valid := map[skel.Attachment]bool{}
	if args != nil {
		for _, a := range args.ValidAttachments {
			valid[a] = true
		}
	}
	var errs []error
	for _, c := range cached {
		if c.Network != n.Name || valid[skel.Attachment{ContainerID: c.ContainerID, IfName: c.IfName}] {
			continue
		}
		if err := skel.Attachable(c.ContainerID, c.IfName); err != nil {
			r.logf("dropping cache entry %s: %v", c.file, err)
			errs = append(errs, dir.remove(c.file))
			continue
		}
		if err := r.del(ctx, dir, n, &c.Attachment); err != nil {
			errs = append(errs, fmt.Errorf("failed to delete stale attachment %s %s: %w", c.ContainerID, c.IfName, err))
			continue
		}
		if c.file != cacheName(n.Name, &c.Attachment) {
			errs = append(errs, dir.remove(c.file)) // a copy under another name: its attachment is gone
		}
	}
	return errs
}

// Status sends STATUS to each plugin in order (configs of 1.1.0 or later; older ones
// have no STATUS) and returns the first failure, whose code (50, 51, ...) cnierror.Code
// reads. When the plugins are ready, it then looks at the attachments the cache holds
// for the network, whatever the config's version: code 51 names the host objects a
// host firewall reload removed, until `cni repair` puts them back
// (statusOfAttachments).
func (r *Runner) Status(ctx context.Context, n *Network) error {
	ctx, cancel := r.context(ctx)
	defer cancel()
	if version.AtLeast(n.CNIVersion, "1.1.0") {
		if err := r.each(ctx, n, n.Plugins, step{command: skel.CmdStatus, name: "status"}, nil, nil, nil); err != nil {
			return err
		}
	}
	return r.statusOfAttachments(ctx, n)
}

// addPlugins runs ADD through the plugins in order, the first one getting prev as its
// prevResult and each later one the result of the one before. Each plugin's work is
// finished before the next one starts. It returns the last result, or the failure and
// the number of plugins that succeeded before it with the last of their results (prev
// when none did).
func (r *Runner) addPlugins(ctx context.Context, n *Network, att *Attachment, prev *result.Result) (*result.Result, int, error) {
	res, pe := prev, r.procEnv()
	for i, pc := range n.Plugins {
		conf, err := pluginConfig(n, pc, res, att, nil)
		var out *result.Result
		if err == nil {
			// No Pending in ctx: the invocation waits for its plugin's work itself.
			out, err = r.invoke(background.WithPending(ctx, nil), pe, pc.Type, skel.CmdAdd, conf, *att)
		}
		if err != nil {
			return res, i, &PluginError{Type: pc.Type, Network: n.Name, Step: "add", Err: err}
		}
		res = out
	}
	return res, len(n.Plugins), nil
}

// step is a command as the runner runs it through a list.
type step struct {
	command string
	// name is the step in libcni's words, for errors: check, delete, gc, status.
	name string
	// keepGoing runs the remaining plugins after one failed (GC); otherwise the first
	// failure ends the list, as in libcni.
	keepGoing bool
}

// each runs a command that returns no result through plugins, in the order given, with
// prev as prevResult (none when nil) and extra keys added to every config; att is nil
// for GC and STATUS, which concern no attachment.
//
// The work a plugin leaves running (link deletions, see background.Pending) is not waited for
// before the next plugin starts, so the kernel waits of a whole DEL overlap, but each
// returns only once all of it is done: the runtime deletes the netns next. An error of
// that work is its plugin's error. The first error comes first in the result, so that
// cnierror.Code reads the code of the plugin that failed first.
//
// A plugin that cannot run with the config (not on the plugin path, or not speaking the
// config's version: cnierror.ErrCannotRun) is skipped by DEL and GC, saying why: no ADD
// can have run it, so it has nothing to undo, and failing on it would fail the DEL for
// ever and keep the plugins before it from deleting theirs (libcni's DEL stops there).
// A plugin that runs and fails still fails the DEL.
func (r *Runner) each(ctx context.Context, n *Network, plugins []PluginConf, s step,
	prev *result.Result, att *Attachment, extra map[string]any) error {
	var a Attachment
	if att != nil {
		a = *att
	}
	var errs []error
	pending := make([]*background.Pending, 0, len(plugins))
	pe := r.procEnv()
	for _, pc := range plugins {
		p := new(background.Pending)
		pending = append(pending, p)
		conf, err := pluginConfig(n, pc, prev, att, extra)
		if err == nil {
			_, err = r.invoke(background.WithPending(ctx, p), pe, pc.Type, s.command, conf, a)
		}
		if cnierror.CannotHaveMade(s.command, err) {
			r.logf("%s of plugin type=%q in network %q: nothing to do, no ADD with this config can have run it: %v", s.name, pc.Type, n.Name, err)
			continue
		}
		if err != nil {
			errs = append(errs, &PluginError{Type: pc.Type, Network: n.Name, Step: s.name, Err: err})
			if !s.keepGoing {
				break
			}
		}
	}
	for i, p := range pending {
		if err := p.Wait(); err != nil {
			errs = append(errs, &PluginError{Type: plugins[i].Type, Network: n.Name, Step: s.name, Err: r.pendingError(plugins[i].Type, err)})
		}
	}
	if len(errs) == 1 {
		return errs[0] // itself, as callers and tests compare it
	}
	return errors.Join(errs...)
}

// pendingError is what skel.Invoke makes of an error of the work a plugin left running:
// a CNI error, code 999 for a panic (whose stack goes to the log) or an untyped error.
func (r *Runner) pendingError(pluginType string, err error) error {
	var pe *panics.Error
	if errors.As(err, &pe) {
		r.logf("%s: %v\n%s", pluginType, pe, pe.Stack)
		return cnierror.Newf(cnierror.CodeInternal, "%s: internal error: %v", pluginType, err)
	}
	return cnierror.From(err)
}

// reversed returns the plugins in reverse order, for DEL.
func reversed(plugins []PluginConf) []PluginConf {
	out := slices.Clone(plugins)
	slices.Reverse(out)
	return out
}

// pluginConfig builds the request configuration of one plugin the way libcni does:
// name and cniVersion of the list, the prevResult, and, when the attachment's
// capability args match at least one capability the plugin declares true, a
// runtimeConfig made of exactly those (replacing any static one). Keys come out sorted,
// as libcni's re-encoding leaves them.
func pluginConfig(n *Network, pc PluginConf, prev *result.Result, att *Attachment, extra map[string]any) ([]byte, error) {
	var obj map[string]any
	if err := decodeNumbers(pc.Bytes, &obj); err != nil {
		return nil, fmt.Errorf("plugin config: %w", err)
	}
	obj["name"] = n.Name
	obj["cniVersion"] = n.CNIVersion
	if prev != nil {
		obj["prevResult"] = prev
	}
	if att != nil {
		rc := map[string]any{}
		for capability, on := range pc.Capabilities {
			if v, ok := att.CapabilityArgs[capability]; ok && on {
				rc[capability] = v
			}
		}
		if len(rc) > 0 {
			obj["runtimeConfig"] = rc
			// libcni injects runtimeConfig by decoding and re-encoding the whole config,
			// which also sorts the keys of prevResult; do the same so plugins see the
			// same bytes from both runtimes.
			return canonical(obj)
		}
	}
	maps.Copy(obj, extra)
	return json.Marshal(obj)
}

// canonical encodes v with the keys of every object sorted.
func canonical(v any) ([]byte, error) {
	data, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	var generic any
	if err := decodeNumbers(data, &generic); err != nil {
		return nil, err
	}
	return json.Marshal(generic)
}

// decodeNumbers decodes data into v with numbers as json.Number: large integers stay
// exact, where libcni's float64 round trip would not keep them.
func decodeNumbers(data []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	return dec.Decode(v)
}

func (r *Runner) logf(format string, a ...any) {
	if r.Stderr != nil {
		fmt.Fprintf(r.Stderr, "cni: "+format+"\n", a...)
	}
}
