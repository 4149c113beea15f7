// Package statedir works inside the directories where plugins keep state on disk
// (host-local's network directories, tuning's backups). A Dir is opened once by its
// configured path, which may itself be a symbolic link an operator made
// (/var/lib/cni -> /data/cni); every name inside it is then a single path component
// resolved relative to the open directory and never followed when it is a symbolic
// link. So a link, FIFO or device planted under one of our names is seen as a foreign
// entry, never as what it points to: we neither read, write nor delete through it, and
// a name swapped under us cannot send an operation elsewhere. Reads accept regular
// files only and are bounded, so a FIFO cannot hang a plugin and a huge file cannot
// exhaust its memory.
package statedir

import (
	"cmp"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/cnikit/cni/internal/core/cnierror"
)

// ErrNotRegular reports an entry that is not a regular file where one was expected.
var ErrNotRegular = errors.New("not a regular file")

// ErrTooLarge reports a file longer than the caller's limit.
var ErrTooLarge = errors.New("file too large")

// maxRemoveDepth bounds RemoveAll: every level holds a descriptor, and a planted tree
// deeper than this is left (and reported) rather than exhausting them.
const maxRemoveDepth = 32

// IsForeign reports whether err means that the entry is not of the kind we keep under
// that name (a symbolic link, a FIFO, a device, a directory where a file belongs or the
// reverse, an oversized file), as opposed to a missing entry or a failing filesystem.
func IsForeign(err error) bool {
	return errors.Is(err, ErrNotRegular) || errors.Is(err, ErrTooLarge) ||
		errors.Is(err, unix.ELOOP) || errors.Is(err, unix.ENOTDIR) || errors.Is(err, unix.EISDIR) ||
		errors.Is(err, unix.ENXIO) || errors.Is(err, unix.EOPNOTSUPP)
}

// ReadPath reads a file named by configuration (a resolv.conf, a node allow-list): the
// path may lead through symbolic links an operator made (/etc/resolv.conf usually is
// one), but the file must be a regular one and at most limit bytes long, so that a
// FIFO cannot hang the plugin and /dev/zero cannot exhaust its memory.
func ReadPath(path string, limit int64) ([]byte, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|unix.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, &fs.PathError{Op: "open", Path: path, Err: ErrNotRegular}
	}
	return readAll(f, limit)
}

// readAll reads f to its end, at most limit bytes: a longer file is ErrTooLarge.
func readAll(f *os.File, limit int64) ([]byte, error) {
	data, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err == nil && int64(len(data)) > limit {
		err = &fs.PathError{Op: "read", Path: f.Name(), Err: ErrTooLarge}
	}
	if err != nil {
		return nil, err
	}
	return data, nil
}

// MkdirAll creates the state directory at path, which the config key names, with its
// parents, as os.MkdirAll does. A path that is, or lies below, something that is no
// directory is the config's fault: code 7 naming the key and the path component at
// fault, not the kernel's bare "not a directory" as an internal or I/O error.
func MkdirAll(key, path string, perm os.FileMode) error {
	err := os.MkdirAll(path, perm)
	if errors.Is(err, unix.ENOTDIR) {
		return cnierror.Invalid("%s: %v", key, err)
	}
	return err
}

// Dir is an open directory; names given to its methods are single components inside it.
type Dir struct {
	f    *os.File
	path string
}

// Open opens the directory at path, following symbolic links in the path itself.
func Open(path string) (*Dir, error) {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC|unix.O_NONBLOCK, 0)
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: path, Err: err}
	}
	return &Dir{f: os.NewFile(uintptr(fd), path), path: path}, nil
}

// Path is the directory's path, for messages.
func (d *Dir) Path() string { return d.path }

// Stat describes the open directory itself (its mode and owner), not whatever its path
// names by now.
func (d *Dir) Stat() (fs.FileInfo, error) { return d.f.Stat() }

// Close releases the directory, and a lock taken with Lock.
func (d *Dir) Close() error { return d.f.Close() }

func (d *Dir) fd() int { return int(d.f.Fd()) }

func (d *Dir) err(op, name string, err error) error {
	return &fs.PathError{Op: op, Path: d.path + "/" + name, Err: err}
}

// check is d.err for a failed call, nil for one that succeeded.
func (d *Dir) check(op, name string, err error) error {
	if err != nil {
		return d.err(op, name, err)
	}
	return nil
}

// Sub opens the directory name inside d, creating it with perm when create is set. A
// symbolic link or any other non-directory under that name is an error IsForeign
// recognises.
func (d *Dir) Sub(name string, create bool, perm uint32) (*Dir, error) {
	const flags = unix.O_RDONLY | unix.O_DIRECTORY | unix.O_NOFOLLOW | unix.O_CLOEXEC | unix.O_NONBLOCK
	fd, err := unix.Openat(d.fd(), name, flags, 0)
	if errors.Is(err, unix.ENOENT) && create {
		if err = unix.Mkdirat(d.fd(), name, perm); err == nil || errors.Is(err, unix.EEXIST) {
			fd, err = unix.Openat(d.fd(), name, flags, 0)
		}
	}
	if err != nil {
		return nil, d.err("open", name, err)
	}
	path := d.path + "/" + name
	return &Dir{f: os.NewFile(uintptr(fd), path), path: path}, nil
}

