// Package leasefile keeps the dhcp daemon's leases on disk, one JSON file per lease, so
// that a restarted daemon resumes renewing every lease it held and can still release it
// when the runtime calls DEL. The reference daemon keeps leases only in memory and
// forgets them on restart, draining the server's pool.
//
// A file is replaced atomically (a temp file in the same directory, then rename), opened
// with O_NOFOLLOW, and named by a digest of the client id, so no runtime-supplied text
// ever reaches a path.
package leasefile

import (
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"crypto/sha256"
)

// DefaultDir is where the daemon keeps its leases.
const DefaultDir = "/var/lib/cni/dhcp"

const (
	suffix     = ".lease" // <64 hex>.lease: 70 bytes
	tempPrefix = "."      // .<64 hex>.<n>: never longer than the final name (see tempName)
	maxSize    = 64 << 10 // a lease file is a few KB at most; anything larger is not ours
)

// Record is one lease as the daemon keeps it.
type Record struct {
	ClientID    string `json:"clientID"`
	ContainerID string `json:"containerID"`
	Network     string `json:"network"`
	IfName      string `json:"ifName"`
	// Netns is the path the runtime gave, made absolute, before the daemon's host prefix.
	Netns  string `json:"netns"`
	HWAddr string `json:"hwAddr"`
	// ACK is the last DHCPACK as it came on the wire; Bound is when it came.
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
type Store struct{ dir string }

// Open creates dir (mode 0700: leases name containers) if needed.
func Open(dir string) (*Store, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("lease dir: %w", err)
	}
	return &Store{dir: dir}, nil
}

// Dir returns the store's directory.
func (s *Store) Dir() string { return s.dir }

// FileName is the file a client id's lease lives in.
func FileName(clientID string) string {
	sum := sha256.Sum256([]byte(clientID))
	return hex.EncodeToString(sum[:]) + suffix
}

// Save writes r, replacing any earlier record of its client id.
func (s *Store) Save(r *Record) error {
	data, err := json.Marshal(r)
	if err != nil {
		return err
	}
	name := FileName(r.ClientID)
	tmp, err := s.writeTemp(name, data)
	if err != nil {
		return fmt.Errorf("save lease %s: %w", r.ClientID, err)
	}
	if err := os.Rename(tmp, filepath.Join(s.dir, name)); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("save lease %s: %w", r.ClientID, err)
	}
	return nil
}

// tempName is ".<digest>.<n>": no longer than the final name for any n below 10^4.
func tempName(final string, n int) string {
	return tempPrefix + strings.TrimSuffix(final, suffix) + "." + strconv.Itoa(n)
}

func (s *Store) writeTemp(final string, data []byte) (string, error) {
	for n := 0; n < 10; n++ {
		path := filepath.Join(s.dir, tempName(final, os.Getpid()%1000*10+n))
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW, 0o600)
		if errors.Is(err, fs.ErrExist) {
			continue
		}
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
			os.Remove(path)
			return "", err
		}
		return path, nil
	}
	return "", errors.New("no free temp name")
}

// Remove deletes the record of clientID; a missing one is no error.
func (s *Store) Remove(clientID string) error {
	err := os.Remove(filepath.Join(s.dir, FileName(clientID)))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("remove lease %s: %w", clientID, err)
	}
	return nil
}

// Load reads every record. A file that cannot be read or decoded is reported and
// skipped, so one damaged file never hides the others; stale temp files are removed.
func (s *Store) Load() ([]*Record, []error) {
	entries, err := os.ReadDir(s.dir)
	if err != nil {
		return nil, []error{fmt.Errorf("lease dir: %w", err)}
	}
	var recs []*Record
	var errs []error
	for _, e := range entries {
		name := e.Name()
		if strings.HasPrefix(name, tempPrefix) {
			os.Remove(filepath.Join(s.dir, name)) // left by a crash between write and rename
			continue
		}
		if !strings.HasSuffix(name, suffix) {
			continue
		}
		r, err := s.read(name)
		if err != nil {
			errs = append(errs, fmt.Errorf("lease file %s: %w", name, err))
			continue
		}
		recs = append(recs, r)
	}
	return recs, errs
}

func (s *Store) read(name string) (*Record, error) {
	f, err := os.OpenFile(filepath.Join(s.dir, name), os.O_RDONLY|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxSize+1))
	if err != nil {
		return nil, err
	}
	if len(data) > maxSize {
		return nil, errors.New("too large")
	}
	return Decode(data, name)
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
	if name != "" && FileName(r.ClientID) != name {
		return nil, errors.New("client id does not match the file name")
	}
	if len(r.ACK) == 0 {
		return nil, errors.New("no DHCPACK")
	}
	return r, nil
}
