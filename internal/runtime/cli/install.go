package cli

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/cnikit/cni/internal/chain"
	"github.com/cnikit/cni/internal/runtime/install"
)

// selfExe is the running binary. Opened through /proc it is the inode this process
// runs, even when an upgrade has already replaced the file it was started from.
const selfExe = "/proc/self/exe"

// confFlag collects repeated --conf FILE.
type confFlag []string

func (c *confFlag) String() string { return strings.Join(*c, ",") }

func (c *confFlag) Set(s string) error {
	if s == "" {
		return errors.New("empty file name")
	}
	*c = append(*c, s)
	return nil
}

// runInstall installs this binary and its plugin names into a plugin directory, taking
// over the reference plugins' names (their files kept for --uninstall), then the given
// configs into the config directory (see internal/runtime/install).
func runInstall(p Process, args []string) int {
	fs := newFlagSet(p, "install", "[flags]")
	dir := fs.String("dir", DefaultPluginPath, "plugin directory")
	mode := fs.String("mode", string(install.Symlink), "how plugin names refer to cni: symlink (relative), hardlink or copy")
	var confs confFlag
	fs.Var(&confs, "conf", "network config to write into --conf-dir after the binaries (repeatable)")
	var oneExec confFlag
	fs.Var(&oneExec, "one-exec", "network config list to write into --conf-dir as one chain plugin holding its plugins, "+
		"so that the runtime starts one process per pod (repeatable; every plugin must be built in)")
	confDir := fs.String("conf-dir", chain.DefaultConfDir, "network config directory")
	only := fs.String("only", "", "handle only these plugin names (comma-separated)")
	skip := fs.String("skip", "", "leave these plugin names alone (comma-separated)")
	uninstall := fs.Bool("uninstall", false, "remove the configs and entries cni installed, put back the files it replaced, "+
		"then remove cni; foreign files stay")
	dryRun := fs.Bool("dry-run", false, "print what would be done, change nothing")
	force := fs.Bool("force", false, "replace files not installed by cni at any plugin name, not only the reference plugins' "+
		"(kept in DIR/"+install.KeptDir+" for --uninstall all the same), and configs cni install did not write")
	if code, ok := parseNoArgs(p, fs, args); !ok {
		return code
	}
	m, err := install.ParseMode(*mode)
	if err != nil {
		return p.usageError(fs, "%v", err)
	}
	names, err := selectNames(p, p.Plugins, *only, *skip)
	if err != nil {
		return p.usageError(fs, "%v", err)
	}
	o := install.Options{
		Dir: *dir, Source: selfExe, Names: names, AllNames: p.Plugins, Mode: m,
		Confs: confs, OneExec: oneExec, ConfDir: *confDir, DryRun: *dryRun, Force: *force, Out: p.Stdout,
	}
	run := install.Install
	if *uninstall {
		run = install.Uninstall
	}
	if err := run(o); err != nil {
		return p.fail("install", err)
	}
	return ExitOK
}

// selectNames applies --only and --skip to the registry's names. An unknown name in
// --only is an error (a typo must not install nothing); in --skip only a warning.
func selectNames(p Process, all []string, only, skip string) ([]string, error) {
	onlyNames, skipNames := splitNames(only), splitNames(skip)
	for _, n := range onlyNames {
		if !slices.Contains(all, n) {
			return nil, fmt.Errorf("unknown plugin name in --only: %s", n)
		}
	}
	for _, n := range skipNames {
		if !slices.Contains(all, n) {
			fmt.Fprintf(p.Stderr, "cni install: warning: --skip %s: no such plugin name\n", n)
		}
	}
	var out []string
	for _, n := range all {
		if len(onlyNames) > 0 && !slices.Contains(onlyNames, n) || slices.Contains(skipNames, n) {
			continue
		}
		out = append(out, n)
	}
	return out, nil
}

func splitNames(s string) []string {
	var out []string
	for _, n := range strings.Split(s, ",") {
		if n = strings.TrimSpace(n); n != "" {
			out = append(out, n)
		}
	}
	return out
}
