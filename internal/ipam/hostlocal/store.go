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

	"github.com/cnikit/cni/internal/skel"
)

// Names inside a network's directory, as the reference plugin uses them.
const (
	lockName         = "lock"
	lastReservedName = "last_reserved_ip."
	// tempPrefix marks our own half-written files; GC removes leftovers of a crash.
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

func (a attachment) String() string {
	if a.IfName == "" {
		return a.ID
	}
	return a.ID + "/" + a.IfName
}

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

// store is one network's directory, locked for the duration of one operation.
type store struct {
	dir  string
	lock *os.File
	log  io.Writer
	// current is true while the index is known to describe the directory: refresh
	// found it fresh or seal stamped it, and nothing changed the directory since.
	current bool
	// staged is a temp file holding this operation's reservation content, hard-linked
	// to each address it reserves so a reservation never exists without its content.
	staged string
}

// openStore opens and flock()s <dataDir>/<network>. With create unset a missing
// directory is errNoStore, so DEL, CHECK and GC never create state.
func openStore(dataDir, network string, create bool, log io.Writer) (*store, error) {
	dir := filepath.Join(dataDir, network)
	if create {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, fmt.Errorf("create data dir: %w", err)
		}
	} else if _, err := os.Stat(dir); errors.Is(err, fs.ErrNotExist) {
		return nil, errNoStore
	}
	f, err := os.OpenFile(filepath.Join(dir, lockName), os.O_RDONLY|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open lock: %w", err)
	}
	for {
		err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX)
		if !errors.Is(err, syscall.EINTR) {
			break
		}
	}
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("lock %s: %w", f.Name(), err)
	}
	return &store{dir: dir, lock: f, log: log}, nil
}

// close drops the staged temp file and the lock.
func (s *store) close() {
	s.dropStaged()
	s.lock.Close() // closing the only descriptor releases the flock
}

func (s *store) dropStaged() {
	if s.staged != "" {
		s.current = false
		os.Remove(s.staged)
		s.staged = ""
	}
}

func (s *store) path(a netip.Addr) string { return filepath.Join(s.dir, a.String()) }

// reserve claims address a for att. It returns false when the address is taken. The
// content is written to a temp file first and hard-linked into place: link(2) fails on
// an existing name like O_EXCL does, and the reservation appears with its content.
func (s *store) reserve(a netip.Addr, att attachment) (bool, error) {
	s.current = false
	if s.staged == "" {
		name, err := s.writeTemp(s.dir, "reserve", []byte(att.content()))
		if err != nil {
			return false, err
		}
		s.staged = name
	}
	err := os.Link(s.staged, s.path(a))
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
	s.current = false
	f, err := os.OpenFile(s.path(a), os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
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
		os.Remove(f.Name())
		return false, fmt.Errorf("reserve %s: %w", a, err)
	}
	return true, nil
}

// owner reads who holds address a; ok is false when the file is missing or garbage.
func (s *store) owner(a netip.Addr) (attachment, bool) {
	data, err := os.ReadFile(s.path(a))
	if err != nil {
		return attachment{}, false
	}
	return parseReservation(data)
}

// release removes a's reservation if att holds it; true when a file was removed.
func (s *store) release(a netip.Addr, att attachment) (bool, error) {
	if got, ok := s.owner(a); !ok || got != att {
		return false, nil
	}
	s.current = false
	if err := os.Remove(s.path(a)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return false, fmt.Errorf("release %s: %w", a, err)
	}
	return true, nil
}

// lastReserved returns the address last handed out from range set n, if readable.
func (s *store) lastReserved(n int) netip.Addr {
	data, err := os.ReadFile(filepath.Join(s.dir, lastReservedName+strconv.Itoa(n)))
	if err != nil {
		return netip.Addr{}
	}
	a, err := netip.ParseAddr(strings.TrimSpace(string(data)))
	if err != nil {
		return netip.Addr{}
	}
	return a.Unmap()
}

// setLastReserved records a for round-robin. It is replaced by rename, never truncated,
// so a crash cannot leave it empty.
func (s *store) setLastReserved(n int, a netip.Addr) error {
	return s.replace(s.dir, lastReservedName+strconv.Itoa(n), []byte(a.String()))
}

// writeTemp writes data to a new temp file in dir and returns its path.
func (s *store) writeTemp(dir, what string, data []byte) (string, error) {
	f, err := os.CreateTemp(dir, tempPrefix+what+"-")
	if err != nil {
		return "", fmt.Errorf("write %s: %w", what, err)
	}
	_, err = f.Write(data)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(f.Name())
		return "", fmt.Errorf("write %s: %w", what, err)
	}
	return f.Name(), nil
}

// replace atomically sets dir/name to data (temp file + rename).
func (s *store) replace(dir, name string, data []byte) error {
	s.current = false
	tmp, err := s.writeTemp(dir, name, data)
	if err != nil {
		return err
	}
	if err := replaceFile(tmp, filepath.Join(dir, name)); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("replace %s: %w", name, err)
	}
	return nil
}

// record is one reservation file found by a directory walk.
type record struct {
	Addr  netip.Addr
	Owner attachment
	// Valid is false for empty or garbage content.
	Valid bool
}

// reservedAddrs lists the addresses that have a reservation file, without reading them.
func (s *store) reservedAddrs() ([]netip.Addr, error) {
	f, err := os.Open(s.dir)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	names, err := f.Readdirnames(-1)
	if err != nil {
		return nil, err
	}
	var out []netip.Addr
	for _, n := range names {
		if a, ok := addrName(n); ok {
			out = append(out, a)
		}
	}
	return out, nil
}

// addrName recognises a reservation file name: an address in its canonical text form.
func addrName(name string) (netip.Addr, bool) {
	if name == "" || name[0] == '.' || strings.HasPrefix(name, lastReservedName) || name == lockName {
		return netip.Addr{}, false
	}
	a, err := netip.ParseAddr(name)
	if err != nil || a.String() != name {
		return netip.Addr{}, false
	}
	return a, true
}

// walk reads every reservation file, as the reference does on each call. Files with
// content naming no attachment are reported; they stay taken until GC.
func (s *store) walk() ([]record, error) {
	addrs, err := s.reservedAddrs()
	if err != nil {
		return nil, fmt.Errorf("read data dir: %w", err)
	}
	out := make([]record, 0, len(addrs))
	for _, a := range addrs {
		data, err := os.ReadFile(s.path(a))
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("read reservation %s: %w", a, err)
		}
		owner, ok := parseReservation(data)
		if !ok {
			fmt.Fprintf(s.log, "host-local: reservation file %s has unexpected content %q; the address stays taken until GC\n",
				s.path(a), data)
		}
		out = append(out, record{Addr: a, Owner: owner, Valid: ok})
	}
	return out, nil
}
