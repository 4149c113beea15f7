// Package install puts the running cni binary into a CNI plugin directory, gives every
// plugin of the registry its own name there, and then writes network configurations
// into the config directory: what a shell-less image (a DaemonSet's init container)
// needs to install itself on a node. scripts/install-symlinks.sh (make install) is a
// wrapper of `cni install`, which also installs another build (Source) into a staging
// root (Staged), with names from a list (ParseNames) for a build that cannot run here.
//
// Runtimes exec plugins at any moment and CRI-O uses a config as soon as it appears, so
// every entry is written under a hidden temporary name in its own directory, flushed
// and renamed over its final name, and every binary is in place (and answers VERSION)
// before the first config is written. Files other vendors own are left alone, but for
// the reference plugins' (ReferenceNames) and under Force: those are kept in KeptDir
// and put back by Uninstall.
package install

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/cnikit/cni/internal/chain"
	"github.com/cnikit/cni/internal/core/statedir"
	"github.com/cnikit/cni/internal/spec/invoke"
)

// Binary is the name of the multi-call binary in the plugin directory.
const Binary = "cni"

// verifyTimeout bounds one VERSION call: a plugin that hangs must fail the install,
// not stall it.
const verifyTimeout = 30 * time.Second

// Mode is how a plugin name refers to the binary.
type Mode string

// The modes of install-symlinks.sh.
const (
	Symlink  Mode = "symlink"  // a relative symlink to cni
	Hardlink Mode = "hardlink" // another name of cni's inode
	Copy     Mode = "copy"     // a copy of cni
)

// ParseMode reads a --mode value.
func ParseMode(s string) (Mode, error) {
	switch m := Mode(s); m {
	case Symlink, Hardlink, Copy:
		return m, nil
	}
	return "", fmt.Errorf("--mode must be symlink, hardlink or copy, not %q", s)
}

// Options is one install or uninstall run.
type Options struct {
	Dir string // the plugin directory, e.g. /opt/cni/bin
	// FinalDir is Dir as the runtime will see it, when Dir is under a staging root
	// (Staged): an absolute symlink to FinalDir/cni is ours too. Empty means Dir.
	FinalDir string
	Source   string   // the executable to install, e.g. /proc/self/exe
	Names    []string // the plugin names to handle (after --only and --skip)
	AllNames []string // every plugin name; uninstall keeps cni while unselected ones use it
	Mode     Mode
	Confs    []string // config files to write into ConfDir, in order
	// OneExec are config lists written into ConfDir after Confs, each rewritten as one
	// chain plugin holding its plugins (chain.WrapList), so that a runtime starts one
	// process per pod and operation. Each plugin must be one of AllNames.
	OneExec []string
	ConfDir string
	DryRun  bool // say what would be done, change nothing
	// NoVerify skips asking each installed name for VERSION: for a Source that cannot
	// run here (a build for another architecture).
	NoVerify bool
	// Force replaces a foreign entry at any name, not only at ReferenceNames (kept in
	// KeptDir all the same), and a config cni install did not write.
	Force bool
	Out   io.Writer
}

// run holds one run's options and what it did.
type run struct {
	Options
	changes int
	// keep names the entries of Names that are not ours and that this run replaces,
	// keeping each in KeptDir; decided before anything changes.
	keep map[string]bool
	// given names the entries of KeptDir that this uninstall put back or removed (or
	// would, under DryRun).
	given map[string]bool
	// locked holds the directories this run entered (enter), locked until release.
	locked []*statedir.Dir
}

// say prints one action; under DryRun it says what would happen.
func (r *run) say(format string, a ...any) {
	if r.DryRun {
		format = "would " + format
	}
	fmt.Fprintf(r.Out, format+"\n", a...)
	r.changes++
}

// act says one action and, unless DryRun, does it.
func (r *run) act(do func() error, format string, a ...any) error {
	r.say(format, a...)
	if r.DryRun {
		return nil
	}
	return do()
}

// wrap puts what was being done in front of err, as fmt.Errorf("%s: %w") does; no error
// stays none.
func wrap(what string, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("%s: %w", what, err)
}

func (r *run) note(format string, a ...any) {
	fmt.Fprintf(r.Out, format+"\n", a...)
}

func (r *run) target() string { return filepath.Join(r.Dir, Binary) }

// makeDir creates dir, and its parents, unless it is there.
func (r *run) makeDir(dir string) error {
	if _, err := os.Stat(dir); !errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	return r.act(func() error { return os.MkdirAll(dir, 0o755) }, "create directory %s", dir)
}

// remove removes the file at p.
func (r *run) remove(p string) error {
	return r.act(func() error { return os.Remove(p) }, "remove %s", p)
}

