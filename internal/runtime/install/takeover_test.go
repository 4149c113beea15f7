package install_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cnikit/cni/internal/runtime/install"
	it "github.com/cnikit/cni/internal/runtime/install/installtest"
	pt "github.com/cnikit/cni/internal/testbed/plugintest"
)

func (f *fixture) kept(n string) string { return filepath.Join(f.dir, install.KeptDir, n) }

func (f *fixture) uninstall(t *testing.T, mode install.Mode) string {
	t.Helper()
	o, out := f.options(mode)
	require.NoError(t, install.Uninstall(o), out.String())
	return out.String()
}

// assertOurs checks that every name of the fixture is what mode installs and answers
// VERSION.
func (f *fixture) assertOurs(t *testing.T, mode install.Mode) {
	t.Helper()
	cni, err := os.Stat(filepath.Join(f.dir, "cni"))
	require.NoError(t, err)
	for _, n := range f.names {
		p := filepath.Join(f.dir, n)
		fi, err := os.Lstat(p)
		require.NoError(t, err)
		switch mode {
		case install.Symlink:
			link, err := os.Readlink(p)
			require.NoError(t, err)
			assert.Equal(t, "cni", link, p)
		case install.Hardlink:
			assert.True(t, os.SameFile(cni, fi), "%s is a hardlink of cni", p)
		case install.Copy:
			pt.RequireSameContent(t, f.src, p)
		}
		pt.AssertAnswersVersion(t, p)
	}
}

// keptListing is what a node's listing says of the planted originals, as they must
// be found in KeptDir: the same entries, the regular files the same inodes.
func keptListing(planted map[string]it.Entry) map[string]it.Entry {
	out := map[string]it.Entry{}
	for name, e := range planted {
		out[filepath.Join(install.KeptDir, name)] = e
	}
	return out
}

// onlyKept is the part of a listing under KeptDir.
func onlyKept(l map[string]it.Entry) map[string]it.Entry {
	out := map[string]it.Entry{}
	for name, e := range l {
		if dir, _ := filepath.Split(name); dir == install.KeptDir+"/" {
			out[name] = e
		}
	}
	return out
}

func TestInstallTakesOverTheReferencePluginsAndUninstallPutsThemBack(t *testing.T) {
	forEachMode(t, func(t *testing.T, mode install.Mode, f *fixture) {
		planted := it.PlantReferencePlugins(t, f.dir)
		found := it.Listing(t, f.dir)

		out := f.install(t, mode)

		f.assertOurs(t, mode)
		for _, n := range planted {
			assert.Contains(t, out, "replace "+filepath.Join(f.dir, n)+" (kept as "+f.kept(n)+" for --uninstall)\n")
		}
		assert.Equal(t, keptListing(found), onlyKept(it.Listing(t, f.dir)), "every original kept, regular files as the same inode")
		after := it.Listing(t, f.dir)
		assert.Contains(t, f.install(t, mode), "nothing to do:", "a second run takes nothing over again")
		assert.Equal(t, after, it.Listing(t, f.dir))

		out = f.uninstall(t, mode)

		for _, n := range planted {
			assert.Contains(t, out, "restore "+filepath.Join(f.dir, n)+" (from "+f.kept(n)+")\n")
		}
		assert.Contains(t, out, "remove directory "+filepath.Join(f.dir, install.KeptDir)+"\n")
		assert.Equal(t, found, it.Listing(t, f.dir), "the directory exactly as found")
	})
}

func TestDryRunSaysWhatItWouldReplaceAndKeep(t *testing.T) {
	f := newFixture(t)
	it.PlantReferencePlugins(t, f.dir)
	found := it.Listing(t, f.dir)
	o, out := f.options(install.Symlink)
	o.DryRun = true

	require.NoError(t, install.Install(o))

	assert.Equal(t, found, it.Listing(t, f.dir))
	assert.Contains(t, out.String(), "would replace "+filepath.Join(f.dir, "bridge")+" (kept as "+f.kept("bridge")+" for --uninstall)\n")
	assert.Contains(t, out.String(), "would link "+filepath.Join(f.dir, "bridge")+" -> cni\n")

	f.install(t, install.Symlink)
	installed := it.Listing(t, f.dir)
	out.Reset()
	require.NoError(t, install.Uninstall(o))
	assert.Equal(t, installed, it.Listing(t, f.dir))
	assert.Contains(t, out.String(), "would restore "+filepath.Join(f.dir, "bridge")+" (from "+f.kept("bridge")+")\n")
	assert.Contains(t, out.String(), "would remove directory "+filepath.Join(f.dir, install.KeptDir)+"\n")
}

func TestForeignFileAtAnotherNameIsStillRefused(t *testing.T) {
	f := newFixture(t)
	it.PlantReferencePlugins(t, f.dir)
	chain := filepath.Join(f.dir, "chain")
	require.NoError(t, os.WriteFile(chain, []byte("#!/bin/sh\necho another vendor's chain\n"), 0o755))
	found := it.Listing(t, f.dir)

	o, out := f.options(install.Symlink)
	err := install.Install(o)

	require.ErrorContains(t, err, "refusing to replace "+chain+": file not installed by cni (use --force)")
	assert.NotContains(t, err.Error(), "bridge", "reference names are not refused")
	assert.Equal(t, found, it.Listing(t, f.dir), "a refused run changes nothing, the reference plugins neither")
	assert.Empty(t, out.String())
}

