package install

import (
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

// isTempName tells whether n is a name createTemp makes.
func isTempName(n string) bool { return statedir.IsTempName(tempPrefix, n) }

// createTemp makes a new entry beside final with create, retrying on a taken name, and
// returns its path.
func createTemp(final string, create func(tmp string) error) (string, error) {
	dir := filepath.Dir(final)
	for range maxTempTries {
		tmp := filepath.Join(dir, statedir.TempName(tempPrefix))
		err := create(tmp)
		if errors.Is(err, fs.ErrExist) {
			continue
		}
		if err != nil {
			return "", err
		}
		return tmp, nil
	}
	return "", fmt.Errorf("no free temporary name for %s after %d tries", final, maxTempTries)
}

// replace renames a fully written tmp over final in one step; tmp is removed when the
// rename fails, so nothing is left behind.
func replace(tmp, final string) error {
	if err := os.Rename(tmp, final); err != nil {
		os.Remove(tmp)
		return err
	}
	return nil
}

// writeFile writes the content of src to final atomically: a temporary file in final's
// directory, flushed to disk, then renamed over final. Readers see the old file or the
// new one, never a half-written one; a process still running the old file keeps it.
func writeFile(final string, src io.Reader, perm os.FileMode) error {
	var f *os.File
	tmp, err := createTemp(final, func(tmp string) error {
		var err error
		f, err = os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
		return err
	})
	if err != nil {
		return err
	}
	if err := fill(f, src, perm); err != nil {
		f.Close()
		os.Remove(tmp)
		return err
	}
	if err := f.Close(); err != nil {
		os.Remove(tmp)
		return err
	}
	return replace(tmp, final)
}

// fill copies src into f, sets perm (not masked by the umask) and flushes the data.
func fill(f *os.File, src io.Reader, perm os.FileMode) error {
	if _, err := io.Copy(f, src); err != nil {
		return err
	}
	if err := f.Chmod(perm); err != nil {
		return err
	}
	return f.Sync()
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
	tmp, err := createTemp(final, func(tmp string) error { return os.Symlink(target, tmp) })
	if err != nil {
		return err
	}
	return replace(tmp, final)
}

// hardlink makes final another name of existing atomically.
func hardlink(existing, final string) error {
	tmp, err := createTemp(final, func(tmp string) error { return os.Link(existing, tmp) })
	if err != nil {
		return err
	}
	return replace(tmp, final)
}

// syncDir makes the renames in dir durable, not only the file contents.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("sync %s: %w", dir, err)
	}
	return nil
}
