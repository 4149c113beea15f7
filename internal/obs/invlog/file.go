package invlog

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/cnikit/cni/internal/core/statedir"
)

// fileMode keeps the log to its owner: it names pods and containers.
const fileMode = 0o600

// Append adds line (one whole line, newline included) to the log with a single write
// under O_APPEND, so that lines of concurrent plugins, in this process or others,
// never interleave. When the line would take the file past MaxBytes the file is rotated
// first (see rotate). The path's last element is never followed if it is a symlink.
func (c *Config) Append(line []byte) error {
	f, fi, err := openLog(c.File)
	if err != nil {
		return err
	}
	if fi.Size() > 0 && fi.Size()+int64(len(line)) > c.MaxBytes() {
		rerr := c.rotate(fi)
		f.Close()
		if f, _, err = openLog(c.File); err != nil {
			return errors.Join(rerr, err)
		}
	}
	_, err = f.Write(line)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("invocation log %s: %w", c.File, err)
	}
	return nil
}

// openLog opens the log for appending, creating it (and its directory) when missing,
// and returns what it is. Only a regular file is a log: O_NONBLOCK makes a FIFO at the
// path fail at once (ENXIO without a reader) or be refused, where a blocking open would
// hold the plugin, and the runtime waiting for its answer, until a reader came.
func openLog(path string) (*os.File, fs.FileInfo, error) {
	flags := os.O_WRONLY | os.O_APPEND | os.O_CREATE | syscall.O_NOFOLLOW | syscall.O_NONBLOCK | syscall.O_CLOEXEC
	f, err := os.OpenFile(path, flags, fileMode)
	if errors.Is(err, fs.ErrNotExist) {
		// When the directory cannot be made, that is the reason to report (a read-only
		// file system, say), not the missing directory.
		if err = os.MkdirAll(filepath.Dir(path), 0o755); err == nil {
			f, err = os.OpenFile(path, flags, fileMode)
		}
	}
	if err != nil {
		return nil, nil, fmt.Errorf("invocation log: %w", err)
	}
	fi, err := regular(f)
	if err != nil {
		f.Close()
		return nil, nil, fmt.Errorf("invocation log: %w", err)
	}
	return f, fi, nil
}

// regular returns what f is, or an error when it is no regular file.
func regular(f *os.File) (fs.FileInfo, error) {
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, &fs.PathError{Op: "open", Path: f.Name(), Err: statedir.ErrNotRegular}
	}
	return fi, nil
}

// rotate shifts FILE.N-1 ... FILE.1 to FILE.N ... FILE.2 (FILE.N, the oldest, is
// removed) and FILE to FILE.1, under an exclusive lock on FILE.lock, unless another
// writer rotated the file seen (the one this writer opened) already. A writer that
// opened FILE before the rotation writes its line into what is now FILE.1: no line is
// lost or torn, it only lands beside its neighbours of the moment.
func (c *Config) rotate(seen fs.FileInfo) error {
	unlock, err := lock(lockName(c.File), unix.LOCK_EX)
	if err != nil {
		return err
	}
	defer unlock()
	cur, err := os.Lstat(c.File)
	if err != nil || !os.SameFile(cur, seen) || cur.Size() < seen.Size() {
		return nil // rotated by another writer meanwhile
	}
	n := c.Rotated()
	if err := os.Remove(rotatedName(c.File, n)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("invocation log: rotate: %w", err)
	}
	for i := n - 1; i >= 1; i-- {
		if err := os.Rename(rotatedName(c.File, i), rotatedName(c.File, i+1)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("invocation log: rotate: %w", err)
		}
	}
	if err := os.Rename(c.File, rotatedName(c.File, 1)); err != nil {
		return fmt.Errorf("invocation log: rotate: %w", err)
	}
	return nil
}

func rotatedName(path string, i int) string { return path + "." + strconv.Itoa(i) }

func lockName(path string) string { return path + ".lock" }

// lock takes a flock on path and returns its release. A writer (how unix.LOCK_EX)
// creates the lock file when missing; a reader (unix.LOCK_SH) leaves the directory as it
// is and gets an error instead: no rotation ever took that lock, so none has shifted
// FILE.N names, and the only rename to come is FILE to FILE.1.
func lock(path string, how int) (func(), error) {
	flags := os.O_RDONLY | syscall.O_NOFOLLOW | syscall.O_CLOEXEC
	if how == unix.LOCK_EX {
		flags = os.O_RDWR | os.O_CREATE | syscall.O_NOFOLLOW | syscall.O_CLOEXEC
	}
	f, err := os.OpenFile(path, flags, fileMode)
	if err != nil {
		return nil, fmt.Errorf("invocation log: lock: %w", err)
	}
	for {
		err = unix.Flock(int(f.Fd()), how)
		if !errors.Is(err, unix.EINTR) {
			break
		}
	}
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("invocation log: lock: %w", err)
	}
	return func() { f.Close() }, nil
}