func TestDirectoryAtAReferenceNameIsRefused(t *testing.T) {
	f := newFixture(t)
	it.PlantReferencePlugins(t, f.dir)
	require.NoError(t, os.Remove(filepath.Join(f.dir, "portmap")))
	require.NoError(t, os.Mkdir(filepath.Join(f.dir, "portmap"), 0o755))
	found := it.Listing(t, f.dir)

	o, _ := f.options(install.Symlink)
	require.ErrorContains(t, install.Install(o), "refusing to replace "+filepath.Join(f.dir, "portmap")+": it is a directory")

	assert.Equal(t, found, it.Listing(t, f.dir))
}

func TestForceTakesOverAnyNameAndKeepsItToo(t *testing.T) {
	f := newFixture(t)
	chain := filepath.Join(f.dir, "chain")
	require.NoError(t, os.MkdirAll(f.dir, 0o755))
	require.NoError(t, os.WriteFile(chain, []byte("vendor chain\n"), 0o755))
	found := it.Listing(t, f.dir)
	o, out := f.options(install.Symlink)
	o.Force = true

	require.NoError(t, install.Install(o), out.String())

	assert.Contains(t, out.String(), "replace "+chain+" (kept as "+f.kept("chain")+" for --uninstall)\n")
	f.assertOurs(t, install.Symlink)
	f.uninstall(t, install.Symlink)
	assert.Equal(t, found, it.Listing(t, f.dir))
}

// A run killed after keeping an original and before renaming ours over it leaves the
// original at both names, and maybe a temporary name in KeptDir; the next install
// finishes the job and keeps the original, the next uninstall drops the second name.
func TestInterruptedTakeoverIsFinishedByTheNextRun(t *testing.T) {
	interrupted := func(t *testing.T, f *fixture) map[string]it.Entry {
		it.PlantReferencePlugins(t, f.dir)
		found := it.Listing(t, f.dir)
		keptDir := filepath.Join(f.dir, install.KeptDir)
		require.NoError(t, os.Mkdir(keptDir, 0o755))
		require.NoError(t, os.Link(filepath.Join(f.dir, "bridge"), f.kept("bridge")))
		require.NoError(t, os.Symlink(it.FlannelTarget, f.kept("flannel")))
		require.NoError(t, os.Link(filepath.Join(f.dir, "ptp"), filepath.Join(keptDir, ".cni-tmp-0123456789abcdef")))
		return found
	}
	t.Run("install", func(t *testing.T) {
		f := newFixture(t)
		found := interrupted(t, f)

		f.install(t, install.Hardlink)

		f.assertOurs(t, install.Hardlink)
		kept := onlyKept(it.Listing(t, f.dir))
		assert.Equal(t, found["bridge"], kept[filepath.Join(install.KeptDir, "bridge")], "the original, not ours")
		assert.Equal(t, found["ptp"], kept[filepath.Join(install.KeptDir, "ptp")])
		f.uninstall(t, install.Hardlink)
		assert.Equal(t, found, it.Listing(t, f.dir), "the temporary name left in KeptDir goes with it")
	})
	t.Run("uninstall", func(t *testing.T) {
		f := newFixture(t)
		found := interrupted(t, f)

		out := f.uninstall(t, install.Hardlink)

		assert.Contains(t, out, "remove "+f.kept("bridge")+" (the same file is at "+filepath.Join(f.dir, "bridge")+")\n")
		assert.Equal(t, found, it.Listing(t, f.dir))
	})
}

// A run killed half-way through putting the originals back (some back, some still
// kept) is finished by the next uninstall.
func TestInterruptedUninstallIsFinishedByTheNextRun(t *testing.T) {
	forEachMode(t, func(t *testing.T, mode install.Mode, f *fixture) {
		planted := it.PlantReferencePlugins(t, f.dir)
		found := it.Listing(t, f.dir)
		f.install(t, mode)
		for _, n := range planted[:len(planted)/2] {
			require.NoError(t, os.Rename(f.kept(n), filepath.Join(f.dir, n)))
		}

		f.uninstall(t, mode)

		assert.Equal(t, found, it.Listing(t, f.dir))
	})
}

