package cli_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cnikit/cni/internal/runtime/install"
	it "github.com/cnikit/cni/internal/runtime/install/installtest"
	pt "github.com/cnikit/cni/internal/testbed/plugintest"
	"github.com/cnikit/cni/internal/testbed/testns"
)

// The tests below are those of scripts/install-symlinks.sh from before it became a
// wrapper of `cni install`: they run the command as the wrapper (make install) does,
// with --binary and without configs (--conf-dir empty), into temporary directories.

// installRun runs `cni install --conf-dir= ARGS` with env and says how it ended.
func installRun(t *testing.T, env []string, args ...string) run {
	t.Helper()
	o := pt.RunCommand(t, nil, append([]string{"PATH=/usr/bin:/bin"}, env...), nil, testns.Binary(t),
		append([]string{"install", "--conf-dir="}, args...)...)
	return run{code: o.Exit, stdout: o.Stdout, stderr: o.Stderr}
}

// cniInstall is installRun without env, and requires success.
func cniInstall(t *testing.T, args ...string) run {
	t.Helper()
	r := installRun(t, nil, args...)
	require.Equal(t, 0, r.code, "stdout:\n%s\nstderr:\n%s", r.stdout, r.stderr)
	return r
}

func (r run) lines() []string { return strings.Split(strings.TrimSpace(r.stdout), "\n") }

// requireNothingDone checks that a run did nothing but find every entry up to date.
func requireNothingDone(t *testing.T, r run, dir string) {
	t.Helper()
	lines := r.lines()
	require.Equal(t, "nothing to do: "+dir+" is up to date", lines[len(lines)-1])
	for _, line := range lines[:len(lines)-1] {
		assert.Regexp(t, `^(unchanged|verified) `, line, "the run did something")
	}
}

// atLeastTwoNames returns the binary's names; filter tests need two to tell selected
// from unselected.
func atLeastTwoNames(t *testing.T) []string {
	t.Helper()
	names := pluginNames(t)
	require.GreaterOrEqual(t, len(names), 2, "cni --list must name at least two plugins: %v", names)
	return names
}

// upgradedBinary writes a copy of bin with extra trailing bytes: a different file that
// still runs, standing in for the next release.
func upgradedBinary(t *testing.T, bin string) string {
	t.Helper()
	data, err := os.ReadFile(bin)
	require.NoError(t, err)
	next := filepath.Join(t.TempDir(), "cni")
	require.NoError(t, os.WriteFile(next, append(data, []byte("\x00next-release\x00")...), 0o755))
	return next
}

// entryNames lists dir, so leftover temporary files show up in assertions.
func entryNames(t *testing.T, dir string) []string {
	t.Helper()
	require.DirExists(t, dir)
	return pt.Entries(t, dir)
}

// assertEntry checks that dir/name is what mode installs for dir/cni.
func assertEntry(t *testing.T, dir, mode, name string) {
	t.Helper()
	p := filepath.Join(dir, name)
	fi, err := os.Lstat(p)
	require.NoError(t, err, "%s missing", p)
	cniInfo, err := os.Stat(filepath.Join(dir, "cni"))
	require.NoError(t, err)
	switch mode {
	case "symlink":
		require.Equal(t, os.ModeSymlink, fi.Mode()&os.ModeSymlink, "%s is not a symlink", p)
		link, err := os.Readlink(p)
		require.NoError(t, err)
		assert.Equal(t, "cni", link, "%s must be a relative link to cni", p)
	case "hardlink":
		require.True(t, fi.Mode().IsRegular(), "%s is not a regular file", p)
		assert.True(t, os.SameFile(fi, cniInfo), "%s is not a hardlink of cni", p)
	case "copy":
		require.True(t, fi.Mode().IsRegular(), "%s is not a regular file", p)
		assert.False(t, os.SameFile(fi, cniInfo), "%s is a hardlink, not a copy", p)
		assert.Equal(t, os.FileMode(0o755), fi.Mode().Perm())
		pt.RequireSameContent(t, filepath.Join(dir, "cni"), p)
	default:
		t.Fatalf("unknown mode %q", mode)
	}
}

