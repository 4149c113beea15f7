package hostlocal

import (
	"bytes"
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
	// indexDirName holds one entry file per attachment. The reference plugin walks it
	// too (its walk is recursive) but no entry's content can equal "<id>\r\n<ifname>" or
	// "<id>": every entry starts with entryHeader, and '#' is not allowed in an id.
	indexDirName = ".cni-index"
	entryHeader  = "# cni host-local index v1\n"
	// stateName records the stamp this index was sealed with (see seal).
	stateName   = "state"
	stateHeader = "# cni host-local state v1\n"
)

func (s *store) indexDir() string { return filepath.Join(s.dir, indexDirName) }

// entryName is the entry file's name for att: "<id>:<ifname>" (':' is allowed in
// neither), or a hash when that would be too long for a file name.
func entryName(att attachment) string {
	name := att.ID + ":" + att.IfName
	if len(name) <= 200 {
		return name
	}
	sum := sha256.Sum256([]byte(name))
	return "h-" + hex.EncodeToString(sum[:])
}

func entryContent(att attachment, addrs []netip.Addr) []byte {
	var b bytes.Buffer
	b.WriteString(entryHeader)
	fmt.Fprintf(&b, "%s\t%s\n", att.ID, att.IfName)
	for _, a := range addrs {
		b.WriteString(a.String())
		b.WriteByte('\n')
	}
	return b.Bytes()
}

// parseEntry decodes an entry file; ok is false for anything not written by entryContent.
func parseEntry(data []byte) (attachment, []netip.Addr, bool) {
	rest, ok := bytes.CutPrefix(data, []byte(entryHeader))
	if !ok {
		return attachment{}, nil, false
	}
	lines := strings.Split(strings.TrimSuffix(string(rest), "\n"), "\n")
	id, ifname, ok := strings.Cut(lines[0], "\t")
	if !ok {
		return attachment{}, nil, false
	}
	var addrs []netip.Addr
	for _, l := range lines[1:] {
		a, err := netip.ParseAddr(l)
		if err != nil {
			return attachment{}, nil, false
		}
		addrs = append(addrs, a)
	}
	return attachment{ID: id, IfName: ifname}, addrs, true
}

// fresh reports whether the index still describes the directory: the directory's
// mtime must be exactly the stamp seal() set. Any change to the directory by anyone
// else (the reference plugin creating or removing a reservation) or by a crashed
// operation of ours sets the mtime to the current time, which is not the stamp.
func (s *store) fresh() bool {
	data, err := os.ReadFile(filepath.Join(s.indexDir(), stateName))
	if err != nil {
		return false
	}
	stamp, ok := parseState(data)
	if !ok {
		return false
	}
	st, err := os.Stat(s.dir)
	return err == nil && st.ModTime().Equal(stamp)
}

func parseState(data []byte) (time.Time, bool) {
	rest, ok := bytes.CutPrefix(data, []byte(stateHeader))
	if !ok {
		return time.Time{}, false
	}
	sec, nsec, ok := strings.Cut(strings.TrimSpace(string(rest)), " ")
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
	content := fmt.Sprintf("%s%d %d\n", stateHeader, stamp.Unix(), stamp.Nanosecond())
	return s.replace(s.indexDir(), stateName, []byte(content))
}

// lookup returns the addresses the index lists for att that att really holds on disk.
func (s *store) lookup(att attachment) []netip.Addr {
	data, err := os.ReadFile(filepath.Join(s.indexDir(), entryName(att)))
	if err != nil {
		return nil
	}
	got, addrs, ok := parseEntry(data)
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
	return s.replace(s.indexDir(), name, entryContent(att, addrs))
}

// rebuild makes the index match the given walk: entries that differ are rewritten,
// entries of attachments without reservations are removed.
func (s *store) rebuild(recs []record) error {
	want := map[string][]byte{}
	byOwner := map[attachment][]netip.Addr{}
	for _, r := range recs {
		if r.Valid {
			byOwner[r.Owner] = append(byOwner[r.Owner], r.Addr)
		}
	}
	for att, addrs := range byOwner {
		slices.SortFunc(addrs, netip.Addr.Compare)
		want[entryName(att)] = entryContent(att, addrs)
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
		content, keep := want[name]
		if keep {
			if cur, err := os.ReadFile(path); err == nil && bytes.Equal(cur, content) {
				delete(want, name)
			}
			continue
		}
		if err := os.RemoveAll(path); err != nil {
			return fmt.Errorf("index: %w", err)
		}
	}
	for name, content := range want {
		if err := s.replace(s.indexDir(), name, content); err != nil {
			return fmt.Errorf("index: %w", err)
		}
	}
	return nil
}

// refresh rebuilds the index from a walk unless it is known to be current.
func (s *store) refresh() error {
	if s.fresh() {
		return nil
	}
	recs, err := s.walk()
	if err != nil {
		return err
	}
	return s.rebuild(recs)
}
