package chain

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// tmpDirName is the directory beside results/ where entries are written before being
// renamed into place. An entry's temporary file has the entry's own name there, so a
// temporary name is never longer than the final one (NAME_MAX bounds both), and the DEL
// of an attachment knows the one leftover an interrupted write of it can leave.
// results/ itself holds entries only, as libcni's does.
const tmpDirName = "results.tmp"

// nameMax is the longest file name the kernel takes (NAME_MAX).
const nameMax = 255

// legacyLeftoverAge is how old a leftover of the former writer (".<entry>.tmp-<digits>"
// in results/ itself, written without the lock) must be before GC removes it, so a
// former binary still writing during an upgrade is not raced.
const legacyLeftoverAge = time.Minute

// sweepWait bounds how long GC waits for writers to finish before leaving the removal
// of leftovers to the next GC.
const sweepWait = 2 * time.Second

// results is the open <cacheDir>/results directory. Every entry is reached through the
// directory's fd (openat, renameat, unlinkat) without following a symlink, so nothing
// planted in the cache makes the runner read, write or delete outside it.
//
// Writers hold a shared flock on the temporary directory while their temporary file
// exists; GC takes it exclusively before removing what is there, so it removes only
// leftovers of writers that died, never the file of a writer still at work.
type results struct {
	cache *os.File // <cacheDir>, holding results and the temporary directory
	dir   *os.File
	path  string
}

// openResults opens <cacheDir>/results, creating it (mode 0700) when create is set. A
// missing directory without create is (nil, nil): there is no cache. cacheDir itself
// is the operator's choice and may be reached through a symlink; nothing under it is.
func openResults(cacheDir string, create bool) (*results, error) {
	path := filepath.Join(cacheDir, "results")
	if create {
		if err := os.MkdirAll(path, 0o700); err != nil {
			return nil, err
		}
	}
	fd, err := unix.Open(cacheDir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err == nil {
		cache := os.NewFile(uintptr(fd), cacheDir)
		var dir *os.File
		if dir, err = openDir(fd, "results", path); err == nil {
			return &results{cache: cache, dir: dir, path: path}, nil
		}
		cache.Close()
	} else {
		err = &os.PathError{Op: "open", Path: cacheDir, Err: err}
	}
	if errors.Is(err, os.ErrNotExist) && !create {
		return nil, nil
	}
	return nil, fmt.Errorf("cache dir: %w", err)
}

// openDir opens the directory name at dirfd without following a final symlink; path is
// its name in messages.
func openDir(dirfd int, name, path string) (*os.File, error) {
	fd, err := unix.Openat(dirfd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: path, Err: err}
	}
	return os.NewFile(uintptr(fd), path), nil
}

func (r *results) Close() error {
	if r == nil {
		return nil
	}
	return errors.Join(r.dir.Close(), r.cache.Close())
}

func (r *results) fd() int { return int(r.dir.Fd()) }

// isEntryName reports whether name is one file name, which reaches nothing outside
// results/ (DEL does not validate the attachment its entry name is made of).
func isEntryName(name string) bool {
	return name != "" && name != "." && name != ".." && len(name) <= nameMax && !strings.ContainsAny(name, "/\x00")
}

// read returns an entry's content: a regular file (no symlink followed, no FIFO waited
// on) of at most MaxFileSize bytes. A missing entry, or a name that is no file name,
// is an error matching os.ErrNotExist.
func (r *results) read(name string) ([]byte, error) {
	if r == nil {
		return nil, os.ErrNotExist
	}
	if !isEntryName(name) {
		return nil, fmt.Errorf("cache entry %q: not a file name: %w", name, os.ErrNotExist)
	}
	fd, err := unix.Openat(r.fd(), name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err == unix.ELOOP {
		return nil, fmt.Errorf("cache entry %s is a symlink", name)
	}
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: filepath.Join(r.path, name), Err: err}
	}
	f := os.NewFile(uintptr(fd), name)
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("cache entry %s is not a regular file (%v)", name, fi.Mode().Type())
	}
	data, err := io.ReadAll(io.LimitReader(f, MaxFileSize+1))
	if err != nil {
		return nil, fmt.Errorf("cache entry %s: %w", name, err)
	}
	if len(data) > MaxFileSize {
		return nil, fmt.Errorf("cache entry %s is larger than %d bytes", name, MaxFileSize)
	}
	return data, nil
}

