package install

import (
	"bytes"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"crypto/sha256"

	"golang.org/x/sys/unix"

	"github.com/cnikit/cni/internal/core/statedir"
)

// recordName is the file in the config directory that says which configs cni install
// wrote, by SHA-256 of their content, so that a later run may replace them (a changed
// ConfigMap) and --uninstall may remove them, while a file someone else wrote or edited
// stays. Runtimes load only .conflist, .conf and .json files, so they never read it.
const recordName = ".cni-install"

// record maps a config's file name to the digests of the contents cni wrote there.
type record map[string][]string

func digest(data []byte) string {
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:])
}

// maxRecordSize bounds the record: a line per config cni install wrote, so a few
// hundred bytes in practice.
const maxRecordSize = 1 << 20

// maxConfSize bounds a config in the config directory read to compare it with ours.
const maxConfSize = 16 << 20

// readEntry reads the regular file at p, at most limit bytes, as statedir does: a
// symlink at p is not followed and a FIFO does not block, since the config directory
// is a place others write too, and a FIFO planted under the record's name would hang
// the installer for good. Such an entry is an error statedir.IsForeign recognises;
// notRegular says what it is.
func readEntry(p string, limit int64) ([]byte, error) {
	d, err := statedir.Open(filepath.Dir(p))
	if err != nil {
		return nil, err
	}
	defer d.Close()
	return d.ReadFile(filepath.Base(p), limit)
}

// notRegular says what kind of entry readEntry refused, for a message.
func notRegular(err error) string {
	switch {
	case errors.Is(err, unix.ELOOP):
		return "a symlink"
	case errors.Is(err, statedir.ErrTooLarge):
		return "too large"
	case errors.Is(err, unix.EISDIR):
		return "a directory"
	}
	return "not a regular file (a FIFO, socket or device)"
}

// readRecord reads the record of dir; a missing one is empty.
func readRecord(dir string) (record, error) {
	p := filepath.Join(dir, recordName)
	data, err := readEntry(p, maxRecordSize)
	if errors.Is(err, fs.ErrNotExist) {
		return record{}, nil
	}
	if statedir.IsForeign(err) {
		return nil, fmt.Errorf("refusing to read %s, the record of the configs cni install wrote: it is %s, "+
			"which cni install never makes; move it away", p, notRegular(err))
	}
	if err != nil {
		return nil, err
	}
	return parseRecord(data), nil
}

// parseRecord reads lines of "<sha256 hex>  <file name>", as sha256sum prints them.
// A line that is not one is skipped: it can only make fewer files count as ours.
func parseRecord(data []byte) record {
	rec := record{}
	for line := range strings.Lines(string(data)) {
		sum, name, ok := strings.Cut(strings.TrimRight(line, "\n"), "  ")
		if !ok || len(sum) != 64 || strings.Trim(sum, "0123456789abcdef") != "" || checkConfName(name) != nil {
			continue
		}
		rec[name] = append(rec[name], sum)
	}
	return rec
}

func (rec record) holds(name string, data []byte) bool {
	return slices.Contains(rec[name], digest(data))
}

func (rec record) add(name string, data []byte) {
	if !rec.holds(name, data) {
		rec[name] = append(rec[name], digest(data))
	}
}

func (rec record) set(name string, data []byte) {
	rec[name] = []string{digest(data)}
}

func (rec record) names() []string { return slices.Sorted(maps.Keys(rec)) }

func (rec record) format() []byte {
	var b bytes.Buffer
	for _, name := range rec.names() {
		for _, sum := range rec[name] {
			b.WriteString(sum + "  " + name + "\n")
		}
	}
	return b.Bytes()
}

// write replaces the record of dir atomically; an empty record removes the file.
func (rec record) write(dir string) error {
	p := filepath.Join(dir, recordName)
	if len(rec) == 0 {
		if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		return nil
	}
	if old, err := readEntry(p, maxRecordSize); err == nil && bytes.Equal(old, rec.format()) {
		return nil
	}
	return writeFile(p, bytes.NewReader(rec.format()), 0o644)
}
