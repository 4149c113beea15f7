package install

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// KeptDir is the directory inside the plugin directory that holds, under their own
// names, the foreign entries Install replaced (the reference plugins of a kubeadm node),
// for Uninstall to put back. Runtimes look a plugin up by its exact name in the plugin
// directory and never inside a hidden directory, so nothing there is ever run. Being
// inside the plugin directory it is on the same filesystem: a kept file is a second
// name of the original's inode, and putting it back is one rename.
const KeptDir = ".cni-replaced"

func (r *run) keptDir() string       { return filepath.Join(r.Dir, KeptDir) }
func (r *run) kept(n string) string  { return filepath.Join(r.keptDir(), n) }
func (r *run) entry(n string) string { return filepath.Join(r.Dir, n) }

func isSymlink(fi fs.FileInfo) bool { return fi.Mode()&fs.ModeSymlink != 0 }

// lstat is os.Lstat with a missing entry as nil and no error.
func lstat(p string) (fs.FileInfo, error) {
	fi, err := os.Lstat(p)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	return fi, err
}

// checkKeptDir refuses, before anything changes, a KeptDir that is not a directory (a
// symlink would send the kept files elsewhere) and a kept name that is a directory.
func (r *run) checkKeptDir() error {
	if len(r.keep) == 0 {
		return nil
	}
	fi, err := lstat(r.keptDir())
	if fi == nil {
		return err
	}
	if !fi.IsDir() {
		return fmt.Errorf("refusing to keep replaced files in %s: it is not a directory", r.keptDir())
	}
	var errs []error
	for _, n := range r.Names {
		if !r.keep[n] {
			continue
		}
		fi, err := lstat(r.kept(n))
		switch {
		case err != nil:
			errs = append(errs, err)
		case fi != nil && fi.IsDir():
			errs = append(errs, fmt.Errorf("refusing to keep %s as %s: that is a directory", r.entry(n), r.kept(n)))
		}
	}
	return errors.Join(errs...)
}

// keepOriginal puts a second name of the foreign entry at Dir/n into KeptDir, flushed,
// before ours is renamed over Dir/n: at every moment Dir/n holds the original or ours,
// and the original has a name. A regular file is hardlinked (a plugin running it keeps
// running it, and Uninstall's rename gives back that very inode); a symlink is
// recreated with its target. An original kept by an earlier run gives way to a newer
// foreign entry (the kubernetes-cni package reinstalled over ours), so that Uninstall
// puts back what was there last.
func (r *run) keepOriginal(n string) error {
	p, k := r.entry(n), r.kept(n)
	same, err := sameEntry(p, k)
	if err != nil {
		return err
	}
	old, err := lstat(k)
	if err != nil {
		return err
	}
	older := ""
	if old != nil && !same {
		older = ", in place of the older file kept there"
	}
	r.say("replace %s (kept as %s for --uninstall%s)", p, k, older)
	if r.DryRun || same {
		// Kept already by a run interrupted before it replaced the entry.
		return nil
	}
	if err := r.makeKeptDir(); err != nil {
		return fmt.Errorf("keep %s: %w", p, err)
	}
	if err := secondName(p, k); err != nil {
		return fmt.Errorf("keep %s as %s: %w", p, k, err)
	}
	return syncDir(r.keptDir())
}

// makeKeptDir creates KeptDir unless it is there, flushing its new name in Dir.
func (r *run) makeKeptDir() error {
	err := os.Mkdir(r.keptDir(), 0o755)
	if errors.Is(err, fs.ErrExist) {
		return nil
	}
	if err != nil {
		return err
	}
	return syncDir(r.Dir)
}

// secondName makes final another name of the entry at p, atomically replacing what
// final held: a hardlink, or for a symlink a new one with the same target.
func secondName(p, final string) error {
	fi, err := os.Lstat(p)
	if err != nil {
		return err
	}
	if !isSymlink(fi) {
		return hardlink(p, final)
	}
	target, err := os.Readlink(p)
	if err != nil {
		return err
	}
	return symlink(target, final)
}

// sameEntry tells whether a and b are one entry: one inode, or two symlinks to one
// target. A missing one is never the same.
func sameEntry(a, b string) (bool, error) {
	fa, err := lstat(a)
	if fa == nil {
		return false, err
	}
	fb, err := lstat(b)
	if fb == nil {
		return false, err
	}
	if !isSymlink(fa) || !isSymlink(fb) {
		return os.SameFile(fa, fb), nil
	}
	ta, err := os.Readlink(a)
	if err != nil {
		return false, err
	}
	tb, err := os.Readlink(b)
	return err == nil && ta == tb, err
}

// restoreOriginal puts the entry kept for Dir/n back over Dir/n, in one rename, when
// Dir/n is ours or gone. A foreign entry someone put at Dir/n since stays, and so does
// the kept one, for the operator to choose; an entry that is the kept one already (a
// run interrupted after keeping it) only loses its second name.
func (r *run) restoreOriginal(n string) error {
	p, k := r.entry(n), r.kept(n)
	same, err := sameEntry(p, k)
	if err != nil {
		return err
	}
	if same {
		r.given[n] = true
		return r.act(func() error { return os.Remove(k) }, "remove %s (the same file is at %s)", k, p)
	}
	fi, err := lstat(p)
	if err != nil {
		return err
	}
	if fi != nil {
		ours, err := r.isOurs(p)
		if err != nil {
			return err
		}
		if !ours {
			r.note("keep %s (not installed by cni); the file cni replaced there stays in %s", p, k)
			return nil
		}
	}
	r.given[n] = true
	return r.act(func() error { return wrap("restore "+p, os.Rename(k, p)) }, "restore %s (from %s)", p, k)
}

// removeKeptDir removes KeptDir once it holds no kept entry but those this run gave
// back. Its entries with a temporary name were left by a run interrupted while keeping
// a file (enter removed them already but under DryRun): the file such a name holds is
// also at its own name.
func (r *run) removeKeptDir() error {
	des, err := os.ReadDir(r.keptDir())
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	var left, temps []string
	for _, de := range des {
		switch n := de.Name(); {
		case isTempName(n):
			temps = append(temps, n)
		case !r.given[n]:
			left = append(left, n)
		}
	}
	if len(left) > 0 {
		r.note("keep %s (still holds: %v)", r.keptDir(), left)
		return nil
	}
	return r.act(func() error {
		for _, t := range temps {
			if err := os.Remove(filepath.Join(r.keptDir(), t)); err != nil {
				return err
			}
		}
		return os.Remove(r.keptDir())
	}, "remove directory %s", r.keptDir())
}
