// Package dispatch is the multi-call entry point: it picks a built-in plugin by the name
// the binary was executed under, or, invoked as `cni`, runs one of the toolkit's own
// subcommands. It is the only code main hands the process to.
package dispatch

import (
	"fmt"
	"io"
	"path/filepath"
	"runtime"
	"slices"
	"strings"

	"github.com/cnikit/cni/internal/core/build"
	"github.com/cnikit/cni/internal/core/cnierror"
	"github.com/cnikit/cni/internal/core/version"
	"github.com/cnikit/cni/internal/plugins/tap"
	"github.com/cnikit/cni/internal/runtime/cli"
	"github.com/cnikit/cni/internal/spec/skel"
)

// Process is what main hands over: arguments, environment and standard streams.
type Process struct {
	Args   []string
	Env    []string
	Stdin  io.Reader
	Stdout io.Writer
	Stderr io.Writer
}

// Main runs the process and returns its exit status.
func Main(p Process) int {
	name := "cni"
	if len(p.Args) > 0 {
		name = strings.TrimSuffix(filepath.Base(p.Args[0]), ".exe")
	}
	args := p.Args[min(1, len(p.Args)):]
	if plugin := lookupApplet(name); plugin != nil {
		return runPlugin(p, plugin, args)
	}
	// The tap plugin execs this binary under that name to create a tap under an
	// SELinux label; it is no plugin, and not listed.
	if name == tap.CreatorName {
		return tap.RunCreator(args, p.Stderr)
	}
	// Under any other name (a renamed or versioned copy such as cni-v1.2) the binary still
	// answers its own subcommands, but a runtime's call is never mistaken for one.
	if name != "cni" && (len(args) == 0 || hasCNICommand(p.Env)) {
		return unknownName(p, name)
	}
	return runCommand(p, args)
}

// runPlugin runs a plugin, or one of its own subcommands when the first argument names
// one (`dhcp daemon`, `cni dhcp daemon`) and no CNI_COMMAND says a runtime is calling.
func runPlugin(p Process, plugin *skel.Plugin, args []string) int {
	if len(args) > 0 && !hasCNICommand(p.Env) {
		if sub := plugin.Subcommands[args[0]]; sub != nil {
			return sub(args[1:], p.Env, p.Stdout, p.Stderr)
		}
	}
	return skel.Run(plugin, p.Env, p.Stdin, p.Stdout, p.Stderr)
}

// lookupApplet finds the plugin for an executable name. Renamed links such as
// "buildkit-cni-bridge" are accepted by dropping dash-separated prefixes.
func lookupApplet(name string) *skel.Plugin {
	for {
		if p := Lookup(name); p != nil {
			return p
		}
		_, rest, ok := strings.Cut(name, "-")
		if !ok || rest == "" {
			return nil
		}
		name = rest
	}
}

// unknownName answers an executable name that is no plugin: a runtime (CNI_COMMAND set)
// gets a CNI error and a failure, never a banner and success.
func unknownName(p Process, name string) int {
	if hasCNICommand(p.Env) {
		e := cnierror.Newf(cnierror.CodeInvalidEnv, "unknown plugin %q: this cni binary has no plugin of that name", name).
			WithDetails("known plugins: " + strings.Join(Names(), ", "))
		fmt.Fprintln(p.Stdout, string(e.JSON()))
		return 1
	}
	fmt.Fprintf(p.Stderr, "cni: no plugin named %q\n\n", name)
	writeHelp(p.Stderr)
	return 1
}

func runCommand(p Process, args []string) int {
	if len(args) == 0 {
		if hasCNICommand(p.Env) {
			return unknownName(p, "cni")
		}
		writeHelp(p.Stderr)
		return 2
	}
	switch args[0] {
	case "--list", "list":
		fmt.Fprintln(p.Stdout, strings.Join(Names(), "\n"))
		return 0
	case "version", "--version", "-v":
		writeVersion(p.Stdout)
		return 0
	case "help", "--help", "-h":
		writeHelp(p.Stdout)
		return 0
	}
	if plugin := Lookup(args[0]); plugin != nil {
		return runPlugin(p, plugin, args[1:])
	}
	for _, c := range cli.Commands() {
		if c.Name == args[0] {
			// With this binary's registry, so that built-in plugin types run in-process.
			return c.Run(cli.Process{
				Env: p.Env, Stdin: p.Stdin, Stdout: p.Stdout, Stderr: p.Stderr, Builtin: Lookup, Plugins: Names(),
			}, args[1:])
		}
	}
	if hasCNICommand(p.Env) {
		return unknownName(p, args[0])
	}
	fmt.Fprintf(p.Stderr, "cni: unknown command or plugin %q\n\n", args[0])
	writeHelp(p.Stderr)
	return 2
}

// Names are the registry's plugin names, in the order `cni --list` prints them, without
// building a plugin.
func Names() []string {
	table := builtins()
	out := make([]string, len(table))
	for i, b := range table {
		out[i] = b.name
	}
	return out
}

func hasCNICommand(env []string) bool {
	return slices.ContainsFunc(env, func(kv string) bool {
		v, ok := strings.CutPrefix(kv, "CNI_COMMAND=")
		return ok && v != ""
	})
}

func writeVersion(w io.Writer) {
	fmt.Fprintf(w, "cni %s (commit %s)\n", build.Version, build.Commit)
	fmt.Fprintf(w, "go: %s %s/%s\n", runtime.Version(), runtime.GOOS, runtime.GOARCH)
	fmt.Fprintf(w, "CNI spec versions: %s\n", strings.Join(version.All(), ", "))
}

func writeHelp(w io.Writer) {
	fmt.Fprint(w, `cni: a CNI plugin toolkit in one binary.

Run as a plugin: link this binary under a plugin's name ("cni install --dir /opt/cni/bin"
does it, as does scripts/install-symlinks.sh), or run "cni PLUGIN" with the CNI_*
environment and the config on stdin.

Usage:
  cni PLUGIN             run a built-in plugin (as if exec'd under its name)
  cni --list             print the built-in plugin names, one per line
  cni version            print build version, commit, Go version and CNI versions
  cni help               print this help
`)
	for _, c := range cli.Commands() {
		fmt.Fprintf(w, "  cni %-18s  %s\n", c.Name, c.Summary)
	}
	fmt.Fprintln(w, "\nPlugins:")
	for _, p := range Registry() {
		fmt.Fprintf(w, "  %-12s  %s\n", p.Name, p.About)
	}
}
