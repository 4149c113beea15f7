package hostlocal

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

const (
	// indexDirName holds one entry per attachment. Entries and the state are symbolic
	// links used as small atomic records: the target text is the record. A symlink is
	// created and replaced (rename) without any data block, which on ext4 avoids the
	// forced flush a rename over a regular file triggers, and it is read with a single
	// readlink. The reference plugin walks this directory too (its walk is recursive),
	// but reading a link follows it to a name that never exists, which it skips; nothing
	// here can be mistaken for "<id>\r\n<ifname>" or "<id>".
	indexDirName = ".cni-index"
	recordPrefix = "cni-index-v1|"
	// stateName records the stamp this index was sealed with (see seal).
	stateName = "state"
)

func (s *store) indexDir() string { return filepath.Join(s.dir, indexDirName) }

// entryName is the entry's name for att: "<id>:<ifname>" (':' is allowed in neither),
// or a hash when that would be too long for a file name.
func entryName(att attachment) string {
	name := att.ID + ":" + att.IfName
	if len(name) <= 200 {
		return name
	}
	sum := sha256.Sum256([]byte(name))
	return "h-" + hex.EncodeToString(sum[:])
}

// entryRecord is "cni-index-v1|<addr>,<addr>|<id>|<ifname>"; ifname goes last as the
// only part that may contain '|'.
func entryRecord(att attachment, addrs []netip.Addr) string {
	var b strings.Builder
	b.WriteString(recordPrefix)
	for i, a := range addrs {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(a.String())
	}
	b.WriteString("|" + att.ID + "|" + att.IfName)
	return b.String()
}

// parseEntry decodes an entry record; ok is false for anything entryRecord did not write.
func parseEntry(rec string) (attachment, []netip.Addr, bool) {
	rest, ok := strings.CutPrefix(rec, recordPrefix)
	if !ok {
		return attachment{}, nil, false
	}
	list, rest, ok1 := strings.Cut(rest, "|")
	id, ifname, ok2 := strings.Cut(rest, "|")
	if !ok1 || !ok2 {
		return attachment{}, nil, false
	}
	var addrs []netip.Addr
	for _, t := range strings.Split(list, ",") {
		a, err := netip.ParseAddr(t)
		if err != nil {
			return attachment{}, nil, false
		}
		addrs = append(addrs, a)
	}
	return attachment{ID: id, IfName: ifname}, addrs, true
}

// putRecord atomically sets the record dir/name (symlink + rename).
func putRecord(dir, name, rec string) error {
	tmp := filepath.Join(dir, fmt.Sprintf("%s%s-%d", tempPrefix, name, rand.Uint64()))
	if err := os.Symlink(rec, tmp); err != nil {
		return err
	}
	if err := os.Rename(tmp, filepath.Join(dir, name)); err != nil {
		os.Remove(tmp)
		return err
	}
	return nil
}

// fresh reports whether the index still describes the directory: the directory's
// mtime must be exactly the stamp seal() set. Any change to the directory by anyone
// else (the reference plugin creating or removing a reservation) or by a crashed
// operation of ours sets the mtime to the current time, which is not the stamp.
func (s *store) fresh() bool {
	rec, err := os.Readlink(filepath.Join(s.indexDir(), stateName))
	if err != nil {
		return false
	}
	stamp, ok := parseState(rec)
	if !ok {
		return false
	}
	st, err := os.Stat(s.dir)
	return err == nil && st.ModTime().Equal(stamp)
}

func parseState(rec string) (time.Time, bool) {
	rest, ok := strings.CutPrefix(rec, recordPrefix)
	if !ok {
		return time.Time{}, false
	}
	sec, nsec, ok := strings.Cut(rest, ".")
	if !ok {
		return time.Time{}, false
	}
	s, err1 := strconv.ParseInt(sec, 10, 64)
	n, err2 := strconv.ParseInt(nsec, 10, 64)
	if err1 != nil || err2 != nil {
		return time.Time{}, false
	}
	return time.Unix(s, n), true
}

