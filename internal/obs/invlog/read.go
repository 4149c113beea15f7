package invlog

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// maxLine bounds one line of the log as read back; a longer one is counted as bad.
const maxLine = 4 << 20

// Rotated returns the log's rotated files that exist, oldest first (FILE.N ... FILE.1).
func Rotated(path string) ([]string, error) {
	dir, base := filepath.Split(path)
	if dir == "" {
		dir = "."
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, nil
		}
		return nil, err
	}
	var found []int
	for _, e := range ents {
		suffix, ok := strings.CutPrefix(e.Name(), base+".")
		if !ok || !e.Type().IsRegular() {
			continue
		}
		if n, err := strconv.Atoi(suffix); err == nil && n > 0 && strconv.Itoa(n) == suffix {
			found = append(found, n)
		}
	}
	slices.SortFunc(found, func(a, b int) int { return b - a })
	out := make([]string, len(found))
	for i, n := range found {
		out[i] = filepath.Join(dir, base+"."+strconv.Itoa(n))
	}
	return out, nil
}

// Reader reads a log and its rotated files, oldest line first, and with Follow goes on
// reading the lines written after, across rotations.
type Reader struct {
	Path string
	// Follow keeps reading at the end of the log until the context ends.
	Follow bool
	// Poll is how often a followed log is looked at; 0 means 250 ms.
	Poll time.Duration
	// Bad counts the lines that were no log entry (torn by a full disk, or foreign).
	Bad int
	// Foreign holds the rotated files left unread because another user made them or
	// linked them (ErrForeign), each once with the reason.
	Foreign []error
}

// Read calls fn with every entry and its line as written (valid only during the call),
// in order; an error of fn ends the reading and is returned. A log that does not exist
// (yet) has no lines; followed, it is waited for.
func (r *Reader) Read(ctx context.Context, fn func(e *Entry, line []byte) error) error {
	live, liveInfo, done, err := r.catchUp(nil, fn)
	defer func() {
		if live != nil {
			live.Close()
		}
	}()
	if err != nil {
		return err
	}
	var pending []byte
	for {
		if live != nil {
			if pending, err = r.lines(live, pending, fn); err != nil {
				return err
			}
		}
		if !r.Follow {
			return nil // an unfinished last line may be a write in progress
		}
		if err := r.sleep(ctx); err != nil {
			return nil
		}
		cur, err := os.Lstat(r.Path)
		if err != nil || liveInfo != nil && os.SameFile(cur, liveInfo) {
			continue
		}
		// Rotated (or created) since: finish the old file, then those rotated after it,
		// then follow the new one.
		if live != nil {
			if pending, err = r.lines(live, pending, fn); err != nil {
				return err
			}
			live.Close()
		}
		r.bad(pending)
		pending = nil
		if liveInfo != nil {
			done = liveInfo
		}
		if live, liveInfo, done, err = r.catchUp(done, fn); err != nil {
			return err
		}
	}
}

// catchUp opens the live file and the rotated files newer than done (all of them when
// done is nil or has aged out), reads the rotated ones, and returns the live file opened
// (nil when there is none) for following, and the newest file now read to its end. That
// one is done for the next catch-up, since the live file may be missing for a moment (a
// writer renamed FILE to FILE.1 and has not created the next FILE yet): the next one then
// starts after the files read now, not at the oldest rotated file again.
func (r *Reader) catchUp(done fs.FileInfo, fn func(*Entry, []byte) error) (*os.File, fs.FileInfo, fs.FileInfo, error) {
	live, liveInfo, rotated, err := r.openAll(done)
	defer func() {
		for _, o := range rotated {
			o.f.Close()
		}
	}()
	if err != nil {
		return nil, nil, nil, err
	}
	for _, o := range rotated {
		rest, err := r.lines(o.f, nil, fn)
		r.bad(rest)
		if err != nil {
			if live != nil {
				live.Close()
			}
			return nil, nil, nil, err
		}
		done = o.info
	}
	return live, liveInfo, done, nil
}

// openFile is a file opened and what it was when opened.
type openFile struct {
	f    *os.File
	info fs.FileInfo
}

