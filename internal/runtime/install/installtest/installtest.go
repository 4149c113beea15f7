// Package installtest is what the tests of cni install and of its command share to
// show that a node with the reference plugins is taken over and given back as it was:
// a plugin directory planted like a kubeadm node's (the kubernetes-cni package's files
// and flannel's symlink), and a listing of a directory precise enough to tell "exactly
// as found".
package installtest

import (
	"crypto/sha256"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/cnikit/cni/internal/runtime/install"
)

// Entry is one entry of a Listing: its type and permissions, and a symlink's target or
// a regular file's content digest and inode. A symlink's inode is left out: putting one
// back recreates it, and a runtime sees only its target.
type Entry struct {
	Type, Perm, Link, Content string
	Inode                     uint64
}

// Listing describes every entry under dir, hidden ones and those of subdirectories
// included, by its path relative to dir.
func Listing(t testing.TB, dir string) map[string]Entry {
	t.Helper()
	out := map[string]Entry{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == dir {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		fi, err := os.Lstat(p)
		if err != nil {
			return err
		}
		e := Entry{Type: fi.Mode().Type().String(), Perm: fi.Mode().Perm().String()}
		switch {
		case fi.Mode()&fs.ModeSymlink != 0:
			e.Perm = ""
			if e.Link, err = os.Readlink(p); err != nil {
				return err
			}
		case fi.Mode().IsRegular():
			data, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			e.Content = fmt.Sprintf("%d bytes, sha256 %x", len(data), sha256.Sum256(data))
			e.Inode = fi.Sys().(*syscall.Stat_t).Ino
		}
		out[rel] = e
		return nil
	})
	require.NoError(t, err, "list %s", dir)
	return out
}

// FlannelTarget is where the symlink PlantReferencePlugins makes at flannel points: a
// relative path out of the plugin directory, as a node image may link a plugin that
// another package installed elsewhere.
const FlannelTarget = "../../flannel/bin/flannel"

// PlantReferencePlugins fills dir (created if need be) the way a kubeadm node's
// /opt/cni/bin is before cni comes: a stand-in for each of the reference plugins
// (install.ReferenceNames) as a regular executable file of its own content, and
// flannel as a symlink to FlannelTarget. host-local is mode 0750, to show that modes
// come back too. It returns the names it planted.
func PlantReferencePlugins(t testing.TB, dir string) []string {
	t.Helper()
	require.NoError(t, os.MkdirAll(dir, 0o755))
	names := install.ReferenceNames()
	for _, n := range names {
		p := filepath.Join(dir, n)
		if n == "flannel" {
			require.NoError(t, os.Symlink(FlannelTarget, p))
			continue
		}
		mode := fs.FileMode(0o755)
		if n == "host-local" {
			mode = 0o750
		}
		// A stand-in script that says which reference plugin it is.
		require.NoError(t, os.WriteFile(p, []byte("#!/bin/sh\necho 'reference "+n+" v1.9.1'\n"), mode))
		// WriteFile's mode is masked by the umask.
		require.NoError(t, os.Chmod(p, mode))
	}
	return names
}
