package install

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/cnikit/cni/internal/core/statedir"
)

// lockWait bounds how long a run waits for another run that holds a directory it
// writes into: installs are short (seconds), so one that holds it longer is stuck, and
// this one fails with a message rather than hang a node's init container for good.
const lockWait = 2 * time.Minute

// lockPoll is how often a waiting run tries the lock again.
const lockPoll = 50 * time.Millisecond

// enter takes the lock of dir, a directory this run writes entries into, and removes
// what runs killed before their rename left there: entries with a temporary name
// (isTempName), in dir and, for the plugin directory, in KeptDir. A run holds the lock
// of every directory it writes temporaries into from before its first one to its end
// (release), so a temporary entry found under the lock belongs to no live run. A
// directory that does not exist yet holds no leftovers; it is entered once created.
// Entering a directory twice (or the config directory that is the plugin directory)
// does nothing.
func (r *run) enter(dir string) error {
	fi, err := os.Stat(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	for _, d := range r.locked {
		if held, err := d.Stat(); err == nil && os.SameFile(held, fi) {
			return nil
		}
	}
	d, err := r.lockDir(dir)
	if err != nil {
		return err
	}
	r.locked = append(r.locked, d)
	if err := r.removeLeftovers(d); err != nil {
		return err
	}
	if dir != r.Dir {
		return nil
	}
	kept, err := d.Sub(KeptDir, false, 0)
	if errors.Is(err, fs.ErrNotExist) || statedir.IsForeign(err) {
		// A KeptDir that is no directory is refused where it is used (checkKeptDir).
		return nil
	}
	if err != nil {
		return err
	}
	defer kept.Close()
	return r.removeLeftovers(kept)
}

// lockDir opens dir and takes its flock, waiting up to lockWait for another run.
func (r *run) lockDir(dir string) (*statedir.Dir, error) {
	d, err := statedir.Open(dir)
	if err != nil {
		return nil, err
	}
	deadline := time.Now().Add(lockWait)
	for waited := false; ; waited = true {
		ok, err := d.TryLock()
		if err != nil {
			d.Close()
			return nil, fmt.Errorf("lock %s: %w", dir, err)
		}
		if ok {
			return d, nil
		}
		if time.Now().After(deadline) {
			d.Close()
			return nil, fmt.Errorf("another cni install has held the lock of %s for over %s: is it stuck?", dir, lockWait)
		}
		if !waited {
			r.note("waiting for another cni install in %s", dir)
		}
		time.Sleep(lockPoll)
	}
}

// release drops the locks enter took.
func (r *run) release() {
	for _, d := range r.locked {
		d.Close()
	}
	r.locked = nil
}

// removeLeftovers removes the entries with a temporary name in d: each is the
// half-written or not yet renamed entry of a run that was killed (a copy of the binary
// is 6 to 12 MB), so that crashed runs never pile up. A directory under such a name is
// not one we make, and stays; names are taken in d itself, never through a link.
func (r *run) removeLeftovers(d *statedir.Dir) error {
	des, err := d.Entries()
	if err != nil {
		return err
	}
	for _, de := range des {
		if !isTempName(de.Name()) || de.IsDir() {
			continue
		}
		err := r.act(func() error { return d.Unlink(de.Name()) },
			"remove %s (left by an interrupted cni install)", filepath.Join(d.Path(), de.Name()))
		if err != nil {
			return fmt.Errorf("remove leftover: %w", err)
		}
	}
	return nil
}
