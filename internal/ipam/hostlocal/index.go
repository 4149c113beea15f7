package hostlocal

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"math/rand/v2"
	"net/netip"
	"slices"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/cnikit/cni/internal/core/statedir"
)

const (
	// indexDirName holds one entry per attachment. Entries are symbolic links used as
	// small atomic records: the target text is the record. A symlink is created and
	// replaced (rename) without any data block, which on ext4 avoids the forced flush a
	// rename over a regular file triggers, and it is read with a single readlink. The
	// reference plugin walks this directory too (its walk is recursive), but reading a link follows it to a name that never exists, which it skips; nothing
	// here can be mistaken for "<id>\r\n<ifname>" or "<id>".
	indexDirName = ".cni-index"
	recordPrefix = "cni-index-v1|"
)

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
	for t := range strings.SplitSeq(list, ",") {
		a, err := netip.ParseAddr(t)
		if err != nil {
			return attachment{}, nil, false
		}
		addrs = append(addrs, a)
	}
	return attachment{ID: id, IfName: ifname}, addrs, true
}

// putRecord atomically sets the record name in the index. A new name is one
// symlink(2), which creates it complete; an existing one is replaced by symlink +
// rename. A directory under the name is not ours and is removed first.
func putRecord(idx *statedir.Dir, name, rec string) error {
	err := idx.Symlink(rec, name)
	if !errors.Is(err, fs.ErrExist) {
		return err
	}
	tmp := statedir.TempName(tempPrefix)
	if err := idx.Symlink(rec, tmp); err != nil {
		return err
	}
	err = idx.Rename(tmp, name)
	if errors.Is(err, unix.EISDIR) {
		if err = idx.RemoveAll(name); err == nil {
			err = idx.Rename(tmp, name)
		}
	}
	if err != nil {
		idx.Unlink(tmp)
	}
	return err
}

// stampMark is the sub-millisecond part of every seal stamp. A kernel-made timestamp
// ends in it with odds of one in a million, so a directory whose mtime was last set by
// a create, rename or unlink is not taken for sealed.
const stampMark = 424_242

// openIndex opens the index directory, creating it when create is set. Anything else
// under its name (a planted symbolic link, a stray file) is not followed: with create
// set it is removed, the link itself and never its target, and the directory made.
func (s *store) openIndex(create bool) error {
	if s.idx != nil {
		return nil
	}
	idx, err := s.dir.Sub(indexDirName, create, 0o755)
	if err != nil && create && statedir.IsForeign(err) {
		fmt.Fprintf(s.log, "host-local: replacing unexpected index entry: %v\n", err)
		if rerr := s.dir.Remove(indexDirName); rerr != nil {
			return rerr
		}
		idx, err = s.dir.Sub(indexDirName, create, 0o755)
	}
	if err != nil {
		return err
	}
	s.idx = idx
	return nil
}

// fresh reports whether the index still describes the directory: the network
// directory and the index directory must both carry the same seal stamp as mtime.
// Any change to the network directory by anyone else (the reference plugin reserving
// or releasing, an operator deleting a file) or by an operation of ours that crashed
// before sealing moves its mtime to the kernel's current time, which is not a stamp.
func (s *store) fresh() bool {
	stamp, err := s.dir.ModTime()
	if err != nil || stamp.Nanosecond()%1_000_000 != stampMark {
		return false
	}
	if err := s.openIndex(false); err != nil {
		return false
	}
	idx, err := s.idx.ModTime()
	return err == nil && idx.Equal(stamp)
}

// seal stamps both directories after an operation changed them: the stamp is the
// current second plus random milliseconds plus stampMark, so a later kernel-made mtime
// (the reference plugin touching the directory, even within the same clock tick)
// differs from it. The network directory is stamped first: a crash between the two
// leaves them different, and the next operation rebuilds. A filesystem that cannot
// store the stamp exactly never looks sealed, so every operation there falls back to
// the walk; so does a directory we may not stamp, an index we could not write, and one
// that a failed release left behind (see release).
func (s *store) seal() {
	s.dropStaged() // removing it changes the directory, so it must happen first
	if s.current || s.indexBroken || s.unsealed || s.idx == nil {
		return
	}
	ns := rand.Int64N(1000)*1_000_000 + stampMark
	stamp := time.Unix(time.Now().Unix(), ns)
	if s.dir.SetModTime(stamp) != nil || s.idx.SetModTime(stamp) != nil {
		return
	}
	s.current = s.fresh()
}