// The kubernetes-cni package reinstalled over ours (an upgrade of it writes its new
// files over the names): the next install takes the new files over, and uninstall
// puts those back, not the older ones.
func TestNewerReferencePluginReplacesTheKeptOne(t *testing.T) {
	f := newFixture(t)
	it.PlantReferencePlugins(t, f.dir)
	f.install(t, install.Symlink)
	bridge := filepath.Join(f.dir, "bridge")
	newer := filepath.Join(f.dir, ".bridge.dpkg-new")
	require.NoError(t, os.WriteFile(newer, []byte("#!/bin/sh\necho 'reference bridge v1.9.2'\n"), 0o755))
	require.NoError(t, os.Rename(newer, bridge))
	reinstalled := it.Listing(t, f.dir)["bridge"]

	out := f.install(t, install.Symlink)

	assert.Contains(t, out, "replace "+bridge+" (kept as "+f.kept("bridge")+" for --uninstall, in place of the older file kept there)\n")
	f.assertOurs(t, install.Symlink)
	assert.Equal(t, reinstalled, it.Listing(t, f.dir)[filepath.Join(install.KeptDir, "bridge")])
	f.uninstall(t, install.Symlink)
	assert.Equal(t, reinstalled, it.Listing(t, f.dir)["bridge"])
}

// Someone put yet another file at a name cni had taken over: uninstall leaves it, and
// the original cni kept, where they are, and says so.
func TestUninstallKeepsAForeignFileThatReplacedOursAndTheKeptOriginal(t *testing.T) {
	f := newFixture(t)
	it.PlantReferencePlugins(t, f.dir)
	found := it.Listing(t, f.dir)
	f.install(t, install.Copy)
	bridge := filepath.Join(f.dir, "bridge")
	require.NoError(t, os.Remove(bridge))
	require.NoError(t, os.WriteFile(bridge, []byte("third vendor\n"), 0o755))
	third := it.Listing(t, f.dir)["bridge"]

	out := f.uninstall(t, install.Copy)

	assert.Contains(t, out, "keep "+bridge+" (not installed by cni); the file cni replaced there stays in "+f.kept("bridge")+"\n")
	assert.Contains(t, out, "keep "+filepath.Join(f.dir, install.KeptDir)+" (still holds: [bridge])\n")
	want := map[string]it.Entry{}
	for name, e := range found {
		want[name] = e
	}
	want["bridge"] = third
	want[install.KeptDir] = it.Listing(t, f.dir)[install.KeptDir]
	want[filepath.Join(install.KeptDir, "bridge")] = found["bridge"]
	assert.Equal(t, want, it.Listing(t, f.dir))
}

// An upgrade that was killed after the new cni went in and before the names followed,
// or one run with --only, leaves hardlinks and copies of the old cni at the other names:
// neither the new cni nor its source. They are still ours, never a file to keep in place
// of the reference plugin kept there.
func TestOurOldEntriesAreNeverKeptAsOriginals(t *testing.T) {
	for _, mode := range []install.Mode{install.Hardlink, install.Copy} {
		for _, how := range []string{"interrupted", "only one name"} {
			t.Run(string(mode)+"/"+how, func(t *testing.T) {
				t.Parallel()
				f := newFixture(t)
				it.PlantReferencePlugins(t, f.dir)
				found := it.Listing(t, f.dir)
				f.install(t, mode)
				next := nextRelease(t, f.src)
				if how == "interrupted" {
					tmp := filepath.Join(f.dir, ".cn")
					pt.RequireSameContent(t, f.src, filepath.Join(f.dir, "cni"))
					data, err := os.ReadFile(next)
					require.NoError(t, err)
					require.NoError(t, os.WriteFile(tmp, data, 0o755))
					require.NoError(t, os.Rename(tmp, filepath.Join(f.dir, "cni")))
				}
				f.src = next
				if how == "only one name" {
					o, out := f.options(mode)
					o.Names = []string{"bridge"}
					require.NoError(t, install.Install(o), out.String())
				}

				out := f.install(t, mode)

				assert.NotContains(t, out, "replace ")
				assert.Equal(t, keptListing(found), onlyKept(it.Listing(t, f.dir)))
				f.assertOurs(t, mode)
				f.uninstall(t, mode)
				assert.Equal(t, found, it.Listing(t, f.dir))
			})
		}
	}
}

// nextRelease writes a copy of bin with bytes appended: another build that still runs.
func nextRelease(t *testing.T, bin string) string {
	t.Helper()
	data, err := os.ReadFile(bin)
	require.NoError(t, err)
	next := filepath.Join(t.TempDir(), "cni")
	require.NoError(t, os.WriteFile(next, append(data, "\x00next release\x00"...), 0o755))
	return next
}

// A KeptDir that is a symlink would send the originals elsewhere, out of the plugin
// directory's filesystem: refused before anything changes.
func TestKeptDirThatIsNotADirectoryIsRefused(t *testing.T) {
	f := newFixture(t)
	it.PlantReferencePlugins(t, f.dir)
	elsewhere := t.TempDir()
	require.NoError(t, os.Symlink(elsewhere, filepath.Join(f.dir, install.KeptDir)))
	found := it.Listing(t, f.dir)

	o, _ := f.options(install.Symlink)
	err := install.Install(o)

	require.ErrorContains(t, err, "refusing to keep replaced files in "+filepath.Join(f.dir, install.KeptDir)+": it is not a directory")
	assert.Equal(t, found, it.Listing(t, f.dir))
	assert.Empty(t, pt.Entries(t, elsewhere))
}
