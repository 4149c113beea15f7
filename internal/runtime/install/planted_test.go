package install_test

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/cnikit/cni/internal/runtime/install"
)

// withinDeadline runs fn and fails the test when it has not returned after 10 s: what a
// FIFO makes of a blocking open.
func withinDeadline(t *testing.T, fn func() error) error {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- fn() }()
	select {
	case err := <-done:
		return err
	case <-time.After(10 * time.Second):
		t.Fatal("hangs: not returned after 10 s")
		return nil
	}
}

// A FIFO, a symlink or a device planted in the config directory under the record's
// name, or under a config's, is refused with a message naming it: never opened for a
// read that waits for a writer, never followed.
func TestPlantedEntriesInTheConfigDirAreRefusedWithoutHanging(t *testing.T) {
	elsewhere := filepath.Join(t.TempDir(), "elsewhere")
	require.NoError(t, os.WriteFile(elsewhere, []byte("0000000000000000000000000000000000000000000000000000000000000000  10-k8s.conflist\n"), 0o644))
	plants := map[string]func(p string) error{
		"fifo":    func(p string) error { return unix.Mkfifo(p, 0o644) },
		"symlink": func(p string) error { return os.Symlink(elsewhere, p) },
	}
	for kind, plant := range plants {
		for _, name := range []string{".cni-install", "10-k8s.conflist"} {
			t.Run(kind+" at "+name, func(t *testing.T) {
				f := newFixture(t)
				require.NoError(t, os.MkdirAll(f.confDir, 0o755))
				p := filepath.Join(f.confDir, name)
				require.NoError(t, plant(p))
				conf := writeConf(t, "10-k8s.conflist", chainConf)
				o, out := f.options(install.Symlink, conf)

				err := withinDeadline(t, func() error { return install.Install(o) })

				require.Error(t, err, out.String())
				assert.ErrorContains(t, err, "refusing to ")
				assert.ErrorContains(t, err, p)
				assert.ErrorContains(t, err, map[string]string{"fifo": "not a regular file", "symlink": "a symlink"}[kind])
				fi, lerr := os.Lstat(p)
				require.NoError(t, lerr)
				assert.NotZero(t, fi.Mode().Type(), "the planted entry is left as it was")
			})
		}
	}
	t.Run("uninstall with a fifo as the record", func(t *testing.T) {
		f := newFixture(t)
		require.NoError(t, os.MkdirAll(f.confDir, 0o755))
		p := filepath.Join(f.confDir, ".cni-install")
		require.NoError(t, unix.Mkfifo(p, 0o644))
		o, _ := f.options(install.Symlink)

		err := withinDeadline(t, func() error { return install.Uninstall(o) })

		assert.ErrorContains(t, err, p)
	})
}