// openAll opens the live file, then the rotated files newer than done, oldest first, but
// the live one. It does so under a shared lock on the log's lock file, which a writer
// holds exclusively while it renames FILE.N-1 ... FILE to FILE.N ... FILE.1: a rotation
// in the middle of the listing would otherwise give a name listed to the file renamed
// onto it, hide done, and have every rotated file read again. Without a lock file (no
// rotation yet) the files are opened unlocked: opening the live one first makes the one
// rename that can come, FILE to FILE.1, harmless, since that file is read once, as the
// live one.
func (r *Reader) openAll(done fs.FileInfo) (live *os.File, liveInfo fs.FileInfo, rotated []openFile, err error) {
	if unlock, lerr := lock(lockName(r.Path), unix.LOCK_SH); lerr == nil {
		defer unlock()
	}
	// A missing live file is none (openRead's nil file), no error.
	if live, liveInfo, err = openRead(r.Path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, nil, nil, err
	}
	names, err := Rotated(r.Path)
	if err != nil {
		if live != nil {
			live.Close()
		}
		return nil, nil, nil, err
	}
	return live, liveInfo, r.openRotated(names, liveInfo, done), nil
}

// openRotated opens the rotated files named (oldest first) but the live one and done
// and those older. A file it cannot open or stat is left out: rotated out meanwhile (by
// an unlocked reader) or, noted in r.Foreign once per reason, not this user's.
func (r *Reader) openRotated(names []string, liveInfo, done fs.FileInfo) []openFile {
	var rotated []openFile
	for _, name := range names {
		f, fi, err := openRead(name)
		if errors.Is(err, ErrForeign) && !slices.ContainsFunc(r.Foreign, func(e error) bool { return e.Error() == err.Error() }) {
			r.Foreign = append(r.Foreign, err)
		}
		switch {
		case err != nil:
		case liveInfo != nil && os.SameFile(fi, liveInfo):
			f.Close()
		case done != nil && os.SameFile(fi, done):
			// Read already, with all that is older.
			f.Close()
			for _, older := range rotated {
				older.f.Close()
			}
			rotated = rotated[:0]
		default:
			rotated = append(rotated, openFile{f, fi})
		}
	}
	return rotated
}

// lines reads whole lines from f's current offset to its end, calling fn for each, and
// returns the unfinished last line (a write in progress) for the next call.
func (r *Reader) lines(f *os.File, pending []byte, fn func(*Entry, []byte) error) ([]byte, error) {
	br := bufio.NewReaderSize(f, 64<<10)
	for {
		chunk, err := br.ReadSlice('\n')
		pending = append(pending, chunk...)
		if errors.Is(err, bufio.ErrBufferFull) {
			if len(pending) > maxLine {
				r.Bad++
				pending = pending[:0]
			}
			continue
		}
		if err != nil {
			if errors.Is(err, io.EOF) {
				return pending, nil
			}
			return pending, err
		}
		line := bytes.TrimRight(pending, "\n")
		if len(bytes.TrimSpace(line)) > 0 {
			var e Entry
			if json.Unmarshal(line, &e) != nil || e.Command == "" {
				r.Bad++
			} else if err := fn(&e, line); err != nil {
				return nil, err
			}
		}
		pending = pending[:0]
	}
}

func (r *Reader) bad(rest []byte) {
	if len(bytes.TrimSpace(rest)) > 0 {
		r.Bad++
	}
}

func (r *Reader) sleep(ctx context.Context) error {
	d := r.Poll
	if d <= 0 {
		d = 250 * time.Millisecond
	}
	select {
	case <-time.After(d):
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// openRead opens a log file for reading without following a symlink in its last
// element, as the writer does, and only a regular file of one name owned by this user
// or root: a FIFO at the path would otherwise hold cni log until a writer came. It
// returns what the file is.
func openRead(path string) (*os.File, fs.FileInfo, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK|syscall.O_CLOEXEC, 0)
	if err != nil {
		return nil, nil, err
	}
	// A log file another user made is not this node's log (it may be forged to mislead
	// whoever reads it); root's own log is, to a reader allowed to read it.
	fi, err := ownFile(f, true)
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	return f, fi, nil
}