// names lists the directory.
func (r *results) names() ([]string, error) {
	if r == nil {
		return nil, nil
	}
	dir, err := openDir(r.fd(), ".", r.path)
	if err != nil {
		return nil, err
	}
	defer dir.Close()
	return dir.Readdirnames(-1)
}

// write stores an entry atomically: written in the temporary directory, then renamed
// into place, so a reader sees the old entry or the new one, never a partial one. hook,
// when set, is called with the temporary file written (tests stop there).
//
// The entry is not synced (libcni does not sync its own either). What a sync would
// keep is an entry written in the seconds before the machine itself crashes, and what
// it would keep it for is gone with the crash: the namespace, its links and rules. The
// runtime's DEL of that attachment then finds the entry missing, or empty where the
// file system committed the rename before the data, and runs without prevResult (an
// unusable entry never blocks DEL, and no plugin of ours needs prevResult to delete);
// GC skips an entry it cannot read, as libcni does. A sync cost 1 ms per ADD on a
// quiet disk and up to 10 ms beside other writers.
func (r *results) write(name string, data []byte, hook func()) error {
	if !isEntryName(name) {
		return fmt.Errorf("cache entry %q: not a file name", name)
	}
	tmp, err := r.openTmp()
	if err != nil {
		return err
	}
	defer tmp.Close() // drops the lock
	if err := unix.Flock(int(tmp.Fd()), unix.LOCK_SH); err != nil {
		return fmt.Errorf("locking %s: %w", tmp.Name(), err)
	}
	if err := writeNew(tmp, name, data); err != nil {
		unix.Unlinkat(int(tmp.Fd()), name, 0)
		return err
	}
	if hook != nil {
		hook()
	}
	if err := unix.Renameat(int(tmp.Fd()), name, r.fd(), name); err != nil {
		unix.Unlinkat(int(tmp.Fd()), name, 0)
		return &os.LinkError{Op: "rename", Old: filepath.Join(tmp.Name(), name), New: filepath.Join(r.path, name), Err: err}
	}
	return nil
}

// openTmp opens the temporary directory, creating it; anything else found under that
// name (a file, a symlink) is no writer's and is replaced.
func (r *results) openTmp() (*os.File, error) {
	for attempt := 0; ; attempt++ {
		if err := unix.Mkdirat(int(r.cache.Fd()), tmpDirName, 0o700); err != nil && err != unix.EEXIST {
			return nil, &os.PathError{Op: "mkdir", Path: r.tmpPath(), Err: err}
		}
		dir, err := r.openTmpDir()
		if err == nil || attempt > 0 || !(errors.Is(err, unix.ENOTDIR) || errors.Is(err, unix.ELOOP)) {
			return dir, err
		}
		unix.Unlinkat(int(r.cache.Fd()), tmpDirName, 0)
	}
}

func (r *results) openTmpDir() (*os.File, error) {
	return openDir(int(r.cache.Fd()), tmpDirName, r.tmpPath())
}

func (r *results) tmpPath() string { return filepath.Join(filepath.Dir(r.path), tmpDirName) }