// assertAnswersVersion runs dir/name the way a runtime asks for VERSION.
func assertAnswersVersion(t *testing.T, dir, name string) {
	t.Helper()
	o := pt.RunCommand(t, nil, []string{"CNI_COMMAND=VERSION"}, nil, filepath.Join(dir, name))
	require.Equal(t, 0, o.Exit, "CNI_COMMAND=VERSION %s: %s", name, o.Stderr)
	assert.Contains(t, o.Stdout, `"cniVersion"`, "VERSION output of %s", name)
}

// assertInstalled checks the binary, every name and that no temporary entries were
// left behind.
func assertInstalled(t *testing.T, dir, mode, bin string, names []string) {
	t.Helper()
	pt.RequireSameContent(t, bin, filepath.Join(dir, "cni"))
	fi, err := os.Lstat(filepath.Join(dir, "cni"))
	require.NoError(t, err)
	assert.True(t, fi.Mode().IsRegular(), "cni must be a regular file")
	assert.Equal(t, os.FileMode(0o755), fi.Mode().Perm())
	for _, name := range names {
		assertEntry(t, dir, mode, name)
		assertAnswersVersion(t, dir, name)
	}
	assert.ElementsMatch(t, append([]string{"cni"}, names...), entryNames(t, dir))
}

var modes = []string{"symlink", "hardlink", "copy"}

// forEachMode runs body as a parallel subtest per mode, with dir a fresh directory that
// mode's install has filled.
func forEachMode(t *testing.T, body func(t *testing.T, mode, dir string)) {
	for _, mode := range modes {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			cniInstall(t, "--dir", dir, "--binary", testns.Binary(t), "--mode", mode)
			body(t, mode, dir)
		})
	}
}

func TestInstallBinaryCreatesEveryListedName(t *testing.T) {
	names := pluginNames(t)
	for _, mode := range modes {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			dir := filepath.Join(t.TempDir(), "opt", "cni", "bin")
			r := cniInstall(t, "--dir", dir, "--binary", testns.Binary(t), "--mode", mode)
			assertInstalled(t, dir, mode, testns.Binary(t), names)
			for _, name := range names {
				assert.Contains(t, r.stdout, "verified "+filepath.Join(dir, name)+"\n")
			}
		})
	}
}

func TestInstallBinarySecondRunChangesNothing(t *testing.T) {
	forEachMode(t, func(t *testing.T, mode, dir string) {
		before := pt.Snapshot(t, dir)

		r := cniInstall(t, "--dir", dir, "--binary", testns.Binary(t), "--mode", mode)

		assert.Equal(t, before, pt.Snapshot(t, dir))
		requireNothingDone(t, r, dir)
	})
}

func TestInstallBinaryUpgradeRenamesNewBinaryIntoPlace(t *testing.T) {
	names := pluginNames(t)
	bin := testns.Binary(t)
	for _, mode := range modes {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			root := t.TempDir()
			dir := filepath.Join(root, "bin")
			cniInstall(t, "--dir", dir, "--binary", bin, "--mode", mode)
			// A second name for the old inode, like a plugin process still running the
			// old release: it must keep the old bytes.
			running := filepath.Join(root, "running-cni")
			require.NoError(t, os.Link(filepath.Join(dir, "cni"), running))
			next := upgradedBinary(t, bin)

			r := cniInstall(t, "--dir", dir, "--binary", next, "--mode", mode)

			assert.Contains(t, r.stdout, "install "+filepath.Join(dir, "cni"))
			pt.RequireSameContent(t, bin, running)
			assertInstalled(t, dir, mode, next, names)
		})
	}
}

func TestInstallBinarySymlinksSurviveUpgradeUntouched(t *testing.T) {
	dir := t.TempDir()
	cniInstall(t, "--dir", dir, "--binary", testns.Binary(t))
	before := pt.Snapshot(t, dir)

	cniInstall(t, "--dir", dir, "--binary", upgradedBinary(t, testns.Binary(t)))

	after := pt.Snapshot(t, dir)
	for name, e := range before {
		if filepath.Base(name) == "cni" {
			assert.NotEqual(t, e.Inode, after[name].Inode, "cni must be a new inode, not rewritten in place")
			continue
		}
		assert.Equal(t, e, after[name], "%s changed", name)
	}
}

