package statedir

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// tree is a state dir and, beside it, a directory standing for everything outside.
type tree struct {
	t       *testing.T
	d       *Dir
	dir     string
	outside string
}

func newTree(t *testing.T) *tree {
	root := t.TempDir()
	tr := &tree{t: t, dir: filepath.Join(root, "state"), outside: filepath.Join(root, "outside")}
	require.NoError(t, os.Mkdir(tr.dir, 0o755))
	require.NoError(t, os.Mkdir(tr.outside, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(tr.outside, "keep"), []byte("keep"), 0o600))
	d, err := Open(tr.dir)
	require.NoError(t, err)
	t.Cleanup(func() { d.Close() })
	tr.d = d
	return tr
}

func (tr *tree) path(name string) string { return filepath.Join(tr.dir, name) }

// outsideIntact requires the outside directory to still hold exactly its one file.
func (tr *tree) outsideIntact() {
	tr.t.Helper()
	entries, err := os.ReadDir(tr.outside)
	require.NoError(tr.t, err)
	require.Len(tr.t, entries, 1)
	data, err := os.ReadFile(filepath.Join(tr.outside, "keep"))
	require.NoError(tr.t, err)
	assert.Equal(tr.t, "keep", string(data))
}

func TestOpenFollowsTheConfiguredPath(t *testing.T) {
	tr := newTree(t)
	link := filepath.Join(t.TempDir(), "link")
	require.NoError(t, os.Symlink(tr.dir, link))
	require.NoError(t, os.WriteFile(tr.path("f"), []byte("x"), 0o600))
	d, err := Open(link)
	require.NoError(t, err, "an operator's link as the data dir is fine")
	defer d.Close()
	data, err := d.ReadFile("f", 10)
	require.NoError(t, err)
	assert.Equal(t, "x", string(data))
}

func TestReadFileRefusesWhatIsNoRegularFile(t *testing.T) {
	tr := newTree(t)
	require.NoError(t, os.Symlink(filepath.Join(tr.outside, "keep"), tr.path("link")))
	require.NoError(t, os.Symlink("/dev/zero", tr.path("zero")))
	require.NoError(t, syscall.Mkfifo(tr.path("fifo"), 0o600))
	require.NoError(t, os.Mkdir(tr.path("dir"), 0o755))
	require.NoError(t, os.WriteFile(tr.path("big"), []byte(strings.Repeat("x", 11)), 0o600))
	require.NoError(t, os.WriteFile(tr.path("ok"), []byte(strings.Repeat("x", 10)), 0o600))

	for _, name := range []string{"link", "zero", "fifo", "dir", "big"} {
		_, err := tr.d.ReadFile(name, 10)
		require.Error(t, err, name)
		assert.True(t, IsForeign(err), "%s: %v", name, err)
		assert.False(t, errors.Is(err, fs.ErrNotExist), name)
	}
	_, err := tr.d.ReadFile("missing", 10)
	assert.ErrorIs(t, err, fs.ErrNotExist)
	assert.False(t, IsForeign(err))
	data, err := tr.d.ReadFile("ok", 10)
	require.NoError(t, err)
	assert.Len(t, data, 10)
}

func TestOpenFileWithCreateDoesNotCreateThroughALink(t *testing.T) {
	tr := newTree(t)
	target := filepath.Join(tr.outside, "new")
	require.NoError(t, os.Symlink(target, tr.path("lock")))
	_, err := tr.d.OpenFile("lock", unix.O_RDONLY|unix.O_CREAT, 0o600)
	assert.True(t, IsForeign(err), "%v", err)
	_, err = os.Lstat(target)
	assert.ErrorIs(t, err, fs.ErrNotExist)
}

func TestSubRefusesALinkToADirectory(t *testing.T) {
	tr := newTree(t)
	require.NoError(t, os.Symlink(tr.outside, tr.path("sub")))
	_, err := tr.d.Sub("sub", true, 0o755)
	assert.True(t, IsForeign(err), "%v", err)
	require.NoError(t, tr.d.Remove("sub"))
	tr.outsideIntact()
	sub, err := tr.d.Sub("sub", true, 0o755)
	require.NoError(t, err)
	defer sub.Close()
	fi, err := os.Lstat(tr.path("sub"))
	require.NoError(t, err)
	assert.True(t, fi.IsDir())
}

func TestRemoveTakesTheEntryNotItsTarget(t *testing.T) {
	tr := newTree(t)
	require.NoError(t, os.Symlink(tr.outside, tr.path("dirlink")))
	require.NoError(t, os.Symlink(filepath.Join(tr.outside, "keep"), tr.path("filelink")))
	require.NoError(t, os.Mkdir(tr.path("empty"), 0o755))
	require.NoError(t, os.Mkdir(tr.path("full"), 0o755))
	require.NoError(t, os.WriteFile(tr.path("full/f"), nil, 0o600))
	for _, name := range []string{"dirlink", "filelink", "empty", "missing"} {
		require.NoError(t, tr.d.Remove(name), name)
		_, err := os.Lstat(tr.path(name))
		assert.ErrorIs(t, err, fs.ErrNotExist, name)
	}
	assert.Error(t, tr.d.Remove("full"), "a directory with content stays")
	assert.NoError(t, tr.d.Unlink("missing"), "a missing entry is no error")
	tr.outsideIntact()
}

