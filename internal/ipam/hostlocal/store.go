package hostlocal

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/cnikit/cni/internal/core/statedir"
	"github.com/cnikit/cni/internal/spec/skel"
)

// Names inside a network's directory, as the reference plugin uses them.
const (
	lockName         = "lock"
	lastReservedName = "last_reserved_ip."
	// tempPrefix marks our own half-written files; the next walk removes leftovers
	// of a crash.
	tempPrefix = ".tmp-"
	// crlf separates container id and interface name in a reservation file.
	crlf = "\r\n"
)

// attachment is the owner of a reservation. IfName is empty for reservations written
// by reference versions before v0.8.0, which stored the container id only.
type attachment struct {
	ID     string
	IfName string
}

// content is the reservation file's exact bytes, as the reference writes them.
func (a attachment) content() string { return strings.TrimSpace(a.ID + crlf + a.IfName) }

// parseReservation reads a reservation file's content. ok is false for content that
// names no attachment (empty, or garbage): such a file keeps its address taken until
// GC, which knows the valid attachments, removes it.
func parseReservation(data []byte) (attachment, bool) {
	s := strings.TrimSpace(string(data))
	id, ifname, two := strings.Cut(s, crlf)
	if skel.ValidateContainerID(id) != nil {
		return attachment{}, false
	}
	if !two {
		return attachment{ID: id}, true
	}
	ifname = strings.TrimSpace(ifname)
	if ifname == "" || strings.ContainsAny(ifname, "\r\n") {
		return attachment{}, false
	}
	return attachment{ID: id, IfName: ifname}, true
}

// errNoStore reports that a network has no directory yet, so it holds no reservation.
var errNoStore = errors.New("network has no data directory")

// maxReservation bounds what is read of one file: a reservation is a container id and
// an interface name, last_reserved_ip one address. Anything longer is garbage.
const maxReservation = 64 << 10

// store is one network's directory, locked for the duration of one operation. Every
// name in it is reached through the directory's descriptor and never followed when it
// is a symbolic link (see statedir): the directory path itself may be an operator's
// link, the entries we manage inside it may not.
type store struct {
	dir *statedir.Dir
	// lock is the flock()ed lock file; nil when the directory itself is flock()ed
	// because the lock file could not be used (see lockStore).
	lock *os.File
	log  io.Writer
	// current is true while the index is known to describe the directory: refresh
	// found it fresh or seal stamped it, and nothing changed the directory since.
	current bool
	// staged is a temp file holding this operation's reservation content, hard-linked
	// to each address it reserves so a reservation never exists without its content.
	staged string
	// idx is the open index directory, nil until openIndex succeeds.
	idx *statedir.Dir
	// walked holds the records of this operation's walk; while the index cannot be
	// written (a read-only directory, a foreign entry that cannot be removed) lookups
	// are answered from it instead.
	walked      []record
	indexBroken bool
	// unsealed is set when a release could not remove every file: the index may no
	// longer list one that is still there, so this operation must not seal it.
	unsealed bool
}

// openStore opens and locks <dataDir>/<network>. With create unset a missing
// directory is errNoStore, so DEL, CHECK and GC never create state.
func openStore(dataDir, network string, create bool, log io.Writer) (*store, error) {
	path := filepath.Join(dataDir, network)
	if create {
		if err := statedir.MkdirAll("ipam.dataDir", path, 0o755); err != nil {
			return nil, fmt.Errorf("create data dir: %w", err)
		}
	}
	dir, err := statedir.Open(path)
	if !create && (errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ENOTDIR)) {
		return nil, errNoStore
	}
	if err != nil {
		return nil, fmt.Errorf("open data dir: %w", err)
	}
	s := &store{dir: dir, log: log}
	if s.lock, err = s.lockStore(); err != nil {
		dir.Close()
		return nil, err
	}
	return s, nil
}

// lockStore flock()s the lock file, as the reference does. A lock that is not a
// regular file (a planted symbolic link, a FIFO, a directory) is never opened through:
// under a flock of the directory itself, which serialises every process doing this
// repair, the entry is looked at again, removed if still foreign, and a lock file
// created. When no lock file can be used (a read-only directory without one, a
// directory that cannot be removed), the directory's flock is kept as the lock.
func (s *store) lockStore() (*os.File, error) {
	f, err := s.dir.OpenFile(lockName, unix.O_RDONLY|unix.O_CREAT, 0o600)
	if err == nil {
		return f, s.flock(f)
	}
	if err := s.dir.Lock(); err != nil {
		return nil, fmt.Errorf("lock %s: %w", s.dir.Path(), err)
	}
	// Another process may have repaired it meanwhile: only a verdict reached under the
	// directory's flock may remove the entry.
	f, err = s.dir.OpenFile(lockName, unix.O_RDONLY|unix.O_CREAT, 0o600)
	if statedir.IsForeign(err) {
		fmt.Fprintf(s.log, "host-local: replacing unexpected lock entry: %v\n", err)
		if rerr := s.dir.Remove(lockName); rerr != nil {
			fmt.Fprintf(s.log, "host-local: %v\n", rerr)
		}
		f, err = s.dir.OpenFile(lockName, unix.O_RDONLY|unix.O_CREAT, 0o600)
	} else if err != nil {
		f, err = s.dir.OpenFile(lockName, unix.O_RDONLY, 0) // a read-only directory
	}
	if err != nil {
		fmt.Fprintf(s.log, "host-local: no usable lock file (%v); locking %s itself\n", err, s.dir.Path())
		return nil, nil
	}
	if err := s.flock(f); err != nil {
		return nil, err
	}
	return f, s.dir.Unlock()
}