func TestInstallBinaryRefusesForeignEntryUnlessForced(t *testing.T) {
	names := pluginNames(t)
	bin := testns.Binary(t)
	// Not a reference plugin's name: those are taken over without --force.
	victim := "chain"
	require.Contains(t, names, victim)
	cases := []struct {
		name  string
		plant func(t *testing.T, path string)
		what  string
	}{
		{
			name: "regular file",
			plant: func(t *testing.T, path string) {
				require.NoError(t, os.WriteFile(path, []byte("#!/bin/sh\necho other vendor\n"), 0o755))
			},
			what: "file not installed by cni",
		},
		{
			name: "symlink elsewhere",
			plant: func(t *testing.T, path string) {
				require.NoError(t, os.Symlink("/usr/lib/other-vendor/"+victim, path))
			},
			what: "symlink to /usr/lib/other-vendor/" + victim,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			path := filepath.Join(dir, victim)
			tc.plant(t, path)
			before := pt.Snapshot(t, dir)

			r := installRun(t, nil, "--dir", dir, "--binary", bin)

			assert.NotEqual(t, 0, r.code)
			assert.Contains(t, r.stderr, "refusing to replace "+path+": "+tc.what)
			assert.Equal(t, before, pt.Snapshot(t, dir), "a refused run must change nothing")
			found := it.Listing(t, dir)

			r = cniInstall(t, "--dir", dir, "--binary", bin, "--force")
			kept := filepath.Join(dir, install.KeptDir, victim)
			assert.Contains(t, r.stdout, "replace "+path+" (kept as "+kept+" for --uninstall)\n")
			for _, name := range names {
				assertEntry(t, dir, "symlink", name)
			}
			cniInstall(t, "--dir", dir, "--binary", bin, "--uninstall")
			assert.Equal(t, found, it.Listing(t, dir), "--force kept what it replaced, and --uninstall put it back")
		})
	}
}

func TestInstallBinaryOnlyAndSkipSelectNames(t *testing.T) {
	names := atLeastTwoNames(t)
	first, rest := names[0], names[1:]
	cases := []struct {
		name string
		args []string
		want []string
	}{
		{name: "only one", args: []string{"--only", first}, want: []string{first}},
		{name: "only all", args: []string{"--only", strings.Join(names, ",")}, want: names},
		{name: "skip one", args: []string{"--skip", first}, want: rest},
		{name: "only and skip", args: []string{"--only", strings.Join(names, ","), "--skip", first}, want: rest},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			cniInstall(t, append([]string{"--dir", dir, "--binary", testns.Binary(t)}, tc.args...)...)
			assertInstalled(t, dir, "symlink", testns.Binary(t), tc.want)
		})
	}
}

func TestInstallBinaryOnlyWithUnknownNameFailsBeforeChanging(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "bin")

	r := installRun(t, nil, "--dir", dir, "--binary", testns.Binary(t), "--only", "no-such-plugin")

	assert.NotEqual(t, 0, r.code)
	assert.Contains(t, r.stderr, "unknown plugin name in --only: no-such-plugin")
	assert.NoDirExists(t, dir)
}

func TestInstallBinaryDryRunChangesNothing(t *testing.T) {
	names := pluginNames(t)
	bin := testns.Binary(t)
	cases := []struct {
		name    string
		prepare func(t *testing.T, dir string)
		args    []string
	}{
		{name: "fresh", prepare: func(t *testing.T, dir string) {}},
		{
			name: "upgrade in hardlink mode",
			prepare: func(t *testing.T, dir string) {
				cniInstall(t, "--dir", dir, "--binary", bin, "--mode", "hardlink")
			},
			args: []string{"--mode", "hardlink", "--binary", upgradedBinary(t, bin)},
		},
		{
			name: "switch to copy",
			prepare: func(t *testing.T, dir string) {
				cniInstall(t, "--dir", dir, "--binary", bin)
			},
			args: []string{"--mode", "copy"},
		},
		{
			name: "uninstall",
			prepare: func(t *testing.T, dir string) {
				cniInstall(t, "--dir", dir, "--binary", bin)
			},
			args: []string{"--uninstall"},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir := filepath.Join(t.TempDir(), "bin")
			tc.prepare(t, dir)
			before := pt.Snapshot(t, dir)

			args := append([]string{"--dir", dir, "--binary", bin}, tc.args...)
			r := cniInstall(t, append(args, "--dry-run")...)

			assert.Equal(t, before, pt.Snapshot(t, dir))
			assert.Contains(t, r.stdout, "would ")
			for _, name := range names {
				assert.Contains(t, r.stdout, filepath.Join(dir, name), "dry run must name every entry")
			}
		})
	}
}

