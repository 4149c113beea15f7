package install

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
)

// Uninstall removes the configs cni install recorded, then puts back over our entries
// of Names the files Install kept in KeptDir and removes our other entries, then
// removes KeptDir once empty and Dir/cni once nothing of ours uses it. Configs go first,
// so that a runtime never sees a config whose plugins are gone; files that are not ours
// stay.
func Uninstall(o Options) error {
	r := &run{Options: o, given: map[string]bool{}}
	if err := r.validate(); err != nil {
		return err
	}
	defer r.release()
	// The plugin directory is entered before the config directory, as Install does, so
	// that an install and an uninstall never wait for each other's second lock.
	if err := r.enter(r.Dir); err != nil {
		return err
	}
	if err := r.uninstallConfs(); err != nil {
		return err
	}
	if _, err := os.Stat(r.Dir); errors.Is(err, fs.ErrNotExist) {
		r.note("nothing to do: %s does not exist", r.Dir)
		return nil
	}
	for _, n := range r.Names {
		if err := r.uninstallEntry(n); err != nil {
			return err
		}
	}
	if err := r.removeKeptDir(); err != nil {
		return err
	}
	if err := r.removeBinary(); err != nil {
		return err
	}
	if !r.DryRun {
		if err := syncDir(r.Dir); err != nil {
			return err
		}
	}
	r.summary()
	return nil
}

// uninstallEntry puts back the file Install kept for name n, if any, else removes our
// entry at n.
func (r *run) uninstallEntry(n string) error {
	fi, err := lstat(r.kept(n))
	if err != nil {
		return err
	}
	if fi != nil {
		return r.restoreOriginal(n)
	}
	return r.removeEntry(r.entry(n))
}

func (r *run) removeEntry(p string) error {
	if _, err := os.Lstat(p); errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	ours, err := r.isOurs(p)
	if err != nil {
		return err
	}
	if !ours {
		r.note("keep %s (not installed by cni)", p)
		return nil
	}
	return r.remove(p)
}

// removeBinary removes Dir/cni unless entries of ours are left: symlinks to it would
// dangle, and hardlinks or copies kept by --only/--skip would no longer be recognised
// as ours by a later uninstall.
func (r *run) removeBinary() error {
	if _, err := os.Lstat(r.target()); errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	users, err := r.users()
	if err != nil {
		return err
	}
	if len(users) > 0 {
		r.note("keep %s (still used by: %v)", r.target(), users)
		return nil
	}
	return r.remove(r.target())
}

// users lists the entries of ours that this run leaves in place: unselected plugin
// names, and any other symlink to cni.
func (r *run) users() ([]string, error) {
	des, err := os.ReadDir(r.Dir)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, de := range des {
		n := de.Name()
		if n == Binary || slices.Contains(r.Names, n) {
			continue
		}
		p := filepath.Join(r.Dir, n)
		if de.Type()&fs.ModeSymlink != 0 {
			if r.pointsAtBinary(p) {
				out = append(out, n)
			}
			continue
		}
		if !slices.Contains(r.AllNames, n) {
			continue
		}
		ours, err := r.isOurs(p)
		if err != nil {
			return nil, fmt.Errorf("check %s: %w", p, err)
		}
		if ours {
			out = append(out, n)
		}
	}
	return out, nil
}
