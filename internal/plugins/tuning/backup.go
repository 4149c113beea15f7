package tuning

import (
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/cnikit/cni/internal/core/statedir"
)

// Backup is what an interface looked like before tuning changed it. Only the values the
// plugin changed are recorded; DEL puts exactly those back. The reference keeps the
// link attributes only; the sysctls are kept too, so that DEL undoes them as well.
type Backup struct {
	Mac      string            `json:"mac,omitempty"`
	Mtu      int               `json:"mtu,omitempty"`
	Promisc  *bool             `json:"promisc,omitempty"`
	Allmulti *bool             `json:"allmulti,omitempty"`
	TxQLen   *int              `json:"txQLen,omitempty"`
	Sysctls  map[string]string `json:"sysctls,omitempty"`
}

const (
	// nameMax is the longest file name Linux filesystems take (NAME_MAX).
	nameMax = 255
	// maxBackup bounds what is read of a backup: a few attributes and the sysctls of
	// one config. Anything longer is not ours.
	maxBackup = 1 << 20
	// tempPrefix marks a backup being written. The rest of the name is random and of
	// fixed length, never longer than the backup's own name.
	tempPrefix = ".tmp-"
	// staleTemp is the age from which a temp file no writer holds is a crash's
	// leftover. A writer holds its temp file flock()ed for the microseconds it lives;
	// the age covers the instant between its creation and the flock.
	staleTemp = time.Minute
)

// backupNames returns the names the attachment's backup may have, in the order they
// are tried: the reference's "<containerID>_<ifname>.json" when it fits in a file name,
// then "h-<sha256 of containerID/ifname>.json", used when the reference's does not fit
// (a 240-character id) or cannot be written.
func backupNames(containerID, ifName string) []string {
	sum := sha256.Sum256([]byte(containerID + "/" + ifName))
	hashed := "h-" + hex.EncodeToString(sum[:]) + ".json"
	ref := containerID + "_" + ifName + ".json"
	if len(ref) > nameMax {
		return []string{hashed}
	}
	return []string{ref, hashed}
}

// backups is the data dir holding the backups. Every file in it is reached through
// the directory's descriptor and never followed when it is a symbolic link: the dir
// path itself may be an operator's link, the backups in it may not.
type backups struct {
	path string
	dir  *statedir.Dir // nil while the directory does not exist
	log  io.Writer
}

// openBackups opens the data dir at path if it exists; a missing one (or a file in
// its place) holds no backup.
func openBackups(path string, log io.Writer) (*backups, error) {
	b := &backups{path: path, log: log}
	dir, err := statedir.Open(path)
	switch {
	case err == nil:
		b.dir = dir
	case !errors.Is(err, fs.ErrNotExist) && !errors.Is(err, unix.ENOTDIR):
		return nil, fmt.Errorf("tuning data dir: %w", err)
	}
	return b, nil
}

func (b *backups) close() {
	if b.dir != nil {
		b.dir.Close()
	}
}

// read returns the attachment's backup and the name it was found under, or nil when
// there is none. An entry under one of its names that is no readable JSON backup (a
// link, a FIFO, a directory, an oversized file, garbage) can never be restored: it is
// reported and removed, the entry itself and never what it points to.
func (b *backups) read(names []string) (*Backup, string) {
	if b.dir == nil {
		return nil, ""
	}
	for _, name := range names {
		data, err := b.dir.ReadFile(name, maxBackup)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		var bk Backup
		if err == nil {
			err = json.Unmarshal(data, &bk)
		}
		if err == nil {
			return &bk, name
		}
		fmt.Fprintf(b.log, "tuning: dropping unusable backup %s/%s: %v\n", b.path, name, err)
		if err := b.dir.Remove(name); err != nil {
			fmt.Fprintf(b.log, "tuning: %v\n", err)
		}
	}
	return nil, ""
}