func TestInstallBinaryUninstallRemovesOnlyOurEntries(t *testing.T) {
	names := pluginNames(t)
	forEachMode(t, func(t *testing.T, mode, dir string) {
		// Another vendor took over one of our names, and dropped its own plugin and a
		// link next to ours.
		taken := filepath.Join(dir, names[0])
		require.NoError(t, os.Remove(taken))
		require.NoError(t, os.WriteFile(taken, []byte("other vendor\n"), 0o755))
		vendor := filepath.Join(dir, "vendor-plugin")
		require.NoError(t, os.WriteFile(vendor, []byte("vendor\n"), 0o755))
		vendorLink := filepath.Join(dir, "vendor-link")
		require.NoError(t, os.Symlink("vendor-plugin", vendorLink))

		r := cniInstall(t, "--dir", dir, "--binary", testns.Binary(t), "--uninstall")

		assert.Contains(t, r.stdout, "keep "+taken)
		assert.ElementsMatch(t, []string{names[0], "vendor-plugin", "vendor-link"}, entryNames(t, dir))
		content, err := os.ReadFile(taken)
		require.NoError(t, err)
		assert.Equal(t, "other vendor\n", string(content))
	})
}

func TestInstallBinaryUninstallKeepsBinaryWhileSkippedEntriesUseIt(t *testing.T) {
	names := pluginNames(t)
	forEachMode(t, func(t *testing.T, mode, dir string) {

		r := cniInstall(t, "--dir", dir, "--binary", testns.Binary(t), "--uninstall", "--skip", names[0])

		assert.Contains(t, r.stdout, "keep "+filepath.Join(dir, "cni"))
		assert.ElementsMatch(t, []string{"cni", names[0]}, entryNames(t, dir))
		assertAnswersVersion(t, dir, names[0])

		cniInstall(t, "--dir", dir, "--binary", testns.Binary(t), "--uninstall")
		assert.Empty(t, entryNames(t, dir))
	})
}

func TestInstallListFileInstallsWithoutRunningBinary(t *testing.T) {
	root := t.TempDir()
	// A binary for another architecture cannot run here; this one records any attempt
	// instead.
	marker := filepath.Join(root, "was-executed")
	bin := filepath.Join(root, "cni-other-arch")
	require.NoError(t, os.WriteFile(bin, []byte("#!/bin/sh\ntouch "+marker+"\nexit 1\n"), 0o755))
	list := filepath.Join(root, "plugins.txt")
	require.NoError(t, os.WriteFile(list, []byte("# generated by cni --list\nloopback\n\nbridge\nhost-local # ipam\n"), 0o644))
	dir := filepath.Join(root, "bin")

	r := cniInstall(t, "--dir", dir, "--binary", bin, "--list-file", list, "--mode", "hardlink")

	assert.NoFileExists(t, marker)
	assert.Contains(t, r.stdout, "skipped verification")
	pt.RequireSameContent(t, bin, filepath.Join(dir, "cni"))
	for _, name := range []string{"loopback", "bridge", "host-local"} {
		assertEntry(t, dir, "hardlink", name)
	}
	assert.ElementsMatch(t, []string{"cni", "loopback", "bridge", "host-local"}, entryNames(t, dir))
}

func TestInstallListFileRejectsUnsafeNames(t *testing.T) {
	for _, bad := range []string{"../escape", ".hidden", "cni", "a/b"} {
		t.Run(bad, func(t *testing.T) {
			t.Parallel()
			root := t.TempDir()
			list := filepath.Join(root, "plugins.txt")
			require.NoError(t, os.WriteFile(list, []byte("loopback\n"+bad+"\n"), 0o644))
			dir := filepath.Join(root, "bin")

			r := installRun(t, nil, "--dir", dir, "--binary", testns.Binary(t), "--list-file", list)

			assert.NotEqual(t, 0, r.code)
			assert.Contains(t, r.stderr, `invalid plugin name "`+bad+`"`)
			assert.NoDirExists(t, dir)
		})
	}
}