// lookup returns the addresses the index lists for att that att really holds on disk,
// and whether the index has an entry for att at all. While the index is broken the
// answer comes from this operation's walk.
func (s *store) lookup(att attachment) (held []netip.Addr, entry bool) {
	if s.indexBroken || s.idx == nil {
		for _, r := range s.walked {
			if r.Valid && r.Owner == att {
				held = append(held, r.Addr)
			}
		}
		return held, false
	}
	rec, err := s.idx.Readlink(entryName(att))
	if err != nil {
		return nil, !errors.Is(err, fs.ErrNotExist)
	}
	got, addrs, ok := parseEntry(rec)
	if !ok || got != att {
		return nil, true
	}
	for _, a := range addrs {
		// Only a readable file naming att confirms the index; anything else holds nothing of att's.
		if data, err := s.dir.ReadFile(a.String(), maxReservation); err == nil {
			if owner, ok := parseReservation(data); ok && owner == att {
				held = append(held, a)
			}
		}
	}
	return held, true
}

// putEntry records att's addresses after an ADD (a release changes entries through
// indexChange). While the index is broken there is nothing to update: it stays
// unsealed and the next operation rebuilds it.
func (s *store) putEntry(att attachment, addrs []netip.Addr) error {
	s.current = false
	if s.indexBroken {
		return nil
	}
	if err := s.openIndex(true); err != nil {
		return fmt.Errorf("index: %w", err)
	}
	return s.writeEntry(att, addrs)
}

// writeEntry sets att's entry in the open index to addrs, or removes it for none. It
// changes nothing else of the store, so several may run at once.
func (s *store) writeEntry(att attachment, addrs []netip.Addr) error {
	name := entryName(att)
	var err error
	if len(addrs) == 0 {
		err = s.idx.RemoveAll(name)
	} else {
		err = putRecord(s.idx, name, entryRecord(att, addrs))
	}
	if err != nil {
		return fmt.Errorf("index: %w", err)
	}
	return nil
}

// rebuild makes the index match the given walk: entries that differ are rewritten,
// everything else in the index directory (records of attachments without
// reservations, temp files, anything not ours) is removed without following links.
// Only a record that cannot be written is an error: leftovers that cannot be removed
// are reported and do not make the index wrong.
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
	if err := s.openIndex(true); err != nil {
		return fmt.Errorf("index: %w", err)
	}
	have, err := s.idx.Entries()
	if err != nil {
		return fmt.Errorf("index: %w", err)
	}
	for _, e := range have {
		name := e.Name()
		if rec, keep := want[name]; keep {
			if e.Type() == fs.ModeSymlink {
				if cur, err := s.idx.Readlink(name); err == nil && cur == rec {
					delete(want, name)
				}
			}
			continue // putRecord replaces it
		}
		if err := s.idx.RemoveAll(name); err != nil {
			fmt.Fprintf(s.log, "host-local: index: %v\n", err)
		}
	}
	var errs []error
	for name, rec := range want {
		errs = append(errs, putRecord(s.idx, name, rec))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("index: %w", err)
	}
	return nil
}

// refresh rebuilds the index from a walk unless it is known to be current. An index
// that cannot be rebuilt is not fatal: this operation answers from its walk.
func (s *store) refresh() error {
	if s.fresh() {
		s.current = true
		return nil
	}
	recs, err := s.walk()
	if err != nil {
		return err
	}
	if err := s.rebuild(recs); err != nil {
		fmt.Fprintf(s.log, "host-local: %v; using the directory walk instead\n", err)
		s.indexBroken = true
	}
	return nil
}

// updateEntries sets the index entries of the touched attachments to the addresses
// kept lists for them, a few at a time; an entry left with none is removed. The index
// is open: the entries were found in it.
func (s *store) updateEntries(touched map[attachment]bool, kept []record) error {
	left := map[attachment][]netip.Addr{}
	for _, r := range kept {
		if r.Valid && touched[r.Owner] {
			left[r.Owner] = append(left[r.Owner], r.Addr)
		}
	}
	atts := slices.Collect(maps.Keys(touched))
	errs := make([]error, len(atts))
	inParallel(len(atts), func(i int) {
		addrs := left[atts[i]]
		slices.SortFunc(addrs, netip.Addr.Compare)
		errs[i] = s.writeEntry(atts[i], addrs)
	})
	return errors.Join(errs...)
}

