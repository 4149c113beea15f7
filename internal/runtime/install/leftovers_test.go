package install_test

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cnikit/cni/internal/core/statedir"
	"github.com/cnikit/cni/internal/runtime/install"
)

// plantLeftovers puts into dir what runs killed before their rename leave there: a
// half-written copy of the binary, a temporary symlink and a temporary config, each
// under a name of the form cni install writes them under. It returns their names.
func plantLeftovers(t *testing.T, dir string, binary []byte) []string {
	t.Helper()
	require.NoError(t, os.MkdirAll(dir, 0o755))
	names := []string{statedir.TempName(".cni-tmp-"), statedir.TempName(".cni-tmp-"), statedir.TempName(".cni-tmp-")}
	require.NoError(t, os.WriteFile(filepath.Join(dir, names[0]), binary[:len(binary)/2], 0o755))
	require.NoError(t, os.Symlink("cni", filepath.Join(dir, names[1])))
	require.NoError(t, os.WriteFile(filepath.Join(dir, names[2]), []byte(`{"cniVersion":`), 0o644))
	return names
}

// plantForeignDotfiles puts hidden entries beside the leftovers that only look like
// them: another program's dotfile, names one character off, and a directory under a
// temporary name (cni install never makes one). None may be removed.
func plantForeignDotfiles(t *testing.T, dir string) []string {
	t.Helper()
	names := []string{".ab", ".cni-tmp-", ".cni-tmp-0123456789ABCDEF", ".cni-tmp-0123456789abcdef0", ".cni-tmp-0123456789abcdeg"}
	for _, n := range names {
		require.NoError(t, os.WriteFile(filepath.Join(dir, n), []byte("not ours"), 0o644))
	}
	d := ".cni-tmp-fedcba9876543210"
	require.NoError(t, os.Mkdir(filepath.Join(dir, d), 0o755))
	return append(names, d)
}

func TestInstallRemovesLeftoversOfKilledRunsAndNothingElse(t *testing.T) {
	forEachMode(t, func(t *testing.T, mode install.Mode, f *fixture) {
		binary, err := os.ReadFile(f.src)
		require.NoError(t, err)
		conf := writeConf(t, "10-k8s.conflist", chainConf)
		f.install(t, mode, conf)
		leftovers := append(plantLeftovers(t, f.dir, binary), plantLeftovers(t, f.confDir, binary)...)
		foreign := append(plantForeignDotfiles(t, f.dir), plantForeignDotfiles(t, f.confDir)...)

		out := f.install(t, mode, conf)

		for _, n := range leftovers {
			assert.NoFileExists(t, filepath.Join(f.dir, n))
			assert.NoFileExists(t, filepath.Join(f.confDir, n))
		}
		assert.Equal(t, len(leftovers), strings.Count(out, "(left by an interrupted cni install)\n"), out)
		for _, n := range foreign {
			for _, d := range []string{f.dir, f.confDir} {
				_, err := os.Lstat(filepath.Join(d, n))
				assert.NoError(t, err, "a foreign entry %s is kept", n)
			}
		}
	})
}

func TestUninstallRemovesLeftoversOfKilledRuns(t *testing.T) {
	f := newFixture(t)
	binary, err := os.ReadFile(f.src)
	require.NoError(t, err)
	conf := writeConf(t, "10-k8s.conflist", chainConf)
	f.install(t, install.Copy, conf)
	leftovers := append(plantLeftovers(t, f.dir, binary), plantLeftovers(t, f.confDir, binary)...)

	o, out := f.options(install.Copy, conf)
	require.NoError(t, install.Uninstall(o), out.String())

	assert.Empty(t, entryNames(t, f.dir), "the leftovers went with our entries")
	assert.Empty(t, entryNames(t, f.confDir))
	assert.Equal(t, len(leftovers), strings.Count(out.String(), "(left by an interrupted cni install)\n"))
}

func TestDryRunNamesLeftoversButKeepsThem(t *testing.T) {
	f := newFixture(t)
	binary, err := os.ReadFile(f.src)
	require.NoError(t, err)
	f.install(t, install.Symlink)
	leftovers := plantLeftovers(t, f.dir, binary)

	o, out := f.options(install.Symlink)
	o.DryRun = true
	require.NoError(t, install.Install(o), out.String())

	for _, n := range leftovers {
		assert.FileExists(t, filepath.Join(f.dir, n))
		assert.Contains(t, out.String(), "would remove "+filepath.Join(f.dir, n)+" (left by an interrupted cni install)\n")
	}
}

// syncBuffer is a bytes.Buffer that a run may write while the test reads it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// A temporary entry of a run still working is no leftover: a second run waits for the
// first one's lock on the directory and never removes what the first is writing.
func TestInstallWaitsForARunningInstallAndKeepsItsTemporaries(t *testing.T) {
	f := newFixture(t)
	f.install(t, install.Symlink)
	other, err := statedir.Open(f.dir)
	require.NoError(t, err)
	t.Cleanup(func() { other.Close() })
	require.NoError(t, other.Lock())
	inFlight := filepath.Join(f.dir, statedir.TempName(".cni-tmp-"))
	require.NoError(t, os.Symlink("cni", inFlight))

	o, _ := f.options(install.Symlink)
	var out syncBuffer
	o.Out = &out
	done := make(chan error, 1)
	go func() { done <- install.Install(o) }()
	require.Eventually(t, func() bool { return strings.Contains(out.String(), "waiting for another cni install in "+f.dir) },
		30*time.Second, 10*time.Millisecond, "the second run waits for the lock")
	_, err = os.Lstat(inFlight)
	require.NoError(t, err, "the running install's temporary entry is left alone while it holds the lock")
	select {
	case err := <-done:
		t.Fatalf("the second run ended while the first held the lock: %v", err)
	default:
	}
	require.NoError(t, os.Rename(inFlight, filepath.Join(f.dir, "bridge")), "the first run renames its entry")
	require.NoError(t, other.Unlock())

	select {
	case err := <-done:
		require.NoError(t, err, out.String())
	case <-time.After(time.Minute):
		t.Fatal("the second run did not go on once the lock was free")
	}
}
