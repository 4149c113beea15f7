package hostlocal

import (
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/cnikit/cni/internal/sha2"
)

const (
	// indexDirName holds one entry per attachment. Entries are symbolic links used as
	// small atomic records: the target text is the record. A symlink is created and
	// replaced (rename) without any data block, which on ext4 avoids the forced flush a
	// rename over a regular file triggers, and it is read with a single readlink. The reference plugin walks this directory too (its walk is recursive),
	// but reading a link follows it to a name that never exists, which it skips; nothing
	// here can be mistaken for "<id>\r\n<ifname>" or "<id>".
	indexDirName = ".cni-index"
	recordPrefix = "cni-index-v1|"
)

func (s *store) indexDir() string { return filepath.Join(s.dir, indexDirName) }

// entryName is the entry's name for att: "<id>:<ifname>" (':' is allowed in neither),
// or a hash when that would be too long for a file name.
func entryName(att attachment) string {
	name := att.ID + ":" + att.IfName
	if len(name) <= 200 {
		return name
	}
	sum := sha2.Sum256([]byte(name))
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

// putRecord atomically sets the record dir/name. A new name is one symlink(2), which
// creates it complete; an existing one is replaced by symlink + rename.
func putRecord(dir, name, rec string) error {
	err := os.Symlink(rec, filepath.Join(dir, name))
	if !errors.Is(err, fs.ErrExist) {
		return err
	}
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

// stampMark is the sub-millisecond part of every seal stamp. A kernel-made timestamp
// ends in it with odds of one in a million, so a directory whose mtime was last set by
// a create, rename or unlink is not taken for sealed.
const stampMark = 424_242

// fresh reports whether the index still describes the directory: the network
// directory and the index directory must both carry the same seal stamp as mtime.
// Any change to the network directory by anyone else (the reference plugin reserving
// or releasing, an operator deleting a file) or by an operation of ours that crashed
// before sealing moves its mtime to the kernel's current time, which is not a stamp.
func (s *store) fresh() bool {
	top, err := os.Stat(s.dir)
	if err != nil {
		return false
	}
	idx, err := os.Stat(s.indexDir())
	if err != nil {
		return false
	}
	stamp := top.ModTime()
	return stamp.Nanosecond()%1_000_000 == stampMark && idx.ModTime().Equal(stamp)
}

// seal stamps both directories after an operation changed them: the stamp is the
// current second plus random milliseconds plus stampMark, so a later kernel-made mtime
// (the reference plugin touching the directory, even within the same clock tick)
// differs from it. The network directory is stamped first: a crash between the two
// leaves them different, and the next operation rebuilds. A filesystem that cannot
// store the stamp exactly never looks sealed, so every operation there falls back to
// the walk; so does a directory we may not stamp.
func (s *store) seal() error {
	s.dropStaged() // removing it changes the directory, so it must happen first
	if s.current {
		return nil
	}
	ns := rand.Int64N(1000)*1_000_000 + stampMark
	stamp := time.Unix(time.Now().Unix(), ns)
	if err := os.Chtimes(s.dir, time.Time{}, stamp); err != nil {
		return nil
	}
	if err := os.Chtimes(s.indexDir(), time.Time{}, stamp); err != nil {
		return nil
	}
	s.current = s.fresh()
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
	s.current = false
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
	s.current = false
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
