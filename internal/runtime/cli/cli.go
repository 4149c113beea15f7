// Package cli is the runtime side of the cni binary: cnitool-compatible add, check, del,
// gc and status commands that run a network's chain through the embedded runner, "ls"
// to list the configured networks, "log" and "stats" to read the invocation log, "exec" to run one plugin by hand, "install" to put
// the binary onto a node and "sleep" to idle in a DaemonSet. It reads its
// environment and streams from a Process, never from os globals.
package cli

import (
	"cmp"
	"context"
	"crypto/sha512"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/cnikit/cni/internal/chain"
	"github.com/cnikit/cni/internal/core/cnierror"
	"github.com/cnikit/cni/internal/core/tracectx"
	"github.com/cnikit/cni/internal/core/version"
	"github.com/cnikit/cni/internal/spec/skel"
)

// Exit statuses of every command.
const (
	ExitOK      = 0 // success
	ExitFailure = 1 // a plugin, CNI or configuration error
	ExitUsage   = 2 // bad flags or arguments
)

// DefaultPluginPath is used when neither --cni-path nor CNI_PATH is set. cnitool would
// search nothing; /opt/cni/bin is where every installer puts plugins.
const DefaultPluginPath = "/opt/cni/bin"

// Process is what a command runs with. Builtin is the registry lookup that makes
// built-in plugin types run in-process; Plugins are the registry's names, in order.
type Process struct {
	Env     []string
	Stdin   io.Reader
	Stdout  io.Writer
	Stderr  io.Writer
	Builtin func(name string) *skel.Plugin
	Plugins []string
	// Context ends a command that runs until stopped (log -f); nil means at SIGINT or
	// SIGTERM.
	Context context.Context
}

// untilStopped is the context of a command that runs until stopped.
func (p Process) untilStopped() (context.Context, context.CancelFunc) {
	if p.Context != nil {
		return context.WithCancel(p.Context)
	}
	return signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
}

// Command is one subcommand.
type Command struct {
	Name    string
	Summary string
	Run     func(p Process, args []string) int
}

// Commands returns the runtime-side subcommands in the order help lists them.
func Commands() []Command {
	return []Command{
		{Name: "add", Summary: "NETWORK NETNS: ADD the network's chain to NETNS, print the result", Run: runChain("add")},
		{Name: "check", Summary: "NETWORK NETNS: CHECK an attachment against its cached result", Run: runChain("check")},
		{Name: "del", Summary: "NETWORK NETNS: DEL the network's chain from NETNS", Run: runChain("del")},
		{Name: "gc", Summary: "NETWORK [NETNS]: DEL stale cached attachments, then GC the plugins", Run: runChain("gc")},
		{Name: "status", Summary: "NETWORK [NETNS]: ask every plugin of the network for STATUS", Run: runChain("status")},
		{Name: "repair", Summary: "[NETWORK...] [--watch]: put back the host rules of every cached attachment that a firewall reload removed", Run: runRepair},
		{Name: "ls", Summary: "list the networks of the config dir and their plugin types", Run: runList},
		{Name: "log", Summary: "[--pod NAME] [--errors] [-f] ...: read the invocation log (--file, CNI_LOG_FILE, the conf dir's log objects)", Run: runLog},
		{Name: "stats", Summary: "[--prometheus]: counts, p50/p90/p99 and errors per plugin and command from the log", Run: runStats},
		{Name: "install", Summary: "--dir DIR [--conf FILE]...: install this binary and its plugin names, then configs", Run: runInstall},
		{Name: "sleep", Summary: "block until SIGTERM or SIGINT, then exit 0 (a DaemonSet's idle main container)", Run: runSleep},
		{Name: "exec", Summary: "PLUGIN ADD|DEL|CHECK|GC|STATUS|VERSION: run one plugin by hand" +
			"\n\n  Runtime commands read NETCONFPATH, CNI_PATH, CNI_ARGS, CAP_ARGS, CNI_IFNAME and\n" +
			"  CNI_CACHE_DIR like cnitool; \"cni COMMAND --help\" lists their flags.\n" +
			"  Exit status: 0 success, 1 plugin, CNI or config error, 2 usage error.",
			Run: runExec},
	}
}

// envOr reads one variable of the process environment (the last setting wins, as for
// getenv(3)); def when it is unset or empty.
func (p Process) envOr(key, def string) string {
	for i := len(p.Env) - 1; i >= 0; i-- {
		if v, ok := strings.CutPrefix(p.Env[i], key+"="); ok {
			return cmp.Or(v, def)
		}
	}
	return def
}

// fail prints err for a command and returns the failure status; the CNI code, when
// there is one, is named so scripts and humans see what the plugin reported.
func (p Process) fail(cmd string, err error) int {
	msg := cnierror.WithPrivilegeHint(err).Error()
	if code := cnierror.Code(err); code != 0 {
		msg += fmt.Sprintf(" (CNI error code %d)", code)
	}
	fmt.Fprintf(p.Stderr, "cni %s: %s\n", cmd, msg)
	return ExitFailure
}

