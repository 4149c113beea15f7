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
	// A rotation refused (a foreign FILE.N) leaves the line to go into FILE all the
	// same, and is reported with it.
	var rerr error
	if fi.Size() > 0 && fi.Size()+int64(len(line)) > c.MaxBytes() {
		rerr = c.rotate(fi)
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
		err = fmt.Errorf("invocation log %s: %w", c.File, err)
	}
	return errors.Join(rerr, err)
}

// openLog opens the log for appending, creating it (and its directory) when missing,
// and returns what it is. Only a regular file is a log: O_NONBLOCK makes a FIFO at the
// path fail at once (ENXIO without a reader) or be refused, where a blocking open would
// hold the plugin, and the runtime waiting for its answer, until a reader came. And only
// this user's own (ownFile) in a directory no other user may swap it in (safeDir): a
// log in /tmp that another user made first, or linked to a file of theirs, would give
// them every pod's line, or have a root plugin append to a file of their choosing.
func openLog(path string) (*os.File, fs.FileInfo, error) {
	flags := os.O_WRONLY | os.O_APPEND | os.O_CREATE | syscall.O_NOFOLLOW | syscall.O_NONBLOCK | syscall.O_CLOEXEC
	// Before the open, which would create the file: nothing is made in such a directory.
	if err := safeDir(filepath.Dir(path)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, nil, fmt.Errorf("invocation log: %w; nothing written", err)
	}
	f, err := os.OpenFile(path, flags, fileMode)
	if errors.Is(err, fs.ErrNotExist) {
		// When the directory cannot be made, that is the reason to report (a read-only
		// file system, say), not the missing directory.
		if err = os.MkdirAll(filepath.Dir(path), 0o755); err == nil {
			f, err = os.OpenFile(path, flags, fileMode)
		}
	}
	if err != nil {
		return nil, nil, fmt.Errorf("invocation log: %w; nothing written", err)
	}
	fi, err := ownFile(f, false)
	if err != nil {
		f.Close()
		return nil, nil, fmt.Errorf("invocation log: %w; nothing written", err)
	}
	return f, fi, nil
}

// ErrForeign reports a log file, or a directory of logs, that another user made or may
// change: the log is not written there, nor read as this user's.
var ErrForeign = errors.New("not this user's own")

// ownFile returns what the open f is when it is a regular file of one link owned by
// this process's user (or, when rootToo, by root: a reader may read root's log). A file
// of another owner was made by someone else before the first writer came; a second
// link is a name someone gave it elsewhere (a hard link to a file of theirs, or to one
// of ours that they want to keep).
func ownFile(f *os.File, rootToo bool) (fs.FileInfo, error) {
	fi, err := regular(f)
	if err != nil {
		return nil, err
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return fi, nil
	}
	if euid := os.Geteuid(); int(st.Uid) != euid && !(rootToo && st.Uid == 0) {
		return nil, &fs.PathError{Op: "open", Path: f.Name(),
			Err: fmt.Errorf("%w: owned by uid %d, not by this process's uid %d (another user made it)", ErrForeign, st.Uid, euid)}
	}
	if st.Nlink != 1 {
		return nil, &fs.PathError{Op: "open", Path: f.Name(),
			Err: fmt.Errorf("%w: it has %d names (a hard link was made to it)", ErrForeign, st.Nlink)}
	}
	return fi, nil
}

// safeDir refuses a log directory where another user may replace entries: one owned
// by another user than this one or root, or writable by all users or by a group not
// this process's, unless its sticky bit is set (as /tmp's is): then only an entry's
// owner may rename or remove it, and ownFile and the rotation's checks keep to ours.
func safeDir(dir string) error {
	fi, err := os.Stat(dir)
	if err != nil {
		return err
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return nil
	}
	mode := fi.Mode()
	euid := os.Geteuid()
	why := ""
	switch {
	case int(st.Uid) != euid && st.Uid != 0:
		why = fmt.Sprintf("owned by uid %d", st.Uid)
	case mode&fs.ModeSticky != 0:
	case mode&0o002 != 0:
		why = "writable by every user, without the sticky bit"
	case mode&0o020 != 0 && int(st.Gid) != os.Getegid():
		why = fmt.Sprintf("writable by group %d, without the sticky bit", st.Gid)
	}
	if why == "" {
		return nil
	}
	return &fs.PathError{Op: "open", Path: dir,
		Err: fmt.Errorf("%w: the directory is %s, so another user could swap the log for a file of theirs", ErrForeign, why)}
}

// checkRotated refuses to rotate when an entry rotation would rename or remove is not
// one of this user's log files: rotation never moves or deletes another's file.
func checkRotated(path string) error {
	fi, err := os.Lstat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	switch {
	case !fi.Mode().IsRegular():
		return fmt.Errorf("%w: %s is not a regular file", ErrForeign, path)
	case ok && int(st.Uid) != os.Geteuid():
		return fmt.Errorf("%w: %s is owned by uid %d", ErrForeign, path, st.Uid)
	case ok && st.Nlink != 1:
		return fmt.Errorf("%w: %s has %d names", ErrForeign, path, st.Nlink)
	}
	return nil
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
	for i := n; i >= 1; i-- {
		if err := checkRotated(rotatedName(c.File, i)); err != nil {
			return fmt.Errorf("invocation log: not rotated, the file grows on: %w", err)
		}
	}
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
	f, err := os.OpenFile(path, flags|syscall.O_NONBLOCK, fileMode)
	if err != nil {
		return nil, fmt.Errorf("invocation log: lock: %w", err)
	}
	// A lock file another user made could be held by them for good, and rotation (or a
	// reader) would wait on it for good.
	if _, err = ownFile(f, how == unix.LOCK_SH); err == nil {
		err = statedir.Flock(f, how)
	}
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("invocation log: lock: %w", err)
	}
	return func() { f.Close() }, nil
}