// OpenFile opens the regular file name with flag (O_NOFOLLOW, O_NONBLOCK and O_CLOEXEC
// are added): a symbolic link fails with ELOOP, anything else but a regular file with
// ErrNotRegular. O_NONBLOCK makes opening a FIFO return at once instead of waiting for
// a writer; on a regular file it changes nothing.
func (d *Dir) OpenFile(name string, flag int, perm uint32) (*os.File, error) {
	fd, err := unix.Openat(d.fd(), name, flag|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, perm)
	if err != nil {
		return nil, d.err("open", name, err)
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return nil, d.err("stat", name, err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		unix.Close(fd)
		return nil, d.err("open", name, ErrNotRegular)
	}
	return os.NewFile(uintptr(fd), d.path+"/"+name), nil
}

// ReadFile reads the regular file name, at most limit bytes: a longer file is
// ErrTooLarge.
func (d *Dir) ReadFile(name string, limit int64) ([]byte, error) {
	f, err := d.OpenFile(name, unix.O_RDONLY, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return readAll(f, limit)
}

// CreateTemp creates a new regular file named prefix plus 16 random hex digits, mode
// 0600, open for writing. The name's length is fixed, so a temp file never needs a
// longer name than the file it becomes.
func (d *Dir) CreateTemp(prefix string) (*os.File, string, error) {
	for range 100 {
		name := TempName(prefix)
		fd, err := unix.Openat(d.fd(), name, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
		if errors.Is(err, unix.EEXIST) {
			continue
		}
		if err != nil {
			return nil, "", d.err("create", name, err)
		}
		return os.NewFile(uintptr(fd), d.path+"/"+name), name, nil
	}
	return nil, "", d.err("create", prefix+"*", unix.EEXIST)
}

// TempName is prefix plus 16 random hex digits: a name of fixed length that no other
// writer picks at the same time.
func TempName(prefix string) string {
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], rand.Uint64())
	return prefix + hex.EncodeToString(b[:])
}

// IsTempName tells whether name is one TempName(prefix) makes: prefix and exactly 16
// lowercase hex digits. A caller that removes leftovers of its own interrupted writes
// matches them with it, and so never takes a file someone else put beside them.
func IsTempName(prefix, name string) bool {
	rest, ok := strings.CutPrefix(name, prefix)
	return ok && len(rest) == 16 && strings.Trim(rest, "0123456789abcdef") == ""
}

// WriteTemp writes data to a new temp file (see CreateTemp) and returns its name.
func (d *Dir) WriteTemp(prefix string, data []byte) (string, error) {
	f, name, err := d.CreateTemp(prefix)
	if err != nil {
		return "", err
	}
	_, err = f.Write(data)
	if err = cmp.Or(err, f.Close()); err != nil {
		unix.Unlinkat(d.fd(), name, 0)
		return "", d.err("write", name, err)
	}
	return name, nil
}

// Rename renames from to to, replacing whatever entry to names (never what it points to).
func (d *Dir) Rename(from, to string) error {
	if err := unix.Renameat(d.fd(), from, d.fd(), to); err != nil {
		return d.err("rename", from+" -> "+to, err)
	}
	return nil
}

// Exchange swaps the entries a and b atomically (renameat2 RENAME_EXCHANGE); both must
// exist.
func (d *Dir) Exchange(a, b string) error {
	if err := unix.Renameat2(d.fd(), a, d.fd(), b, unix.RENAME_EXCHANGE); err != nil {
		return d.err("exchange", a+" <-> "+b, err)
	}
	return nil
}

// Link makes to a hard link of from; it fails with EEXIST when to exists, whatever it is.
func (d *Dir) Link(from, to string) error {
	if err := unix.Linkat(d.fd(), from, d.fd(), to, 0); err != nil {
		return d.err("link", from+" -> "+to, err)
	}
	return nil
}

// Symlink creates the symbolic link name holding target.
func (d *Dir) Symlink(target, name string) error {
	return d.check("symlink", name, unix.Symlinkat(target, d.fd(), name))
}

// Readlink returns the target text of the symbolic link name; anything else under that
// name gives EINVAL.
func (d *Dir) Readlink(name string) (string, error) {
	buf := make([]byte, 256)
	for {
		n, err := unix.Readlinkat(d.fd(), name, buf)
		if err != nil {
			return "", d.err("readlink", name, err)
		}
		if n < len(buf) {
			return string(buf[:n]), nil
		}
		buf = make([]byte, 2*len(buf))
	}
}

// Remove removes the entry name itself: a file, a symbolic link (not its target), a
// FIFO, or an empty directory. A missing entry is no error.
func (d *Dir) Remove(name string) error {
	err := unix.Unlinkat(d.fd(), name, 0)
	if errors.Is(err, unix.EISDIR) {
		err = unix.Unlinkat(d.fd(), name, unix.AT_REMOVEDIR)
	}
	return d.check("remove", name, ignoreMissing(err))
}

// Unlink removes the entry name itself when it is not a directory (a directory gives
// EISDIR). A missing entry is no error.
func (d *Dir) Unlink(name string) error {
	return d.check("unlink", name, ignoreMissing(unix.Unlinkat(d.fd(), name, 0)))
}

// RemoveAll removes name and, when it is a directory, everything below it, without
// following any symbolic link. A missing entry is no error.
func (d *Dir) RemoveAll(name string) error {
	return d.check("remove", name, removeAllAt(d.fd(), name, maxRemoveDepth))
}

func removeAllAt(dirfd int, name string, depth int) error {
	err := unix.Unlinkat(dirfd, name, 0)
	if !errors.Is(err, unix.EISDIR) {
		return ignoreMissing(err)
	}
	err = unix.Unlinkat(dirfd, name, unix.AT_REMOVEDIR)
	if !errors.Is(err, unix.ENOTEMPTY) && !errors.Is(err, unix.EEXIST) {
		return ignoreMissing(err)
	}
	if depth == 0 {
		return fmt.Errorf("more than %d levels deep: %w", maxRemoveDepth, err)
	}
	fd, err := unix.Openat(dirfd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC|unix.O_NONBLOCK, 0)
	if err != nil {
		return ignoreMissing(err)
	}
	sub := os.NewFile(uintptr(fd), name)
	names, err := sub.Readdirnames(-1)
	errs := []error{err}
	for _, n := range names {
		errs = append(errs, removeAllAt(fd, n, depth-1))
	}
	sub.Close()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	return ignoreMissing(unix.Unlinkat(dirfd, name, unix.AT_REMOVEDIR))
}

func ignoreMissing(err error) error {
	if errors.Is(err, unix.ENOENT) {
		return nil
	}
	return err
}

// Entries lists the directory; each entry's type is that of the entry itself, as
// lstat(2) sees it.
func (d *Dir) Entries() ([]fs.DirEntry, error) { return list(d, (*os.File).ReadDir) }

// Names lists the directory's entry names.
func (d *Dir) Names() ([]string, error) { return list(d, (*os.File).Readdirnames) }

// list reads every entry of d with read, through d opened anew, so that the listing
// starts from its first entry.
func list[T any](d *Dir, read func(*os.File, int) ([]T, error)) ([]T, error) {
	fd, err := unix.Openat(d.fd(), ".", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, d.err("open", ".", err)
	}
	f := os.NewFile(uintptr(fd), d.path)
	defer f.Close()
	return read(f, -1)
}

// Lstat returns the entry name's own status, without following a symbolic link.
func (d *Dir) Lstat(name string) (unix.Stat_t, error) {
	var st unix.Stat_t
	if err := unix.Fstatat(d.fd(), name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return st, d.err("lstat", name, err)
	}
	return st, nil
}

// ModTime is the directory's own modification time.
func (d *Dir) ModTime() (time.Time, error) {
	var st unix.Stat_t
	if err := unix.Fstat(d.fd(), &st); err != nil {
		return time.Time{}, d.err("stat", ".", err)
	}
	return time.Unix(st.Mtim.Unix()), nil
}

// SetModTime sets the directory's own modification time, leaving its access time.
func (d *Dir) SetModTime(t time.Time) error {
	ts := []unix.Timespec{{Nsec: unix.UTIME_OMIT}, unix.NsecToTimespec(t.UnixNano())}
	return d.check("utimes", ".", unix.UtimesNanoAt(d.fd(), ".", ts, 0))
}

// Lock takes an exclusive flock on the directory itself; Unlock or Close releases it.
func (d *Dir) Lock() error { return Flock(d.f, unix.LOCK_EX) }

// TryLock takes the exclusive flock of Lock when no other holder has it, and reports
// whether it did, without waiting.
func (d *Dir) TryLock() (bool, error) {
	err := Flock(d.f, unix.LOCK_EX|unix.LOCK_NB)
	if errors.Is(err, unix.EWOULDBLOCK) {
		return false, nil
	}
	return err == nil, err
}

// Unlock releases the lock taken by Lock.
func (d *Dir) Unlock() error { return Flock(d.f, unix.LOCK_UN) }

// Flock applies flock(2) operation how to f, retrying when a signal interrupts it.
func Flock(f *os.File, how int) error {
	for {
		err := unix.Flock(int(f.Fd()), how)
		if !errors.Is(err, unix.EINTR) {
			return err
		}
	}
}