func TestInstallDestdirPrefixesDirOnce(t *testing.T) {
	names := pluginNames(t)
	cases := []struct {
		name string
		dir  func(destdir string) string
	}{
		{name: "plain dir", dir: func(string) string { return "/opt/cni/bin" }},
		// make install DESTDIR=x exports DESTDIR and passes --dir x/opt/cni/bin.
		{name: "dir already under destdir", dir: func(d string) string { return filepath.Join(d, "opt", "cni", "bin") }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			destdir := t.TempDir()

			r := installRun(t, nil, "--destdir", destdir, "--dir", tc.dir(destdir), "--binary", testns.Binary(t))

			require.Equal(t, 0, r.code, "stderr:\n%s", r.stderr)
			assertInstalled(t, filepath.Join(destdir, "opt", "cni", "bin"), "symlink", testns.Binary(t), names)
			assert.ElementsMatch(t, []string{"opt"}, entryNames(t, destdir))
		})
	}
}

// A staging root prefixes absolute paths only: a relative --dir or --conf-dir under
// --destdir is refused before anything is written (it once became "/stage" + "bin").
func TestInstallDestdirRefusesARelativeDir(t *testing.T) {
	for _, args := range [][]string{{"--dir", "bin"}, {"--dir", "/opt/cni/bin", "--conf-dir", "net.d"}} {
		destdir := t.TempDir()
		r := installRun(t, nil, append([]string{"--destdir", destdir, "--binary", testns.Binary(t)}, args...)...)
		assert.Equal(t, 2, r.code, "%v: stderr:\n%s", args, r.stderr)
		assert.Contains(t, r.stderr, "--destdir needs an absolute --dir and --conf-dir", args)
		assert.Empty(t, entryNames(t, destdir), args)
		assert.NoDirExists(t, destdir+"bin", args)
	}
}

func TestInstallBinaryTakesOverTheReferencePluginsAndUninstallPutsThemBack(t *testing.T) {
	names := pluginNames(t)
	bin := testns.Binary(t)
	for _, mode := range modes {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			dir := filepath.Join(t.TempDir(), "opt", "cni", "bin")
			planted := it.PlantReferencePlugins(t, dir)
			found := it.Listing(t, dir)

			r := cniInstall(t, "--dir", dir, "--binary", bin, "--mode", mode)

			for _, name := range names {
				assertEntry(t, dir, mode, name)
				assertAnswersVersion(t, dir, name)
			}
			for _, n := range planted {
				kept := filepath.Join(dir, install.KeptDir, n)
				assert.Contains(t, r.stdout, "replace "+filepath.Join(dir, n)+" (kept as "+kept+" for --uninstall)\n")
			}
			assert.Equal(t, found, it.Listing(t, filepath.Join(dir, install.KeptDir)), "the originals kept, files as the same inode")
			again := cniInstall(t, "--dir", dir, "--binary", bin, "--mode", mode)
			requireNothingDone(t, again, dir)

			r = cniInstall(t, "--dir", dir, "--binary", bin, "--uninstall")

			for _, n := range planted {
				kept := filepath.Join(dir, install.KeptDir, n)
				assert.Contains(t, r.stdout, "restore "+filepath.Join(dir, n)+" (from "+kept+")\n")
			}
			assert.Equal(t, found, it.Listing(t, dir), "the directory exactly as found")
		})
	}
}

