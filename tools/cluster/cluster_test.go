package cluster_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cnikit/cni/tools/cluster"
	"github.com/cnikit/cni/tools/internal/cnibuild"
)

// A snapshot changes with a file's bytes, its inode (a copy in place of a rename back),
// its mode and a link's target, and holds hidden entries.
func TestSnapshotSeesWhatUninstallMustRestore(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "bridge")
	require.NoError(t, os.WriteFile(p, []byte("ref"), 0o755))
	require.NoError(t, os.Symlink("cni", filepath.Join(dir, "loopback")))
	require.NoError(t, os.Mkdir(filepath.Join(dir, ".kept"), 0o755))
	snap := func() []string {
		s, err := cluster.Snapshot(dir)
		require.NoError(t, err)
		return s
	}
	base := snap()
	require.Len(t, base, 3)
	assert.Equal(t, base, snap())

	changes := []func(){
		func() { require.NoError(t, os.WriteFile(p, []byte("REF"), 0o755)) },
		func() {
			// A copy renamed over it: a new inode (made while the old one lives, so its
			// number is not reused).
			data, _ := os.ReadFile(p)
			require.NoError(t, os.WriteFile(p+".copy", data, 0o755))
			require.NoError(t, os.Rename(p+".copy", p))
		},
		func() { require.NoError(t, os.Chmod(p, 0o700)) },
		func() {
			require.NoError(t, os.Remove(filepath.Join(dir, "loopback")))
			require.NoError(t, os.Symlink("other", filepath.Join(dir, "loopback")))
		},
	}
	for i, change := range changes {
		before := snap()
		change()
		assert.NotEqual(t, before, snap(), "change %d", i)
	}
}

// The lab takes ours off a node with the very command the docs give operators.
func TestTheDocsGiveTheLabsUninstallCommand(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join(cnibuild.Root(), "docs", "cluster.md"))
	require.NoError(t, err)
	assert.Contains(t, string(doc), "\n"+strings.Join(cluster.UninstallCommand(), " ")+"\n")
}