// Install puts Source at Dir/cni, one entry per name beside it, verifies that each
// answers VERSION, then writes the configs. A foreign entry at one of ReferenceNames
// (at any name under Force) is kept in KeptDir before ours replaces it. Nothing changes
// when a name or config would replace any other file that is not ours (without Force)
// or a config is invalid.
func Install(o Options) error {
	r := &run{Options: o}
	if err := r.validate(); err != nil {
		return err
	}
	if fi, err := os.Stat(r.Source); errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("binary %s not found", r.Source)
	} else if err != nil {
		return fmt.Errorf("binary: %w", err)
	} else if !fi.Mode().IsRegular() {
		return fmt.Errorf("binary %s is not a regular file", r.Source)
	}
	defer r.release()
	confs, err := readConfs(r.Confs, r.OneExec, r.AllNames)
	if err != nil {
		return err
	}
	if err := r.checkChainPlugin(); err != nil {
		return err
	}
	if err := r.enter(r.Dir); err != nil {
		return err
	}
	if err := r.checkForeign(); err != nil {
		return err
	}
	plan, err := r.planConfs(confs)
	if err != nil {
		return err
	}
	if err := r.installBinaries(); err != nil {
		return err
	}
	if err := r.writeConfs(plan); err != nil {
		return err
	}
	r.summary()
	return nil
}

// checkChainPlugin refuses OneExec when the one plugin its configs name, chain, would
// not be in Dir: left out of Names (--only, --skip) and not there from an earlier run.
// The runtime would fail every pod on the network with "failed to find plugin".
func (r *run) checkChainPlugin() error {
	if len(r.OneExec) == 0 || slices.Contains(r.Names, chain.PluginName) {
		return nil
	}
	if _, err := os.Lstat(filepath.Join(r.Dir, chain.PluginName)); err == nil {
		return nil
	}
	return fmt.Errorf("--one-exec writes configs whose only plugin is %q, which this run leaves out of %s "+
		"(--only, --skip) and which is not there: add it to --only or take it out of --skip", chain.PluginName, r.Dir)
}

func (r *run) validate() error {
	if r.Dir == "" {
		return errors.New("--dir must not be empty")
	}
	if _, err := ParseMode(string(r.Mode)); err != nil {
		return err
	}
	for _, n := range r.Names {
		if err := ValidName(n); err != nil {
			return err
		}
	}
	if len(r.Confs)+len(r.OneExec) > 0 && r.ConfDir == "" {
		return errors.New("--conf-dir must not be empty")
	}
	return nil
}

// ValidName rejects a plugin name that could escape the directory, hide as a dotfile
// or take the binary's own name.
func ValidName(n string) error {
	if n == "" || n == Binary || strings.HasPrefix(n, ".") || strings.Trim(n, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-") != "" {
		return fmt.Errorf("invalid plugin name %q", n)
	}
	return nil
}

// ParseNames reads a list of plugin names, one a line or separated by blanks, as
// `cni --list` prints them; blank lines and #-comments are allowed, a repeated name
// counts once.
func ParseNames(data []byte) ([]string, error) {
	var out []string
	for _, line := range strings.Split(string(data), "\n") {
		line, _, _ = strings.Cut(line, "#")
		for _, n := range strings.Fields(line) {
			if err := ValidName(n); err != nil {
				return nil, err
			}
			if !slices.Contains(out, n) {
				out = append(out, n)
			}
		}
	}
	if len(out) == 0 {
		return nil, errors.New("no plugin names found")
	}
	return out, nil
}

// Staged splits dir into the path to write to, under destdir (the staging root of a
// package or an image), and the path the runtime will see. A dir under destdir already
// is not prefixed twice: `make install DESTDIR=x` both exports DESTDIR and may pass
// --dir x/opt/cni/bin.
func Staged(destdir, dir string) (write, final string) {
	destdir = strings.TrimSuffix(destdir, "/")
	if rest, ok := strings.CutPrefix(dir, destdir+"/"); ok && destdir != "" {
		return dir, "/" + rest
	}
	return destdir + dir, dir
}

func (r *run) summary() {
	switch {
	case r.changes == 0:
		r.note("nothing to do: %s is up to date", r.Dir)
	case r.DryRun:
		r.note("dry run: %d change(s) not made", r.changes)
	default:
		r.note("done: %d change(s)", r.changes)
	}
}

// checkForeign decides, before anything changes, what becomes of each entry that is not
// ours: at one of ReferenceNames (or any name under Force) it is replaced and kept for
// Uninstall; at any other name, or when it is a directory, the run is refused. It runs
// against the old Dir/cni, so that hardlinks and copies of the previous version are
// still recognised as ours during an upgrade, never kept as someone else's.
func (r *run) checkForeign() error {
	r.keep = map[string]bool{}
	var errs []error
	if fi, err := os.Lstat(r.target()); err == nil && fi.IsDir() {
		errs = append(errs, fmt.Errorf("refusing to replace %s: it is a directory", r.target()))
	}
	for _, n := range r.Names {
		p := filepath.Join(r.Dir, n)
		fi, err := os.Lstat(p)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return err
		}
		if fi.IsDir() {
			errs = append(errs, fmt.Errorf("refusing to replace %s: it is a directory", p))
			continue
		}
		ours, err := r.isOurs(p)
		if err != nil {
			return err
		}
		switch {
		case ours:
		case r.Force || slices.Contains(ReferenceNames(), n):
			r.keep[n] = true
		default:
			errs = append(errs, fmt.Errorf("refusing to replace %s: %s not installed by cni (use --force)", p, describe(p, fi)))
		}
	}
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	return r.checkKeptDir()
}

