// Package leasefile keeps the dhcp daemon's leases on disk, one JSON file per lease, so
// that a restarted daemon resumes renewing every lease it held and can still release it
// when the runtime calls DEL. The reference daemon keeps leases only in memory and
// forgets them on restart, draining the server's pool.
//
// A file is replaced atomically (a synced temp file in the same directory, then
// rename), named by a digest of the client id, so no runtime-supplied text ever reaches
// a path, and read through statedir: regular files only, never through a symlink, never
// blocking on a FIFO, bounded in size.
package leasefile

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"syscall"
	"time"

	"github.com/cnikit/cni/internal/core/statedir"
	"github.com/cnikit/cni/internal/ipam/dhcp/linkid"
)

// DefaultDir is where the daemon keeps its leases.
const DefaultDir = "/var/lib/cni/dhcp"

const (
	suffix     = ".lease" // <64 hex>.lease: 70 bytes
	tempPrefix = "."      // .<16 hex>: shorter than the final name
	maxSize    = 64 << 10 // a lease file is a few KB at most; anything larger is not ours
)

// Family names a record's protocol: DHCPv4 records, the only ones of earlier versions,
// leave it out.
type Family string

const (
	DHCPv4 Family = ""
	DHCPv6 Family = "dhcpv6"
)

// String is the protocol's name, for logs and messages.
func (f Family) String() string {
	if f == DHCPv6 {
		return "DHCPv6"
	}
	return "DHCPv4"
}

// Key is what names a lease in the daemon's table and on disk: the client id for
// DHCPv4 (so the files of earlier versions keep their names), the client id under a
// prefix no client id has for DHCPv6.
func Key(f Family, clientID string) string {
	if f == DHCPv4 {
		return clientID
	}
	return string(f) + "\x00" + clientID
}

// Record is one lease as the daemon keeps it.
type Record struct {
	Family      Family `json:"family,omitempty"`
	ClientID    string `json:"clientID"`
	ContainerID string `json:"containerID"`
	Network     string `json:"network"`
	IfName      string `json:"ifName"`
	// Netns is the path the runtime gave, made absolute, before the daemon's host prefix.
	Netns string `json:"netns"`
	// ID is the interface the lease was bound on (its fields are the record's own
	// keys: a record of an earlier version has hwAddr alone).
	linkid.ID
	// ACK is the last DHCPACK (DHCPv6: REPLY) as it came on the wire; Bound is when it
	// came.
	ACK   []byte    `json:"ack"`
	Bound time.Time `json:"bound"`
	// Provide and Request are the options sent with every request for this lease.
	Provide  []Option `json:"provide,omitempty"`
	Request  []int    `json:"request,omitempty"`
	Priority int      `json:"priority,omitempty"`
}

// Option is one DHCP option the client sends.
type Option struct {
	Code  int    `json:"code"`
	Value []byte `json:"value"`
}

// Store is a directory of lease files.
type Store struct{ dir *statedir.Dir }

// Open creates dir (mode 0700: leases name containers) if needed and opens it. A
// directory that another user owns or that group or others may write is refused: a
// record planted there would make the daemon act in the namespace it names.
func Open(dir string) (*Store, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("lease dir: %w", err)
	}
	d, err := statedir.Open(dir)
	if err != nil {
		return nil, fmt.Errorf("lease dir: %w", err)
	}
	if err := private(d); err != nil {
		d.Close()
		return nil, fmt.Errorf("lease dir %s: %w", dir, err)
	}
	return &Store{dir: d}, nil
}

// ErrNotPrivate says the lease dir is open to other users.
var ErrNotPrivate = errors.New("others may write here")

// private checks that only the daemon's own user can write in the open directory.
func private(d *statedir.Dir) error {
	fi, err := d.Stat()
	if err != nil {
		return err
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return errors.New("no owner to check")
	}
	if uid := uint32(os.Geteuid()); st.Uid != uid {
		return fmt.Errorf("%w: owned by uid %d, not the daemon's %d (chown it, or remove it and let the daemon create it)", ErrNotPrivate, st.Uid, uid)
	}
	if perm := fi.Mode().Perm(); perm&0o022 != 0 {
		return fmt.Errorf("%w: mode %04o (chmod go-w it, or remove it and let the daemon create it)", ErrNotPrivate, perm)
	}
	return nil
}

// Close releases the directory.
func (s *Store) Close() error { return s.dir.Close() }

// Key is the record's key (see Key).
func (r *Record) Key() string { return Key(r.Family, r.ClientID) }

// FileName is the file the lease of a key (see Key) lives in.
func FileName(key string) string {
	sum := sha256.Sum256([]byte(key))
	return hex.EncodeToString(sum[:]) + suffix
}

// Save writes r, replacing any earlier record of its client id. The temp file is
// synced before the rename, so a crash leaves the old record or the new one, whole.
func (s *Store) Save(r *Record) error {
	data, err := json.Marshal(r)
	if err != nil {
		return err
	}
	tmp, err := s.writeTemp(data)
	if err != nil {
		return fmt.Errorf("save lease %s: %w", r.ClientID, err)
	}
	if err := s.dir.Rename(tmp, FileName(r.Key())); err != nil {
		_ = s.dir.Unlink(tmp)
		return fmt.Errorf("save lease %s: %w", r.ClientID, err)
	}
	return nil
}

// writeTemp writes data to a synced temp file (".<16 hex>", shorter than a lease
// file's name) and returns its name.
func (s *Store) writeTemp(data []byte) (string, error) {
	f, name, err := s.dir.CreateTemp(tempPrefix)
	if err != nil {
		return "", err
	}
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		_ = s.dir.Unlink(name)
		return "", err
	}
	return name, nil
}

// Remove deletes the record of a key; a missing one is no error.
func (s *Store) Remove(key string) error {
	if err := s.dir.Unlink(FileName(key)); err != nil {
		return fmt.Errorf("remove lease %q: %w", key, err)
	}
	return nil
}

// Load reads every record. A file that cannot be read or decoded, or is no regular
// file (a symlink, a FIFO), is reported and skipped, so one damaged or planted file
// never hides the others nor blocks the daemon's start; stale temp files are removed.
func (s *Store) Load() ([]*Record, []error) {
	names, err := s.dir.Names()
	if err != nil {
		return nil, []error{fmt.Errorf("lease dir: %w", err)}
	}
	var recs []*Record
	var errs []error
	for _, name := range names {
		if strings.HasPrefix(name, tempPrefix) {
			_ = s.dir.Unlink(name) // left by a crash between write and rename
			continue
		}
		if !strings.HasSuffix(name, suffix) {
			continue
		}
		data, err := s.dir.ReadFile(name, maxSize)
		var r *Record
		if err == nil {
			r, err = Decode(data, name)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("lease file %s: %w", name, err))
			continue
		}
		recs = append(recs, r)
	}
	return recs, errs
}

// Decode parses a lease file's content and checks that it belongs under name (or any
// name, when name is empty).
func Decode(data []byte, name string) (*Record, error) {
	r := new(Record)
	if err := json.Unmarshal(data, r); err != nil {
		return nil, err
	}
	if r.ClientID == "" || len(r.ClientID) > 254 {
		return nil, errors.New("bad client id")
	}
	if r.Family != DHCPv4 && r.Family != DHCPv6 {
		return nil, fmt.Errorf("unknown family %q", string(r.Family))
	}
	if name != "" && FileName(r.Key()) != name {
		return nil, errors.New("client id does not match the file name")
	}
	if len(r.ACK) == 0 {
		return nil, errors.New("no DHCPACK")
	}
	return r, nil
}