func (s *store) flock(f *os.File) error {
	if err := statedir.Flock(f, unix.LOCK_EX); err != nil {
		f.Close()
		return fmt.Errorf("lock %s: %w", f.Name(), err)
	}
	return nil
}

// close drops the staged temp file and the lock.
func (s *store) close() {
	s.dropStaged()
	if s.idx != nil {
		s.idx.Close()
	}
	if s.lock != nil {
		s.lock.Close() // closing the only descriptor releases the flock
	}
	s.dir.Close()
}

func (s *store) dropStaged() {
	if s.staged != "" {
		s.current = false
		s.dir.Remove(s.staged)
		s.staged = ""
	}
}

func (s *store) path(a netip.Addr) string { return filepath.Join(s.dir.Path(), a.String()) }

// reserve claims address a for att. It returns false when the address is taken. The
// content is written to a temp file first and hard-linked into place: link(2) fails on
// an existing name like O_EXCL does, and the reservation appears with its content.
// Whatever exists under the address's name, even a dangling link, keeps it taken.
func (s *store) reserve(a netip.Addr, att attachment) (bool, error) {
	s.current = false
	if s.staged == "" {
		name, err := s.dir.WriteTemp(tempPrefix+"reserve-", []byte(att.content()))
		if err != nil {
			return false, fmt.Errorf("write reservation: %w", err)
		}
		s.staged = name
	}
	err := s.dir.Link(s.staged, a.String())
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, fs.ErrExist):
		return false, nil
	case errors.Is(err, syscall.EPERM), errors.Is(err, syscall.EOPNOTSUPP), errors.Is(err, syscall.EXDEV):
		return s.reserveExclusive(a, att) // filesystems without hard links
	}
	return false, fmt.Errorf("reserve %s: %w", a, err)
}

// reserveExclusive is the reference's way: O_EXCL create, then write. A crash between
// the two leaves an empty file, which counts as taken until GC reclaims it.
func (s *store) reserveExclusive(a netip.Addr, att attachment) (bool, error) {
	f, err := s.dir.OpenFile(a.String(), unix.O_RDWR|unix.O_CREAT|unix.O_EXCL, 0o600)
	if errors.Is(err, fs.ErrExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("reserve %s: %w", a, err)
	}
	_, err = f.WriteString(att.content())
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		s.dir.Remove(a.String())
		return false, fmt.Errorf("reserve %s: %w", a, err)
	}
	return true, nil
}

// recordOf is the record of a's reservation from its file's read; false when the file
// has gone. An entry that is not a regular file or cannot be read is reported, and so is
// content that names no attachment: either keeps the address taken until GC.
func (s *store) recordOf(a netip.Addr, data []byte, err error) (record, bool) {
	if errors.Is(err, fs.ErrNotExist) {
		return record{}, false
	}
	if err != nil {
		fmt.Fprintf(s.log, "host-local: %v; the address stays taken until GC\n", err)
		return record{Addr: a}, true
	}
	owner, ok := parseReservation(data)
	if !ok {
		fmt.Fprintf(s.log, "host-local: reservation file %s has unexpected content %q; the address stays taken until GC\n",
			s.path(a), data)
	}
	return record{Addr: a, Owner: owner, Valid: ok}, true
}

// lastReserved returns the address last handed out from range set n, if readable.
func (s *store) lastReserved(n int) netip.Addr {
	data, err := s.dir.ReadFile(lastReservedName+strconv.Itoa(n), 64)
	if err != nil {
		if !errors.Is(err, fs.ErrNotExist) {
			fmt.Fprintf(s.log, "host-local: ignoring %v\n", err)
		}
		return netip.Addr{}
	}
	a, _ := netip.ParseAddr(strings.TrimSpace(string(data))) // garbage parses to no address
	return a.Unmap()
}

// setLastReserved records a for round-robin. It is replaced atomically, never
// truncated, so a crash cannot leave it empty.
func (s *store) setLastReserved(n int, a netip.Addr) error {
	name := lastReservedName + strconv.Itoa(n)
	s.current = false
	tmp, err := s.dir.WriteTemp(tempPrefix+name+"-", []byte(a.String()))
	if err != nil {
		return err
	}
	if err := s.replace(tmp, name); err != nil {
		s.dir.Remove(tmp)
		return fmt.Errorf("replace %s: %w", name, err)
	}
	return nil
}