func describe(p string, fi fs.FileInfo) string {
	if isSymlink(fi) {
		target, _ := os.Readlink(p)
		return "symlink to " + target
	}
	return "file"
}

// installBinaries puts the binary and every entry in place, flushes the directory and
// asks each entry for VERSION.
func (r *run) installBinaries() error {
	if err := r.makeDir(r.Dir); err != nil {
		return err
	}
	if err := r.enter(r.Dir); err != nil {
		return err
	}
	changed, err := r.installBinary()
	if err != nil {
		return err
	}
	for _, n := range r.Names {
		if err := r.installEntry(n, changed); err != nil {
			return err
		}
	}
	if r.DryRun {
		return nil
	}
	if err := syncDir(r.Dir); err != nil {
		return err
	}
	if r.NoVerify {
		r.note("skipped verification")
		return nil
	}
	return r.verify()
}

// installBinary writes Source to Dir/cni unless it is there already. Running plugins
// keep the old inode: no "text file busy", no half-written binary.
func (r *run) installBinary() (changed bool, err error) {
	fi, err := os.Lstat(r.target())
	if err == nil && fi.Mode().IsRegular() && fi.Mode().Perm()&0o111 != 0 {
		same, err := sameContent(r.Source, r.target())
		if err != nil {
			return false, err
		}
		if same {
			r.note("unchanged %s", r.target())
			return false, nil
		}
	}
	return true, r.act(func() error { return wrap("install "+r.target(), copyFile(r.Source, r.target(), 0o755)) },
		"install %s (from %s)", r.target(), r.Source)
}

// installEntry gives the binary one plugin name.
func (r *run) installEntry(n string, binaryChanged bool) error {
	p := filepath.Join(r.Dir, n)
	ok, err := r.upToDate(p, binaryChanged)
	if err != nil {
		return err
	}
	if ok {
		r.note("unchanged %s", p)
		return nil
	}
	if r.keep[n] {
		if err := r.keepOriginal(n); err != nil {
			return err
		}
	}
	switch r.Mode {
	case Symlink:
		err = r.act(func() error { return symlink(Binary, p) }, "link %s -> %s", p, Binary)
	case Hardlink:
		err = r.act(func() error { return hardlink(r.target(), p) }, "hardlink %s => %s", p, r.target())
	case Copy:
		err = r.act(func() error { return copyFile(r.target(), p, 0o755) }, "copy %s to %s", r.target(), p)
	}
	return wrap("install "+p, err)
}

// upToDate tells whether p already is what the mode would create.
func (r *run) upToDate(p string, binaryChanged bool) (bool, error) {
	fi, err := lstat(p)
	if fi == nil {
		return false, err
	}
	switch r.Mode {
	case Symlink:
		if !isSymlink(fi) {
			return false, nil
		}
		target, err := os.Readlink(p)
		return err == nil && target == Binary, err
	case Hardlink:
		// Under DryRun a binary about to change would break every hardlink.
		if r.DryRun && binaryChanged {
			return false, nil
		}
		return fi.Mode().IsRegular() && sameInode(fi, r.target()), nil
	default:
		if !fi.Mode().IsRegular() || fi.Mode().Perm()&0o111 == 0 || sameInode(fi, r.target()) {
			return false, nil
		}
		// Under DryRun Dir/cni is still the old binary: compare with the new one.
		ref := r.target()
		if r.DryRun {
			ref = r.Source
		}
		return sameContent(p, ref)
	}
}

// verify runs every entry the way a runtime asks for VERSION.
func (r *run) verify() error {
	var errs []error
	for _, n := range r.Names {
		p := filepath.Join(r.Dir, n)
		if err := answersVersion(p); err != nil {
			errs = append(errs, fmt.Errorf("%s does not answer CNI_COMMAND=VERSION: %w", p, err))
			continue
		}
		r.note("verified %s", p)
	}
	return errors.Join(errs...)
}

// answersVersion asks p for VERSION through invoke.Exec, which retries a "text file
// busy" exec (another process may still hold a just-written binary open for writing
// across its fork) and gives the plugin an empty stdin of its own: exec would otherwise
// open /dev/null, which a scratch image run without /dev does not have.
func answersVersion(p string) error {
	ctx, cancel := context.WithTimeout(context.Background(), verifyTimeout)
	defer cancel()
	out, err := invoke.Exec(ctx, p, []string{"CNI_COMMAND=VERSION"}, nil, nil)
	if err != nil {
		return err
	}
	if !strings.Contains(string(out), `"cniVersion"`) {
		return fmt.Errorf("no cniVersion in %q", out)
	}
	return nil
}