// writeNew creates name in dir (mode 0600, failing on an existing symlink) and writes
// data. A file of that name is the leftover of an interrupted write of the
// same attachment, which no other operation is writing now: it is replaced.
func writeNew(dir *os.File, name string, data []byte) error {
	const flags = unix.O_WRONLY | unix.O_CREAT | unix.O_EXCL | unix.O_NOFOLLOW | unix.O_CLOEXEC
	fd, err := unix.Openat(int(dir.Fd()), name, flags, 0o600)
	if err == unix.EEXIST {
		unix.Unlinkat(int(dir.Fd()), name, 0)
		fd, err = unix.Openat(int(dir.Fd()), name, flags, 0o600)
	}
	if err != nil {
		return &os.PathError{Op: "create", Path: filepath.Join(dir.Name(), name), Err: err}
	}
	f := os.NewFile(uintptr(fd), filepath.Join(dir.Name(), name))
	_, err = f.Write(data)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// remove deletes an entry (the link itself when it is a symlink) and the leftover an
// interrupted write of it may have left in the temporary directory. Nothing to delete
// is no error, nor is a name that is no file name: it names no entry. The former
// writer's leftovers in results/ itself are GC's (sweepLegacy): finding them takes a
// listing of the whole directory, which DEL does not pay for.
func (r *results) remove(name string) error {
	if r == nil || !isEntryName(name) {
		return nil
	}
	err := unlinkEntry(r.fd(), name)
	if tmp, terr := r.openTmpDir(); terr == nil {
		err = errors.Join(err, unlinkEntry(int(tmp.Fd()), name))
		tmp.Close()
	}
	return err
}

// unlinkEntry removes name from dirfd without following it; an empty directory goes
// too, a missing entry is no error.
func unlinkEntry(dirfd int, name string) error {
	err := unix.Unlinkat(dirfd, name, 0)
	if err == unix.EISDIR {
		err = unix.Unlinkat(dirfd, name, unix.AT_REMOVEDIR)
	}
	if err == nil || err == unix.ENOENT {
		return nil
	}
	return &os.PathError{Op: "remove", Path: name, Err: err}
}

// isLegacyLeftover reports whether n is a former temporary file of an entry:
// ".<entry>.tmp-<digits>", os.CreateTemp's pattern, with a non-empty entry name.
func isLegacyLeftover(n string) bool {
	i := strings.LastIndex(n, ".tmp-")
	if !strings.HasPrefix(n, ".") || i <= 1 {
		return false
	}
	digits := n[i+len(".tmp-"):]
	return digits != "" && strings.Trim(digits, "0123456789") == ""
}

// sweep removes the leftovers of interrupted writes: everything in the temporary
// directory once no
// writer holds the lock, and former-style temporary files older than
// legacyLeftoverAge. When writers keep the lock past sweepWait it leaves the temporary
// directory for the next GC and says so in the error.
func (r *results) sweep(ctx context.Context) error {
	if r == nil {
		return nil
	}
	legacy := r.sweepLegacy()
	tmp, err := r.openTmpDir()
	if errors.Is(err, unix.ENOENT) {
		return legacy
	}
	if err != nil {
		return errors.Join(legacy, err)
	}
	defer tmp.Close()
	if err := lockExclusive(ctx, tmp); err != nil {
		return errors.Join(legacy, fmt.Errorf("leftovers of interrupted cache writes in %s stay until the next GC: %w", r.tmpPath(), err))
	}
	names, err := tmp.Readdirnames(-1)
	errs := []error{legacy, err}
	for _, n := range names {
		errs = append(errs, unlinkEntry(int(tmp.Fd()), n))
	}
	return errors.Join(errs...)
}

func (r *results) sweepLegacy() error {
	names, err := r.names()
	errs := []error{err}
	for _, n := range names {
		if !isLegacyLeftover(n) {
			continue
		}
		var st unix.Stat_t
		if unix.Fstatat(r.fd(), n, &st, unix.AT_SYMLINK_NOFOLLOW) != nil {
			continue
		}
		if time.Since(time.Unix(st.Mtim.Unix())) >= legacyLeftoverAge {
			errs = append(errs, unlinkEntry(r.fd(), n))
		}
	}
	return errors.Join(errs...)
}

// lockExclusive takes an exclusive flock on f, polling until sweepWait or ctx ends.
func lockExclusive(ctx context.Context, f *os.File) error {
	deadline := time.Now().Add(sweepWait)
	for {
		err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
		if err != unix.EWOULDBLOCK {
			return err
		}
		if time.Now().After(deadline) {
			return errors.New("cache writers still at work")
		}
		t := time.NewTimer(20 * time.Millisecond)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		}
	}
}