// seal stamps the directory after an operation changed it: its mtime is set to the
// current second with random nanoseconds (a value a kernel-made timestamp matches
// with odds of one in a billion), read back, and only then recorded in the state file,
// which lives in the index directory so writing it leaves the stamp intact. A crash
// before the state is written leaves the old stamp recorded, which no longer matches:
// the next operation rebuilds. A filesystem that cannot store the stamp exactly gets no
// state file, so every operation falls back to the walk.
func (s *store) seal() error {
	s.dropStaged() // removing it changes the directory, so it must happen first
	if s.current {
		return nil
	}
	stamp := time.Unix(time.Now().Unix(), rand.Int64N(int64(time.Second)))
	statePath := filepath.Join(s.indexDir(), stateName)
	if err := os.Chtimes(s.dir, time.Time{}, stamp); err != nil {
		os.Remove(statePath)
		return nil // not our directory to stamp; correctness stays with the walk
	}
	st, err := os.Stat(s.dir)
	if err != nil || !st.ModTime().Equal(stamp) {
		os.Remove(statePath)
		return nil
	}
	if err := putRecord(s.indexDir(), stateName, fmt.Sprintf("%s%d.%09d", recordPrefix, stamp.Unix(), stamp.Nanosecond())); err != nil {
		return fmt.Errorf("index: %w", err)
	}
	s.current = true
	return nil
}

// lookup returns the addresses the index lists for att that att really holds on disk.
func (s *store) lookup(att attachment) []netip.Addr {
	rec, err := os.Readlink(filepath.Join(s.indexDir(), entryName(att)))
	if err != nil {
		return nil
	}
	got, addrs, ok := parseEntry(rec)
	if !ok || got != att {
		return nil
	}
	held := addrs[:0]
	for _, a := range addrs {
		if owner, ok := s.owner(a); ok && owner == att {
			held = append(held, a)
		}
	}
	return held
}

// putEntry records att's addresses; none removes the entry.
func (s *store) putEntry(att attachment, addrs []netip.Addr) error {
	name := entryName(att)
	if len(addrs) == 0 {
		err := os.Remove(filepath.Join(s.indexDir(), name))
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("index: %w", err)
		}
		return nil
	}
	if err := os.MkdirAll(s.indexDir(), 0o755); err != nil {
		return fmt.Errorf("index: %w", err)
	}
	if err := putRecord(s.indexDir(), name, entryRecord(att, addrs)); err != nil {
		return fmt.Errorf("index: %w", err)
	}
	return nil
}

// rebuild makes the index match the given walk: entries that differ are rewritten,
// entries of attachments without reservations are removed.
func (s *store) rebuild(recs []record) error {
	s.current = false
	want := map[string]string{}
	byOwner := map[attachment][]netip.Addr{}
	for _, r := range recs {
		if r.Valid {
			byOwner[r.Owner] = append(byOwner[r.Owner], r.Addr)
		}
	}
	for att, addrs := range byOwner {
		slices.SortFunc(addrs, netip.Addr.Compare)
		want[entryName(att)] = entryRecord(att, addrs)
	}
	if err := os.MkdirAll(s.indexDir(), 0o755); err != nil {
		return fmt.Errorf("index: %w", err)
	}
	have, err := os.ReadDir(s.indexDir())
	if err != nil {
		return fmt.Errorf("index: %w", err)
	}
	for _, e := range have {
		name := e.Name()
		if name == stateName {
			continue
		}
		path := filepath.Join(s.indexDir(), name)
		rec, keep := want[name]
		if keep {
			if cur, err := os.Readlink(path); err == nil && cur == rec {
				delete(want, name)
			}
			continue
		}
		if err := os.RemoveAll(path); err != nil {
			return fmt.Errorf("index: %w", err)
		}
	}
	for name, rec := range want {
		if err := putRecord(s.indexDir(), name, rec); err != nil {
			return fmt.Errorf("index: %w", err)
		}
	}
	return nil
}

// refresh rebuilds the index from a walk unless it is known to be current.
func (s *store) refresh() error {
	if s.fresh() {
		s.current = true
		return nil
	}
	recs, err := s.walk()
	if err != nil {
		return err
	}
	return s.rebuild(recs)
}