// write saves bk under the first of names it can: through a temp file and a rename, so
// a crash never leaves a half-written backup for DEL to choke on, and the rename
// replaces whatever entry is there (a planted link itself, never its target). A name
// too long for the filesystem, or taken by a directory, makes it try the next. There
// is no fsync: the data dir is normally on tmpfs, which a power loss empties anyway.
func (b *backups) write(names []string, bk *Backup) (string, error) {
	data, err := json.MarshalIndent(bk, "", "  ")
	if err != nil {
		return "", fmt.Errorf("tuning backup: %w", err)
	}
	if b.dir == nil {
		if err := statedir.MkdirAll("dataDir", b.path, 0o700); err != nil {
			return "", fmt.Errorf("tuning backup: %w", err)
		}
		if b.dir, err = statedir.Open(b.path); err != nil {
			return "", fmt.Errorf("tuning backup: %w", err)
		}
	}
	tmp, err := b.writeTemp(data)
	if err != nil {
		return "", err
	}
	for _, name := range names {
		err = b.dir.Rename(tmp, name)
		if err == nil {
			return name, nil
		}
		if !errors.Is(err, unix.ENAMETOOLONG) && !errors.Is(err, unix.EISDIR) &&
			!errors.Is(err, unix.ENOTEMPTY) && !errors.Is(err, unix.EEXIST) {
			break
		}
	}
	b.dir.Unlink(tmp)
	return "", fmt.Errorf("tuning backup: %w", err)
}

// writeTemp writes data to a new temp file, flock()ed while it is written so that a
// concurrent DEL's clean-up (removeStaleTemps) leaves it alone.
func (b *backups) writeTemp(data []byte) (string, error) {
	f, name, err := b.dir.CreateTemp(tempPrefix)
	if err != nil {
		return "", fmt.Errorf("tuning backup: %w", err)
	}
	err = statedir.Flock(f, unix.LOCK_EX)
	if err == nil {
		_, err = f.Write(data)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		b.dir.Unlink(name)
		return "", fmt.Errorf("tuning backup: %w", err)
	}
	return name, nil
}

// remove deletes the backup name.
func (b *backups) remove(name string) error {
	if err := b.dir.Remove(name); err != nil {
		return fmt.Errorf("tuning backup: %w", err)
	}
	return nil
}

// removeStaleTemps deletes the temp files of writers that crashed: older than
// staleTemp and not flock()ed by a writer. Failures are only reported: a leftover
// costs nothing but its bytes.
func (b *backups) removeStaleTemps() {
	if b.dir == nil {
		return
	}
	entries, err := b.dir.Entries()
	if err != nil {
		fmt.Fprintf(b.log, "tuning: %v\n", err)
		return
	}
	for _, e := range entries {
		if !strings.HasPrefix(e.Name(), tempPrefix) {
			continue
		}
		st, err := b.dir.Lstat(e.Name())
		if err != nil || time.Since(time.Unix(st.Mtim.Unix())) < staleTemp {
			continue
		}
		if err := b.removeUnheld(e.Name(), st.Mode&unix.S_IFMT == unix.S_IFREG); err != nil {
			fmt.Fprintf(b.log, "tuning: %v\n", err)
		}
	}
}

// removeUnheld removes the temp file name unless a writer holds its flock. What is no
// regular file under our prefix is nobody's temp file and goes at once.
func (b *backups) removeUnheld(name string, regular bool) error {
	if !regular {
		return b.dir.Remove(name)
	}
	f, err := b.dir.OpenFile(name, unix.O_RDONLY, 0)
	if err != nil {
		return nil // gone, or replaced since the listing
	}
	defer f.Close()
	if statedir.Flock(f, unix.LOCK_EX|unix.LOCK_NB) != nil {
		return nil // a writer holds it
	}
	return b.dir.Unlink(name)
}

// keepOlder fills b's unset values from older, the backup of an earlier ADD of the same
// attachment: that one holds the true originals, b may hold values tuning itself set.
func (b *Backup) keepOlder(older *Backup) {
	if older == nil {
		return
	}
	b.Mac, b.Mtu = cmp.Or(older.Mac, b.Mac), cmp.Or(older.Mtu, b.Mtu)
	override(&b.Promisc, older.Promisc)
	override(&b.Allmulti, older.Allmulti)
	override(&b.TxQLen, older.TxQLen)
	if b.Sysctls == nil && len(older.Sysctls) > 0 {
		b.Sysctls = map[string]string{}
	}
	maps.Copy(b.Sysctls, older.Sysctls)
}