// stale lists the reservations GC releases, those whose owner keep refuses (or that
// name none), and the index change that goes with them, whichever source answered: a
// fresh index or the directory walk. From the index, the owners of the addresses it
// lists come from its records, one readlink per attachment, instead of reading every
// reservation file (at 60,000 reservations the reads were most of a GC's time). Only the
// reservations of attachments that keep refuses, and those the index does not list, are
// read from disk, so whatever GC releases is what its file says; a reservation rewritten
// in place behind the index's back, which the seal cannot see, can only be kept, never
// released in error.
func (s *store) stale(keep func(attachment) bool) ([]netip.Addr, indexChange, error) {
	if !s.fresh() {
		recs, err := s.walk()
		released, ch := split(recs, keep, nil, nil)
		return released, ch, err
	}
	s.current = true
	addrs, err := s.scan(true)
	if err != nil {
		return nil, indexChange{}, fmt.Errorf("read data dir: %w", err)
	}
	indexed, dropped, err := s.readIndex(keep)
	if err != nil {
		return nil, indexChange{}, err
	}
	released, ch := split(s.readOwners(addrs, indexed, keep), keep, indexed, dropped)
	return released, ch, nil
}

// readIndex reads the index's records, a few at a time, into the attachment each
// address is listed for. An entry whose name says its attachment is one keep refuses is
// not read: no kept entry lists its addresses, so their files are read, and it is
// returned in dropped, to be removed with what GC releases.
func (s *store) readIndex(keep func(attachment) bool) (indexed map[netip.Addr]attachment, dropped []attachment, err error) {
	entries, err := s.idx.Entries()
	if err != nil {
		return nil, nil, fmt.Errorf("index: %w", err)
	}
	var toRead []int
	for i, e := range entries {
		if e.Type() != fs.ModeSymlink {
			continue
		}
		// A hashed name (no ':') says nothing of its attachment: only its record tells.
		if id, ifname, ok := strings.Cut(e.Name(), ":"); ok && !keep(attachment{ID: id, IfName: ifname}) {
			dropped = append(dropped, attachment{ID: id, IfName: ifname})
			continue
		}
		toRead = append(toRead, i)
	}
	links := make([]string, len(entries))
	inParallel(len(toRead), func(j int) {
		i := toRead[j]
		links[i], _ = s.idx.Readlink(entries[i].Name()) // an unreadable entry lists nothing
	})
	indexed = map[netip.Addr]attachment{}
	for i, e := range entries {
		if att, as, ok := parseEntry(links[i]); ok && entryName(att) == e.Name() {
			for _, a := range as {
				indexed[a] = att
			}
		}
	}
	return indexed, dropped, nil
}

// readOwners makes the records of addrs: the owner the index lists where keep accepts
// it, else what the reservation file says, the files read a few at a time (so keep is
// called concurrently: it only reads).
func (s *store) readOwners(addrs []netip.Addr, indexed map[netip.Addr]attachment, keep func(attachment) bool) []record {
	data := make([][]byte, len(addrs))
	errs := make([]error, len(addrs))
	inParallel(len(addrs), func(i int) {
		if att, ok := indexed[addrs[i]]; !ok || !keep(att) {
			data[i], errs[i] = s.dir.ReadFile(addrs[i].String(), maxReservation)
		}
	})
	recs := make([]record, 0, len(addrs))
	for i, a := range addrs {
		if att, ok := indexed[a]; ok && keep(att) {
			recs = append(recs, record{Addr: a, Owner: att, Valid: true})
		} else if r, ok := s.recordOf(a, data[i], errs[i]); ok {
			recs = append(recs, r)
		}
	}
	return recs
}

// split sorts recs by keep into the addresses to release and the index change that
// goes with them: with the index's word (indexed), the entries of the attachments that
// lose an address, or that keep refuses (dropped), are rewritten; after a walk the index
// is rebuilt.
func split(recs []record, keep func(attachment) bool, indexed map[netip.Addr]attachment, dropped []attachment) ([]netip.Addr, indexChange) {
	ch := indexChange{rebuild: indexed == nil, entries: map[attachment]bool{}}
	for _, att := range dropped {
		ch.entries[att] = true
	}
	var released []netip.Addr
	for _, r := range recs {
		if r.Valid && keep(r.Owner) {
			ch.kept = append(ch.kept, r)
			continue
		}
		if att, ok := indexed[r.Addr]; ok {
			ch.entries[att] = true
		}
		if r.Valid {
			ch.entries[r.Owner] = true
		}
		released = append(released, r.Addr)
	}
	return released, ch
}
