package invlog

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// nobody is the uid of "another user": a file chown'ed to it was made by someone else.
const nobody = 65534

// sharedDir is a directory every user may write, with the sticky bit, as /tmp is.
func sharedDir(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "tmp")
	require.NoError(t, os.Mkdir(dir, 0o755))
	require.NoError(t, os.Chmod(dir, 0o777|os.ModeSticky))
	return dir
}

// plantForeign writes content to path as another user's file, readable and writable by all.
func plantForeign(t *testing.T, path, content string) {
	t.Helper()
	require.NoError(t, os.WriteFile(path, []byte(content), 0o666))
	require.NoError(t, os.Chmod(path, 0o666))
	require.NoError(t, os.Chown(path, nobody, nobody))
}

func content(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	return string(b)
}

func TestAppendRefusesALogAnotherUserMadeOrLinked(t *testing.T) {
	cases := map[string]func(t *testing.T, dir, file string) (victim string){
		"made by another user before the first writer": func(t *testing.T, dir, file string) string {
			plantForeign(t, file, "theirs\n")
			return file
		},
		"a symlink to another file": func(t *testing.T, dir, file string) string {
			victim := filepath.Join(t.TempDir(), "victim")
			require.NoError(t, os.WriteFile(victim, []byte("theirs\n"), 0o600))
			require.NoError(t, os.Symlink(victim, file))
			return victim
		},
		"a hard link to another file": func(t *testing.T, dir, file string) string {
			victim := filepath.Join(dir, "victim")
			require.NoError(t, os.WriteFile(victim, []byte("theirs\n"), 0o600))
			require.NoError(t, os.Link(victim, file))
			return victim
		},
	}
	for name, plant := range cases {
		t.Run(name, func(t *testing.T) {
			dir := sharedDir(t)
			file := filepath.Join(dir, "cni.log")
			victim := plant(t, dir, file)
			c := Config{File: file}

			err := c.Append(testLine(0, 0))

			require.Error(t, err)
			assert.ErrorContains(t, err, file)
			assert.ErrorContains(t, err, "nothing written")
			assert.Equal(t, "theirs\n", content(t, victim), "nothing written to the planted file")
		})
	}
}

func TestAppendWritesItsOwnLogInASharedStickyDir(t *testing.T) {
	dir := sharedDir(t)
	file := filepath.Join(dir, "cni.log")
	c := Config{File: file}
	first, second := testLine(0, 0), testLine(0, 1)
	require.NoError(t, c.Append(first))
	require.NoError(t, c.Append(second))
	assert.Equal(t, string(first)+string(second), content(t, file))
}

func TestAppendRefusesADirOthersMaySwapEntriesIn(t *testing.T) {
	for name, mode := range map[string]os.FileMode{"world-writable": 0o777, "group-writable by another group": 0o775} {
		t.Run(name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "logs")
			require.NoError(t, os.Mkdir(dir, 0o755))
			require.NoError(t, os.Chmod(dir, mode))
			require.NoError(t, os.Chown(dir, 0, nobody))
			file := filepath.Join(dir, "cni.log")
			c := Config{File: file}

			err := c.Append(testLine(0, 0))

			assert.ErrorIs(t, err, ErrForeign)
			assert.ErrorContains(t, err, dir)
			assert.NoFileExists(t, file, "nothing made there")
		})
	}
	t.Run("owned by another user", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "logs")
		require.NoError(t, os.Mkdir(dir, 0o755))
		require.NoError(t, os.Chown(dir, nobody, nobody))
		err := (&Config{File: filepath.Join(dir, "cni.log")}).Append(testLine(0, 0))
		assert.ErrorIs(t, err, ErrForeign)
		assert.ErrorContains(t, err, "owned by uid 65534")
	})
}

// Rotation moves and removes only this user's own log files: a FILE.N another user put
// there stays as it is (the line still goes into FILE, which grows on, and the refusal
// is reported), and so does a lock file of theirs, which could be held for good.
func TestRotationNeverRenamesOrRemovesAnotherUsersFile(t *testing.T) {
	for _, planted := range []string{"cni.log.1", "cni.log.3", "cni.log.lock"} {
		t.Run(planted, func(t *testing.T) {
			dir := sharedDir(t)
			file := filepath.Join(dir, "cni.log")
			c := Config{File: file, MaxSizeMB: 1.0 / 1024, MaxFiles: 3}
			require.NoError(t, c.Append(testLine(0, 0)))
			require.NoError(t, os.WriteFile(file, make([]byte, 2048), 0o600), "past the size: the next line rotates")
			p := filepath.Join(dir, planted)
			plantForeign(t, p, "theirs\n")

			line := testLine(0, 1)
			done := make(chan error, 1)
			go func() { done <- c.Append(line) }()
			var err error
			select {
			case err = <-done:
			case <-time.After(10 * time.Second):
				t.Fatal("rotation hangs on a lock file another user holds")
			}

			assert.ErrorIs(t, err, ErrForeign)
			assert.Equal(t, "theirs\n", content(t, p), "left where it was, as it was")
			assert.True(t, strings.HasSuffix(content(t, file), string(line)), "the line is written all the same")
			for _, n := range []string{"cni.log.1", "cni.log.2", "cni.log.3"} {
				if n != planted {
					assert.NoFileExists(t, filepath.Join(dir, n), "nothing rotated")
				}
			}
		})
	}
}

func TestReaderRefusesALogAnotherUserMade(t *testing.T) {
	dir := sharedDir(t)
	file := filepath.Join(dir, "cni.log")
	plantForeign(t, file, string(testLine(9, 9)))
	err := (&Reader{Path: file}).Read(context.Background(), func(*Entry, []byte) error {
		t.Fatal("a line of a file another user made was read as the log's")
		return nil
	})
	assert.ErrorIs(t, err, ErrForeign)

	// A rotated file of theirs beside our own log is skipped, and said.
	require.NoError(t, os.Rename(file, file+".1"))
	c := Config{File: file}
	require.NoError(t, c.Append(testLine(0, 0)))
	r := &Reader{Path: file}
	var read []string
	require.NoError(t, r.Read(context.Background(), func(e *Entry, _ []byte) error {
		read = append(read, e.ContainerID)
		return nil
	}))
	assert.Len(t, read, 1, "only our own line")
	require.Len(t, r.Foreign, 1)
	assert.ErrorContains(t, r.Foreign[0], file+".1")
}