func TestRemoveAllNeverFollowsALink(t *testing.T) {
	tr := newTree(t)
	require.NoError(t, os.MkdirAll(tr.path("junk/a/b"), 0o755))
	require.NoError(t, os.Symlink(tr.outside, tr.path("junk/a/b/out")))
	require.NoError(t, os.Symlink(filepath.Join(tr.outside, "keep"), tr.path("junk/a/file")))
	require.NoError(t, syscall.Mkfifo(tr.path("junk/fifo"), 0o600))
	require.NoError(t, tr.d.RemoveAll("junk"))
	_, err := os.Lstat(tr.path("junk"))
	assert.ErrorIs(t, err, fs.ErrNotExist)
	tr.outsideIntact()

	deep := tr.path("deep")
	p := deep
	for i := 0; i < maxRemoveDepth+3; i++ {
		p = filepath.Join(p, "d")
	}
	require.NoError(t, os.MkdirAll(p, 0o755))
	assert.ErrorContains(t, tr.d.RemoveAll("deep"), "levels deep", "a tree deeper than the bound is left")
}

func TestTempNamesHaveAFixedLength(t *testing.T) {
	tr := newTree(t)
	f, name, err := tr.d.CreateTemp(".tmp-")
	require.NoError(t, err)
	f.Close()
	assert.Len(t, name, len(".tmp-")+16)
	assert.Len(t, TempName("x"), 17)
	name, err = tr.d.WriteTemp(".tmp-", []byte("data"))
	require.NoError(t, err)
	data, err := os.ReadFile(tr.path(name))
	require.NoError(t, err)
	assert.Equal(t, "data", string(data))
	fi, err := os.Stat(tr.path(name))
	require.NoError(t, err)
	assert.Equal(t, fs.FileMode(0o600), fi.Mode().Perm())
}

func TestIsTempNameMatchesOnlyTempNames(t *testing.T) {
	assert.True(t, IsTempName(".tmp-", TempName(".tmp-")))
	for _, n := range []string{
		".tmp-", ".tmp-0123456789abcde", ".tmp-0123456789abcdef0", ".tmp-0123456789ABCDEF",
		".tmp-0123456789abcdeg", "x.tmp-0123456789abcdef", ".tmq-0123456789abcdef",
	} {
		assert.False(t, IsTempName(".tmp-", n), n)
	}
}

func TestTryLockFailsWhileAnotherHolderHasTheLock(t *testing.T) {
	tr := newTree(t)
	other, err := Open(tr.dir)
	require.NoError(t, err)
	defer other.Close()
	require.NoError(t, other.Lock())
	ok, err := tr.d.TryLock()
	require.NoError(t, err)
	assert.False(t, ok, "the lock is held by another open description")
	require.NoError(t, other.Unlock())
	ok, err = tr.d.TryLock()
	require.NoError(t, err)
	assert.True(t, ok)
}

func TestRenameReplacesALinkItself(t *testing.T) {
	tr := newTree(t)
	require.NoError(t, os.Symlink(filepath.Join(tr.outside, "keep"), tr.path("target")))
	name, err := tr.d.WriteTemp(".tmp-", []byte("new"))
	require.NoError(t, err)
	require.NoError(t, tr.d.Rename(name, "target"))
	data, err := tr.d.ReadFile("target", 10)
	require.NoError(t, err)
	assert.Equal(t, "new", string(data))
	tr.outsideIntact()
}

func TestModTimeRoundTripsNanoseconds(t *testing.T) {
	tr := newTree(t)
	stamp := time.Unix(1_700_000_000, 123_424_242)
	require.NoError(t, tr.d.SetModTime(stamp))
	got, err := tr.d.ModTime()
	require.NoError(t, err)
	assert.True(t, got.Equal(stamp), "%v", got)
}

func TestEntriesReportTheEntriesOwnType(t *testing.T) {
	tr := newTree(t)
	require.NoError(t, os.Symlink(tr.outside, tr.path("link")))
	require.NoError(t, os.WriteFile(tr.path("file"), nil, 0o600))
	for range 2 { // listing twice starts from the first entry each time
		entries, err := tr.d.Entries()
		require.NoError(t, err)
		types := map[string]fs.FileMode{}
		for _, e := range entries {
			types[e.Name()] = e.Type()
		}
		assert.Equal(t, map[string]fs.FileMode{"link": fs.ModeSymlink, "file": 0}, types)
	}
	names, err := tr.d.Names()
	require.NoError(t, err)
	assert.ElementsMatch(t, []string{"link", "file"}, names)
}