// replace moves the temp file tmp over name atomically. When name exists the two are
// swapped with renameat2(RENAME_EXCHANGE) and the old entry (now at tmp) removed: a
// plain rename over an existing file makes ext4 flush the new file's data first
// (auto_da_alloc), which costs several times the rest of an ADD, while the swap is as
// atomic (name always exists, with the old or the new content) and skips that flush.
// A directory under name is swapped back and left alone. Without name, or without the
// syscall, it is a plain rename, which replaces a link or FIFO itself, never its target.
func (s *store) replace(tmp, name string) error {
	if err := s.dir.Exchange(tmp, name); err != nil {
		return s.dir.Rename(tmp, name)
	}
	err := s.dir.Unlink(tmp)
	if errors.Is(err, unix.EISDIR) {
		s.dir.Exchange(tmp, name)
	}
	return err
}

// record is one reservation file found by a directory walk.
type record struct {
	Addr  netip.Addr
	Owner attachment
	// Valid is false for empty or garbage content and for entries that are no
	// regular file.
	Valid bool
}

// scan lists the addresses that have an entry in the directory, without reading them.
// With tidy it removes the temp files a crashed operation left behind: the lock is
// held, so none of them is being written.
func (s *store) scan(tidy bool) ([]netip.Addr, error) {
	names, err := s.dir.Names()
	if err != nil {
		return nil, err
	}
	var out []netip.Addr
	for _, n := range names {
		if a, ok := addrName(n); ok {
			out = append(out, a)
		} else if tidy && strings.HasPrefix(n, tempPrefix) && n != s.staged {
			s.current = false
			if err := s.dir.Remove(n); err != nil {
				fmt.Fprintf(s.log, "host-local: %v\n", err)
			}
		}
	}
	return out, nil
}

// addrName recognises a reservation file name: an address in its canonical text form
// (which lock, last_reserved_ip.<n> and our dot-names never are).
func addrName(name string) (netip.Addr, bool) {
	a, err := netip.ParseAddr(name)
	return a, err == nil && a.String() == name
}

// walk reads every reservation file, as the reference does on each call. An entry
// that names no attachment (garbage content, a link, a FIFO, a directory, a file that
// cannot be read) is reported and kept as taken until GC; only a directory that cannot
// be listed fails the walk.
func (s *store) walk() ([]record, error) {
	addrs, err := s.scan(true)
	if err != nil {
		return nil, fmt.Errorf("read data dir: %w", err)
	}
	out := make([]record, 0, len(addrs))
	for _, a := range addrs {
		data, err := s.dir.ReadFile(a.String(), maxReservation)
		if r, ok := s.recordOf(a, data, err); ok {
			out = append(out, r)
		}
	}
	s.walked = out
	return out, nil
}

// indexChange is how the index follows a release: after a walk (the index was not
// fresh) it is rebuilt from kept; else only the entries of the given attachments are set
// to the addresses kept lists for them, an entry left with none removed.
type indexChange struct {
	rebuild bool
	entries map[attachment]bool
	kept    []record
}

// manyFiles is where release starts removing files a few at a time while the index
// follows: for DEL's one address per family goroutines cost more than they overlap.
const manyFiles = 16

// release is how DEL, GC and a failed ADD give addresses back: it removes the files of
// addrs, which the caller found to be ones to remove, and makes the index follow; n is
// how many went. A directory under an address's name that is not ours is reported and
// left. err is the failed removals, after which the index is left unsealed (see seal),
// so the next operation rebuilds it from the files; indexErr is the index's failure.
func (s *store) release(addrs []netip.Addr, ch indexChange) (n int, err, indexErr error) {
	if len(addrs) == 0 && len(ch.entries) == 0 && !ch.rebuild {
		return 0, nil, nil
	}
	s.current = false
	removed := make([]error, len(addrs))
	if len(addrs) < manyFiles {
		for i, a := range addrs {
			removed[i] = s.dir.Remove(a.String())
		}
		indexErr = s.follow(ch)
	} else {
		// Two directories change at once; a crash at any point leaves both unsealed (every
		// change moves a directory's mtime off the stamp), so the next operation rebuilds.
		followed := make(chan error, 1)
		go func() { followed <- s.follow(ch) }()
		inParallel(len(addrs), func(i int) { removed[i] = s.dir.Remove(addrs[i].String()) })
		indexErr = <-followed
	}
	var errs []error
	for i, err := range removed {
		switch {
		case err == nil:
			n++
		case errors.Is(err, unix.ENOTEMPTY), errors.Is(err, unix.EEXIST):
			fmt.Fprintf(s.log, "host-local: gc: leaving %s, a directory that is not ours\n", s.path(addrs[i]))
		default:
			errs = append(errs, fmt.Errorf("release %s: %w", addrs[i], err))
		}
	}
	if len(errs) > 0 {
		s.unsealed = true
	}
	return n, errors.Join(errs...), indexErr
}

func (s *store) follow(ch indexChange) error {
	if ch.rebuild {
		return s.rebuild(ch.kept)
	}
	return s.updateEntries(ch.entries, ch.kept)
}
