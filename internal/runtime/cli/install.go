package cli

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
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

// runInstall installs this binary (or --binary) and its plugin names into a plugin
// directory, taking over the reference plugins' names (their files kept for
// --uninstall), then the given configs into the config directory (see
// internal/runtime/install).
func runInstall(p Process, args []string) int {
	fs := newFlagSet(p, "install", "[flags]")
	o := install.Options{AllNames: p.Plugins, Out: p.Stdout}
	fs.StringVar(&o.Dir, "dir", DefaultPluginPath, "plugin directory")
	fs.StringVar(&o.Source, "binary", selfExe, "the cni binary to install: this one, or another build (see --list-file)")
	mode := fs.String("mode", string(install.Symlink), "how plugin names refer to cni: symlink (relative), hardlink or copy")
	fs.Var((*confFlag)(&o.Confs), "conf", "network config to write into --conf-dir after the binaries (repeatable)")
	fs.Var((*confFlag)(&o.OneExec), "one-exec", "network config list to write into --conf-dir as one chain plugin holding its plugins, "+
		"so that the runtime starts one process per pod (repeatable; every plugin must be built in)")
	fs.StringVar(&o.ConfDir, "conf-dir", chain.DefaultConfDir, "network config directory (empty: leave the configs alone)")
	only := fs.String("only", "", "handle only these plugin names (comma-separated)")
	skip := fs.String("skip", "", "leave these plugin names alone (comma-separated)")
	listFile := fs.String("list-file", "", "plugin names, one per line (# comments), instead of this binary's: "+
		"for a --binary that cannot run here (another architecture's); implies --no-verify")
	destdir := fs.String("destdir", "", "staging root (a package's or image's) prefixed once to --dir and --conf-dir; "+
		"a symlink to cni by the path without it counts as ours")
	uninstall := fs.Bool("uninstall", false, "remove the configs and entries cni installed, put back the files it replaced, "+
		"then remove cni; foreign files stay")
	fs.BoolVar(&o.DryRun, "dry-run", false, "print what would be done, change nothing")
	fs.BoolVar(&o.Force, "force", false, "replace files not installed by cni at any plugin name, not only the reference plugins' "+
		"(kept in DIR/"+install.KeptDir+" for --uninstall all the same), and configs cni install did not write")
	fs.BoolVar(&o.NoVerify, "no-verify", false, "do not ask each installed name for CNI_COMMAND=VERSION")
	if _, code, ok := parseArgs(p, fs, args, "", 0, 0); !ok {
		return code
	}
	var err error
	if o.Mode, err = install.ParseMode(*mode); err != nil {
		return p.usageError(fs, "%v", err)
	}
	if o.AllNames, err = listedNames(o.AllNames, *listFile); err != nil {
		return p.fail("install", err)
	}
	if o.Names, err = selectNames(p, o.AllNames, *only, *skip); err != nil {
		return p.usageError(fs, "%v", err)
	}
	o.NoVerify = o.NoVerify || *listFile != ""
	// A staging root prefixes absolute paths only: a relative one would be glued to it
	// ("/stage" + "bin") and name neither the staged nor the final directory.
	if *destdir != "" && (!filepath.IsAbs(o.Dir) || o.ConfDir != "" && !filepath.IsAbs(o.ConfDir)) {
		return p.usageError(fs, "--destdir needs an absolute --dir and --conf-dir")
	}
	o.Dir, o.FinalDir = install.Staged(*destdir, o.Dir)
	if o.ConfDir != "" {
		o.ConfDir, _ = install.Staged(*destdir, o.ConfDir)
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

// listedNames are the names of listFile, when given, else those of the registry.
func listedNames(registry []string, listFile string) ([]string, error) {
	if listFile == "" {
		return registry, nil
	}
	data, err := os.ReadFile(listFile)
	if err != nil {
		return nil, fmt.Errorf("--list-file: %w", err)
	}
	names, err := install.ParseNames(data)
	if err != nil {
		return nil, fmt.Errorf("--list-file %s: %w", listFile, err)
	}
	return names, nil
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
	return slices.DeleteFunc(slices.Clone(all), func(n string) bool {
		return len(onlyNames) > 0 && !slices.Contains(onlyNames, n) || slices.Contains(skipNames, n)
	}), nil
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
