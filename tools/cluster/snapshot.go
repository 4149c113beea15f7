package cluster

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
)

// Snapshot lists every entry under dir, one line each: its path, type and mode, and a
// symlink's target or a regular file's inode and SHA-256. Two snapshots are equal when
// the directory holds the same names, links and bytes, in the same inodes: what "left
// as it was found" means for a node's /opt/cni/bin and /etc/cni/net.d.
func Snapshot(dir string) ([]string, error) {
	var out []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == dir {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		fi, err := d.Info()
		if err != nil {
			return err
		}
		line := fmt.Sprintf("%s %v", rel, fi.Mode())
		switch {
		case fi.Mode()&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			line += " -> " + target
		case fi.Mode().IsRegular():
			data, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			sum := sha256.Sum256(data)
			line += fmt.Sprintf(" inode %d sha256 %s", fi.Sys().(*syscall.Stat_t).Ino, hex.EncodeToString(sum[:8]))
		}
		out = append(out, line)
		return nil
	})
	return out, err
}
