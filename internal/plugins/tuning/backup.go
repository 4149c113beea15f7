package tuning

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
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

// backupPath is <dataDir>/<containerID>_<ifname>.json. The skel has already refused
// ids and names that could hold a path separator.
func backupPath(dataDir, containerID, ifName string) string {
	return filepath.Join(dataDir, containerID+"_"+ifName+".json")
}

// readBackup returns the backup at path, or nil when there is none.
func readBackup(path string) (*Backup, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("tuning backup: %w", err)
	}
	var b Backup
	if err := json.Unmarshal(data, &b); err != nil {
		return nil, fmt.Errorf("tuning backup %s: %w", path, err)
	}
	return &b, nil
}

// keepOlder fills b's unset values from older, the backup of an earlier ADD of the same
// attachment: that one holds the true originals, b may hold values tuning itself set.
func (b *Backup) keepOlder(older *Backup) {
	if older == nil {
		return
	}
	if older.Mac != "" {
		b.Mac = older.Mac
	}
	if older.Mtu != 0 {
		b.Mtu = older.Mtu
	}
	override(&b.Promisc, older.Promisc)
	override(&b.Allmulti, older.Allmulti)
	override(&b.TxQLen, older.TxQLen)
	for k, v := range older.Sysctls {
		if b.Sysctls == nil {
			b.Sysctls = map[string]string{}
		}
		b.Sysctls[k] = v
	}
}

// writeBackup writes b to path through a temp file and a rename, so a crash never
// leaves a half-written backup for DEL to choke on. There is no fsync: the data dir is
// normally on tmpfs, which a power loss empties anyway.
func writeBackup(path string, b *Backup) error {
	data, err := json.MarshalIndent(b, "", "  ")
	if err != nil {
		return fmt.Errorf("tuning backup: %w", err)
	}
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("tuning backup: %w", err)
	}
	tmp, err := os.CreateTemp(dir, ".tmp-"+filepath.Base(path)+"-*")
	if err != nil {
		return fmt.Errorf("tuning backup: %w", err)
	}
	_, werr := tmp.Write(data)
	cerr := tmp.Close()
	if err := errors.Join(werr, cerr); err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("tuning backup %s: %w", path, err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("tuning backup %s: %w", path, err)
	}
	return nil
}