func (p Process) usageError(fs *flag.FlagSet, format string, a ...any) int {
	fmt.Fprintf(p.Stderr, "cni %s: %s\n", fs.Name(), fmt.Sprintf(format, a...))
	fs.Usage()
	return ExitUsage
}

// parseArgs parses the flags and wants from min to max positional arguments, named by
// usage ("": none, and an argument is unexpected); not ok, code is the exit status of a
// help request or a usage error.
func parseArgs(p Process, fs *flag.FlagSet, args []string, usage string, min, max int) (pos []string, code int, ok bool) {
	pos, err := parse(fs, args)
	switch {
	case errors.Is(err, flag.ErrHelp):
		return nil, ExitOK, false
	case err != nil:
		return nil, ExitUsage, false
	case usage == "" && len(pos) > 0:
		return nil, p.usageError(fs, "unexpected argument %q", pos[0]), false
	case len(pos) < min || len(pos) > max:
		return nil, p.usageError(fs, "want %s, got %d argument(s)", usage, len(pos)), false
	}
	return pos, 0, true
}

// parse parses flags that may come before, between or after the positional arguments
// ("--" ends the flags) and returns the positional ones.
func parse(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		before := len(args)
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		rest := fs.Args()
		if consumed := before - len(rest); consumed > 0 && args[consumed-1] == "--" {
			return append(pos, rest...), nil
		}
		if len(rest) == 0 {
			return pos, nil
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
}

// common are the flags every chain command shares, with cnitool's variables as defaults.
type common struct {
	confDir, cniPath, cacheDir string
	timeout                    time.Duration
	verbose                    bool
}

func (c *common) register(fs *flag.FlagSet, p Process) {
	fs.StringVar(&c.confDir, "conf-dir", p.envOr("NETCONFPATH", chain.DefaultConfDir), "network config dir (env NETCONFPATH)")
	fs.StringVar(&c.cniPath, "cni-path", p.envOr("CNI_PATH", DefaultPluginPath), "plugin search path, ':'-separated (env CNI_PATH)")
	fs.StringVar(&c.cacheDir, "cache-dir", p.envOr("CNI_CACHE_DIR", chain.DefaultCacheDir), "result cache dir (env CNI_CACHE_DIR)")
	fs.DurationVar(&c.timeout, "timeout", 0, "give up (and kill exec'd plugins) after this long; 0 means never")
	fs.BoolVar(&c.verbose, "verbose", false, "print the operation's trace id on stderr (see `cni log --trace`)")
}

// traced starts the operation's trace (TRACEPARENT's when the environment has one, else
// a new one), which every plugin of it runs under, and prints its id with --verbose.
func (c *common) traced(ctx context.Context, p Process, cmd string) context.Context {
	ctx, span := tracectx.Ensure(ctx, p.Env)
	if c.verbose {
		fmt.Fprintf(p.Stderr, "cni %s: trace %s\n", cmd, span.TraceID)
	}
	return ctx
}

func (c *common) runner(p Process) *chain.Runner {
	return &chain.Runner{
		Builtin:    p.Builtin,
		PluginPath: filepath.SplitList(c.cniPath),
		CacheDir:   c.cacheDir,
		Env:        p.Env,
		Stderr:     p.Stderr,
		Timeout:    c.timeout,
	}
}

// attachmentFlags are the per-container flags of add, check and del.
type attachmentFlags struct {
	ifName, containerID, capArgs, cniArgs string
}

func (a *attachmentFlags) register(fs *flag.FlagSet, p Process) {
	fs.StringVar(&a.ifName, "ifname", p.envOr("CNI_IFNAME", "eth0"), "interface name in the container (env CNI_IFNAME)")
	fs.StringVar(&a.ifName, "i", p.envOr("CNI_IFNAME", "eth0"), "short for -ifname, as cnitool has it")
	fs.StringVar(&a.containerID, "container-id", "", "container id (default: cnitool's, derived from the netns path)")
	fs.StringVar(&a.capArgs, "cap-args", p.envOr("CAP_ARGS", ""), "capability args as a JSON object (env CAP_ARGS)")
	fs.StringVar(&a.cniArgs, "cni-args", p.envOr("CNI_ARGS", ""), "CNI_ARGS as K=V;K2=V2 (env CNI_ARGS)")
}

// attachment builds the runner's attachment as cnitool does: the netns made absolute
// and, unless given, the container id "cnitool-" + hex of the first 10 bytes of
// SHA-512 of that path.
func (a *attachmentFlags) attachment(netns string) (chain.Attachment, error) {
	att := chain.Attachment{IfName: a.ifName}
	if netns != "" {
		abs, err := filepath.Abs(netns)
		if err != nil {
			return att, fmt.Errorf("netns %q: %w", netns, err)
		}
		att.Netns = abs
	}
	att.ContainerID = cmp.Or(a.containerID, ContainerID(att.Netns))
	if a.capArgs != "" {
		if err := json.Unmarshal([]byte(a.capArgs), &att.CapabilityArgs); err != nil {
			return att, fmt.Errorf("capability args (CAP_ARGS): must be a JSON object: %w", err)
		}
	}
	args, err := ParseCNIArgs(a.cniArgs)
	if err != nil {
		return att, err
	}
	att.Args = args
	return att, nil
}

// ContainerID is cnitool's container id for a netns path.
func ContainerID(netns string) string {
	sum := sha512.Sum512([]byte(netns))
	return "cnitool-" + hex.EncodeToString(sum[:10])
}

// ParseCNIArgs splits K=V;K2=V2 the way cnitool does: every pair needs a non-empty key
// and value.
func ParseCNIArgs(s string) ([][2]string, error) {
	if s == "" {
		return nil, nil
	}
	var out [][2]string
	for _, pair := range strings.Split(s, ";") {
		kv := strings.Split(pair, "=")
		if len(kv) != 2 || kv[0] == "" || kv[1] == "" {
			return nil, fmt.Errorf("invalid CNI_ARGS pair %q", pair)
		}
		out = append(out, [2]string{kv[0], kv[1]})
	}
	return out, nil
}

// validFlag collects --valid CONTAINERID:IFNAME for gc; nil when none was given.
type validFlag []skel.Attachment

func (v *validFlag) String() string { return "" }

func (v *validFlag) Set(s string) error {
	cid, ifname, ok := strings.Cut(s, ":")
	if !ok || cid == "" || ifname == "" {
		return errors.New("want CONTAINERID:IFNAME")
	}
	*v = append(*v, skel.Attachment{ContainerID: cid, IfName: ifname})
	return nil
}

func newFlagSet(p Process, name, usage string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(p.Stderr)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: cni %s %s\n\nFlags (before or after the arguments):\n", name, usage)
		fs.PrintDefaults()
		fmt.Fprintln(fs.Output(), "\nExit status: 0 success, 1 plugin, CNI or config error, 2 usage error.")
	}
	return fs
}