// A run killed after keeping an original and before renaming ours over it (its
// temporary name left in KeptDir too) is finished by the next run, whose --uninstall
// then gives the node back as it was; or --uninstall straight away drops the second
// names.
func TestInstallBinaryFinishesAnInterruptedTakeover(t *testing.T) {
	bin := testns.Binary(t)
	interrupted := func(t *testing.T) (dir string, found map[string]it.Entry) {
		dir = filepath.Join(t.TempDir(), "bin")
		it.PlantReferencePlugins(t, dir)
		found = it.Listing(t, dir)
		keptDir := filepath.Join(dir, install.KeptDir)
		require.NoError(t, os.Mkdir(keptDir, 0o755))
		require.NoError(t, os.Link(filepath.Join(dir, "bridge"), filepath.Join(keptDir, "bridge")))
		require.NoError(t, os.Symlink(it.FlannelTarget, filepath.Join(keptDir, "flannel")))
		require.NoError(t, os.Link(filepath.Join(dir, "ptp"), filepath.Join(keptDir, ".cni-tmp-0123456789abcdef")))
		return dir, found
	}
	t.Run("install", func(t *testing.T) {
		t.Parallel()
		dir, found := interrupted(t)

		cniInstall(t, "--dir", dir, "--binary", bin, "--mode", "hardlink")

		kept := it.Listing(t, filepath.Join(dir, install.KeptDir))
		assert.Equal(t, found["bridge"], kept["bridge"], "the original, not ours")
		assert.Equal(t, found["flannel"], kept["flannel"])
		assertEntry(t, dir, "hardlink", "bridge")
		cniInstall(t, "--dir", dir, "--binary", bin, "--uninstall")
		assert.Equal(t, found, it.Listing(t, dir))
	})
	t.Run("uninstall", func(t *testing.T) {
		t.Parallel()
		dir, found := interrupted(t)

		r := cniInstall(t, "--dir", dir, "--binary", bin, "--uninstall")

		assert.Contains(t, r.stdout, "remove "+filepath.Join(dir, install.KeptDir, "bridge")+" (the same file is at "+filepath.Join(dir, "bridge")+")\n")
		assert.Equal(t, found, it.Listing(t, dir))
	})
}

// The kubernetes-cni package reinstalled over ours: the next run takes the newer file
// over in place of the kept one, and --uninstall puts the newer one back.
func TestInstallBinaryKeepsTheNewerReferencePlugin(t *testing.T) {
	bin := testns.Binary(t)
	dir := filepath.Join(t.TempDir(), "bin")
	it.PlantReferencePlugins(t, dir)
	cniInstall(t, "--dir", dir, "--binary", bin)
	bridge := filepath.Join(dir, "bridge")
	newer := filepath.Join(dir, ".bridge.dpkg-new")
	require.NoError(t, os.WriteFile(newer, []byte("#!/bin/sh\necho 'reference bridge v1.9.2'\n"), 0o755))
	require.NoError(t, os.Rename(newer, bridge))
	reinstalled := it.Listing(t, dir)["bridge"]

	r := cniInstall(t, "--dir", dir, "--binary", bin)

	kept := filepath.Join(dir, install.KeptDir, "bridge")
	assert.Contains(t, r.stdout, "replace "+bridge+" (kept as "+kept+" for --uninstall, in place of the older file kept there)\n")
	assertEntry(t, dir, "symlink", "bridge")
	cniInstall(t, "--dir", dir, "--binary", bin, "--uninstall")
	assert.Equal(t, reinstalled, it.Listing(t, dir)["bridge"])
}

// An upgrade killed after the new cni went in and before the hardlinks followed leaves
// links of the old cni at every name: the next run takes them as ours, never as files
// to keep in place of the reference plugins kept there.
func TestInstallBinaryNeverKeepsOurOldEntriesAsOriginals(t *testing.T) {
	bin := testns.Binary(t)
	dir := filepath.Join(t.TempDir(), "bin")
	it.PlantReferencePlugins(t, dir)
	found := it.Listing(t, dir)
	cniInstall(t, "--dir", dir, "--binary", bin, "--mode", "hardlink")
	next := upgradedBinary(t, bin)
	data, err := os.ReadFile(next)
	require.NoError(t, err)
	tmp := filepath.Join(dir, ".cni-install.killed")
	require.NoError(t, os.WriteFile(tmp, data, 0o755))
	require.NoError(t, os.Rename(tmp, filepath.Join(dir, "cni")))

	r := cniInstall(t, "--dir", dir, "--binary", next, "--mode", "hardlink")

	assert.NotContains(t, r.stdout, "replace ")
	assert.Equal(t, found, it.Listing(t, filepath.Join(dir, install.KeptDir)))
	for _, name := range pluginNames(t) {
		assertEntry(t, dir, "hardlink", name)
	}
	cniInstall(t, "--dir", dir, "--binary", next, "--uninstall")
	assert.Equal(t, found, it.Listing(t, dir))
}
