package install

import (
	"cmp"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/cnikit/cni/internal/core/statedir"
)

// maxTempTries bounds the retries when a random temporary name is taken.
const maxTempTries = 100

// tempPrefix begins every temporary name cni install writes, followed by 16 random hex
// digits (statedir.TempName): hidden, since runtimes skip dotfiles when they list plugins
// or configs, and recognisable exactly, so that the next run can remove what a run
// killed before its rename left behind (removeLeftovers) and nothing else. At 25
// characters it is far below NAME_MAX whatever the final name is.
const tempPrefix = ".cni-tmp-"

// isTempName tells whether n is a name place makes.
func isTempName(n string) bool { return statedir.IsTempName(tempPrefix, n) }

// place puts an entry at final atomically: create makes it under a new temporary name
// beside final (retried on a taken name), then one rename puts it over final. A create
// or rename that fails leaves nothing behind.
func place(final string, create func(tmp string) error) error {
	dir := filepath.Dir(final)
	for range maxTempTries {
		tmp := filepath.Join(dir, statedir.TempName(tempPrefix))
		err := create(tmp)
		if errors.Is(err, fs.ErrExist) {
			continue
		}
		if err == nil {
			err = os.Rename(tmp, final)
		}
		if err != nil {
			os.Remove(tmp)
		}
		return err
	}
	return fmt.Errorf("no free temporary name for %s after %d tries", final, maxTempTries)
}

// writeFile writes the content of src to final atomically: a temporary file in final's
// directory, flushed to disk, then renamed over final. Readers see the old file or the
// new one, never a half-written one; a process still running the old file keeps it.
func writeFile(final string, src io.Reader, perm os.FileMode) error {
	return place(final, func(tmp string) error {
		f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
		if err != nil {
			return err
		}
		_, err = io.Copy(f, src)
		if err == nil {
			err = f.Chmod(perm) // not masked by the umask, as OpenFile's perm is
		}
		if err == nil {
			err = f.Sync()
		}
		return cmp.Or(err, f.Close())
	})
}

// copyFile copies the file at src to final atomically.
func copyFile(src, final string, perm os.FileMode) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	return writeFile(final, in, perm)
}

// symlink makes final a symlink to target atomically.
func symlink(target, final string) error {
	return place(final, func(tmp string) error { return os.Symlink(target, tmp) })
}

// hardlink makes final another name of existing atomically.
func hardlink(existing, final string) error {
	return place(final, func(tmp string) error { return os.Link(existing, tmp) })
}

// syncDir makes the renames in dir durable, not only the file contents.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return wrap("sync "+dir, d.Sync())
}