// runChain returns the runner of add, check, del, gc or status.
func runChain(cmd string) func(Process, []string) int {
	return func(p Process, args []string) int {
		usage, need := "NETWORK NETNS [flags]", 2
		if cmd == "gc" || cmd == "status" {
			usage, need = "NETWORK [NETNS] [flags]", 1
		}
		fs := newFlagSet(p, cmd, usage)
		var c common
		var a attachmentFlags
		var valid validFlag
		c.register(fs, p)
		switch cmd {
		case "gc":
			fs.Var(&valid, "valid", "CONTAINERID:IFNAME still in use, repeatable (default: every cached attachment is stale)")
		case "add", "check", "del":
			a.register(fs, p)
		}
		pos, code, ok := parseArgs(p, fs, args, usage, need, 2)
		if !ok {
			return code
		}
		net, err := chain.Load(c.confDir, pos[0])
		if err != nil {
			return p.fail(cmd, err)
		}
		for _, f := range net.Shadowed {
			fmt.Fprintf(p.Stderr, "cni %s: warning: %s also defines network %q; %s comes first and is used, as runtimes use it\n",
				cmd, f, net.Name, net.File)
		}
		r := c.runner(p)
		ctx := c.traced(context.Background(), p, cmd)
		switch cmd {
		case "gc":
			var gc *chain.GCArgs
			if valid != nil {
				gc = &chain.GCArgs{ValidAttachments: valid}
			}
			err = r.GC(ctx, net, gc)
		case "status":
			err = r.Status(ctx, net)
		default:
			err = runAttachment(ctx, p, r, cmd, net, &a, pos[1])
		}
		if err != nil {
			return p.fail(cmd, err)
		}
		return ExitOK
	}
}

func runAttachment(ctx context.Context, p Process, r *chain.Runner, cmd string, net *chain.Network, a *attachmentFlags, netns string) error {
	att, err := a.attachment(netns)
	if err != nil {
		return err
	}
	switch cmd {
	case "add":
		res, err := r.Add(ctx, net, att)
		if err != nil {
			return err
		}
		return res.Print(p.Stdout)
	case "check":
		if err := requireCached(r, net, att); err != nil {
			return err
		}
		return r.Check(ctx, net, att)
	default:
		return r.Del(ctx, net, att)
	}
}

// requireCached refuses a CHECK of an attachment with nothing in the result cache: one
// never added, or deleted since. libcni (and so the runner, for runtimes) sends such a
// CHECK without prevResult, and the plugins' answers then speak of what they find
// ("loopback interface is down"), never of the missing attachment a person asked about.
func requireCached(r *chain.Runner, net *chain.Network, att chain.Attachment) error {
	if net.DisableCheck || !version.AtLeast(net.CNIVersion, "0.4.0") {
		return nil // the runner answers these without looking at the cache
	}
	prev, err := r.CachedResult(net, att)
	if err != nil || prev != nil {
		return err
	}
	return cnierror.Newf(cnierror.CodeUnknownContainer,
		"no attachment of network %q for container %s, interface %s: nothing in the result cache (never added, or deleted since)",
		net.Name, att.ContainerID, att.IfName)
}
