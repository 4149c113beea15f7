// Package scripts holds the tests of the shell scripts that ship next to the
// cni binary. The tests run install-symlinks.sh against the real cni binary in
// temporary directories; they need no root and touch no network state.
package scripts

import (
	"bytes"
	"crypto/sha256"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	cniinstall "github.com/cnikit/cni/internal/runtime/install"
	it "github.com/cnikit/cni/internal/runtime/install/installtest"
	pt "github.com/cnikit/cni/internal/testbed/plugintest"
)

const script = "install-symlinks.sh"

// cniBinary is the product binary under test, set once by TestMain.
var cniBinary string

// TestMain builds cmd/cni once for all tests, or takes the prebuilt binary
// named by CNI_TEST_BINARY (for CI that already built it).
func TestMain(m *testing.M) {
	os.Exit(runTests(m))
}

func runTests(m *testing.M) int {
	if bin := os.Getenv("CNI_TEST_BINARY"); bin != "" {
		abs, err := filepath.Abs(bin)
		if err != nil {
			fmt.Fprintf(os.Stderr, "CNI_TEST_BINARY %q: %v\n", bin, err)
			return 1
		}
		cniBinary = abs
		return m.Run()
	}
	tmp, err := os.MkdirTemp("", "install-symlinks-test")
	if err != nil {
		fmt.Fprintf(os.Stderr, "temp dir: %v\n", err)
		return 1
	}
	defer os.RemoveAll(tmp)
	cniBinary = filepath.Join(tmp, "cni")
	build := exec.Command("go", "build", "-o", cniBinary, "./cmd/cni")
	build.Dir = ".."
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "go build ./cmd/cni: %v\n%s", err, out)
		return 1
	}
	return m.Run()
}

// result is what one run of the script produced.
type result struct {
	stdout, stderr string
	code           int
}

// lines returns stdout split into lines.
func (r result) lines() []string {
	return strings.Split(strings.TrimSpace(r.stdout), "\n")
}

// run executes the script with shell ("sh" or "bash") and a clean
// environment: no DESTDIR or CNI_* from the caller leaks into it.
func run(t *testing.T, shell string, extraEnv []string, args ...string) result {
	t.Helper()
	path, err := filepath.Abs(script)
	require.NoError(t, err)
	cmd := exec.Command(shell, append([]string{path}, args...)...)
	cmd.Dir = t.TempDir()
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "DESTDIR=") || strings.HasPrefix(kv, "CNI_") {
			continue
		}
		cmd.Env = append(cmd.Env, kv)
	}
	cmd.Env = append(cmd.Env, extraEnv...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err = cmd.Run()
	code := 0
	if err != nil {
		exitErr, ok := err.(*exec.ExitError)
		require.True(t, ok, "run %s: %v", script, err)
		code = exitErr.ExitCode()
	}
	return result{stdout: stdout.String(), stderr: stderr.String(), code: code}
}

// install runs the script with sh and requires success.
func install(t *testing.T, args ...string) result {
	t.Helper()
	r := run(t, "sh", nil, args...)
	require.Equal(t, 0, r.code, "stdout:\n%s\nstderr:\n%s", r.stdout, r.stderr)
	return r
}

// pluginNames asks the binary for its registered plugin names.
func pluginNames(t *testing.T, bin string) []string {
	t.Helper()
	out, err := exec.Command(bin, "--list").Output()
	require.NoError(t, err, "%s --list", bin)
	names := strings.Fields(string(out))
	require.NotEmpty(t, names, "%s --list printed no names", bin)
	return names
}

// atLeastTwoNames returns the binary's names; filter tests need two to tell
// selected from unselected.
func atLeastTwoNames(t *testing.T) []string {
	t.Helper()
	names := pluginNames(t, cniBinary)
	require.GreaterOrEqual(t, len(names), 2, "cni --list must name at least two plugins: %v", names)
	return names
}

// upgradedBinary writes a copy of bin with extra trailing bytes: a different
// file that still runs, standing in for the next release.
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
	cmd := exec.Command(filepath.Join(dir, name))
	cmd.Env = []string{"CNI_COMMAND=VERSION"}
	out, err := cmd.Output()
	require.NoError(t, err, "CNI_COMMAND=VERSION %s", name)
	assert.Contains(t, string(out), `"cniVersion"`, "VERSION output of %s", name)
}

// assertInstalled checks the binary, every name and that no temporary
// entries were left behind.
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
			install(t, "--dir", dir, "--binary", cniBinary, "--mode", mode)
			body(t, mode, dir)
		})
	}
}

func TestFreshInstallCreatesEveryListedName(t *testing.T) {
	names := pluginNames(t, cniBinary)
	for _, shell := range []string{"sh", "bash"} {
		for _, mode := range modes {
			t.Run(shell+"/"+mode, func(t *testing.T) {
				t.Parallel()
				dir := filepath.Join(t.TempDir(), "opt", "cni", "bin")
				r := run(t, shell, nil, "--dir", dir, "--binary", cniBinary, "--mode", mode)
				require.Equal(t, 0, r.code, "stderr:\n%s", r.stderr)
				assertInstalled(t, dir, mode, cniBinary, names)
				for _, name := range names {
					assert.Contains(t, r.stdout, "verified "+filepath.Join(dir, name)+"\n")
				}
			})
		}
	}
}

func TestSecondRunChangesNothing(t *testing.T) {
	forEachMode(t, func(t *testing.T, mode, dir string) {
		before := pt.Snapshot(t, dir)

		r := install(t, "--dir", dir, "--binary", cniBinary, "--mode", mode)

		assert.Equal(t, before, pt.Snapshot(t, dir))
		for _, line := range r.lines() {
			assert.True(t, strings.HasPrefix(line, "unchanged ") || strings.HasPrefix(line, "verified "),
				"second run did something: %q", line)
		}
	})
}

func TestUpgradeRenamesNewBinaryIntoPlace(t *testing.T) {
	names := pluginNames(t, cniBinary)
	for _, mode := range modes {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			root := t.TempDir()
			dir := filepath.Join(root, "bin")
			install(t, "--dir", dir, "--binary", cniBinary, "--mode", mode)
			// A second name for the old inode, like a plugin process still
			// running the old release: it must keep the old bytes.
			running := filepath.Join(root, "running-cni")
			require.NoError(t, os.Link(filepath.Join(dir, "cni"), running))
			next := upgradedBinary(t, cniBinary)

			r := install(t, "--dir", dir, "--binary", next, "--mode", mode)

			assert.Contains(t, r.stdout, "install "+filepath.Join(dir, "cni"))
			pt.RequireSameContent(t, cniBinary, running)
			assertInstalled(t, dir, mode, next, names)
		})
	}
}

func TestSymlinksSurviveUpgradeUntouched(t *testing.T) {
	dir := t.TempDir()
	install(t, "--dir", dir, "--binary", cniBinary)
	before := pt.Snapshot(t, dir)

	install(t, "--dir", dir, "--binary", upgradedBinary(t, cniBinary))

	after := pt.Snapshot(t, dir)
	for name, e := range before {
		if filepath.Base(name) == "cni" {
			assert.NotEqual(t, e.Inode, after[name].Inode, "cni must be a new inode, not rewritten in place")
			continue
		}
		assert.Equal(t, e, after[name], "%s changed", name)
	}
}

func TestRefusesForeignEntryUnlessForced(t *testing.T) {
	names := pluginNames(t, cniBinary)
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

			r := run(t, "sh", nil, "--dir", dir, "--binary", cniBinary)

			assert.NotEqual(t, 0, r.code)
			assert.Contains(t, r.stderr, "refusing to replace "+path+": "+tc.what)
			assert.Equal(t, before, pt.Snapshot(t, dir), "a refused run must change nothing")
			found := it.Listing(t, dir)

			r = install(t, "--dir", dir, "--binary", cniBinary, "--force")
			kept := filepath.Join(dir, cniinstall.KeptDir, victim)
			assert.Contains(t, r.stdout, "replace "+path+" (kept as "+kept+" for --uninstall)\n")
			for _, name := range names {
				assertEntry(t, dir, "symlink", name)
			}
			install(t, "--dir", dir, "--binary", cniBinary, "--uninstall")
			assert.Equal(t, found, it.Listing(t, dir), "--force kept what it replaced, and --uninstall put it back")
		})
	}
}

func TestOnlyAndSkipSelectNames(t *testing.T) {
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
			install(t, append([]string{"--dir", dir, "--binary", cniBinary}, tc.args...)...)
			assertInstalled(t, dir, "symlink", cniBinary, tc.want)
		})
	}
}

func TestOnlyWithUnknownNameFailsBeforeChanging(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "bin")

	r := run(t, "sh", nil, "--dir", dir, "--binary", cniBinary, "--only", "no-such-plugin")

	assert.NotEqual(t, 0, r.code)
	assert.Contains(t, r.stderr, "unknown plugin name in --only: no-such-plugin")
	assert.NoDirExists(t, dir)
}

func TestDryRunChangesNothing(t *testing.T) {
	names := pluginNames(t, cniBinary)
	cases := []struct {
		name    string
		prepare func(t *testing.T, dir string)
		args    []string
	}{
		{name: "fresh", prepare: func(t *testing.T, dir string) {}},
		{
			name: "upgrade in hardlink mode",
			prepare: func(t *testing.T, dir string) {
				install(t, "--dir", dir, "--binary", cniBinary, "--mode", "hardlink")
			},
			args: []string{"--mode", "hardlink", "--binary", upgradedBinary(t, cniBinary)},
		},
		{
			name: "switch to copy",
			prepare: func(t *testing.T, dir string) {
				install(t, "--dir", dir, "--binary", cniBinary)
			},
			args: []string{"--mode", "copy"},
		},
		{
			name: "uninstall",
			prepare: func(t *testing.T, dir string) {
				install(t, "--dir", dir, "--binary", cniBinary)
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

			args := append([]string{"--dir", dir, "--binary", cniBinary}, tc.args...)
			r := install(t, append(args, "--dry-run")...)

			assert.Equal(t, before, pt.Snapshot(t, dir))
			assert.Contains(t, r.stdout, "would ")
			for _, name := range names {
				assert.Contains(t, r.stdout, filepath.Join(dir, name), "dry run must name every entry")
			}
		})
	}
}

func TestUninstallRemovesOnlyOurEntries(t *testing.T) {
	names := pluginNames(t, cniBinary)
	forEachMode(t, func(t *testing.T, mode, dir string) {
		// Another vendor took over one of our names, and dropped its own
		// plugin and a link next to ours.
		taken := filepath.Join(dir, names[0])
		require.NoError(t, os.Remove(taken))
		require.NoError(t, os.WriteFile(taken, []byte("other vendor\n"), 0o755))
		vendor := filepath.Join(dir, "vendor-plugin")
		require.NoError(t, os.WriteFile(vendor, []byte("vendor\n"), 0o755))
		vendorLink := filepath.Join(dir, "vendor-link")
		require.NoError(t, os.Symlink("vendor-plugin", vendorLink))

		r := install(t, "--dir", dir, "--binary", cniBinary, "--uninstall")

		assert.Contains(t, r.stdout, "keep "+taken)
		assert.ElementsMatch(t, []string{names[0], "vendor-plugin", "vendor-link"}, entryNames(t, dir))
		content, err := os.ReadFile(taken)
		require.NoError(t, err)
		assert.Equal(t, "other vendor\n", string(content))
	})
}

func TestUninstallWithoutBinaryUsesInstalledList(t *testing.T) {
	dir := t.TempDir()
	install(t, "--dir", dir, "--binary", cniBinary, "--mode", "copy")

	install(t, "--dir", dir, "--binary", filepath.Join(t.TempDir(), "gone"), "--uninstall")

	assert.Empty(t, entryNames(t, dir))
	assert.DirExists(t, dir)
}

func TestUninstallKeepsBinaryWhileSkippedEntriesUseIt(t *testing.T) {
	names := pluginNames(t, cniBinary)
	forEachMode(t, func(t *testing.T, mode, dir string) {

		r := install(t, "--dir", dir, "--binary", cniBinary, "--uninstall", "--skip", names[0])

		assert.Contains(t, r.stdout, "keep "+filepath.Join(dir, "cni"))
		assert.ElementsMatch(t, []string{"cni", names[0]}, entryNames(t, dir))
		assertAnswersVersion(t, dir, names[0])

		install(t, "--dir", dir, "--binary", cniBinary, "--uninstall")
		assert.Empty(t, entryNames(t, dir))
	})
}

func TestListFileInstallsWithoutRunningBinary(t *testing.T) {
	root := t.TempDir()
	// A binary for another architecture cannot run here; this one records
	// any attempt instead.
	marker := filepath.Join(root, "was-executed")
	bin := filepath.Join(root, "cni-other-arch")
	require.NoError(t, os.WriteFile(bin, []byte("#!/bin/sh\ntouch "+marker+"\nexit 1\n"), 0o755))
	list := filepath.Join(root, "plugins.txt")
	require.NoError(t, os.WriteFile(list, []byte("# generated by cni --list\nloopback\n\nbridge\nhost-local # ipam\n"), 0o644))
	dir := filepath.Join(root, "bin")

	r := install(t, "--dir", dir, "--binary", bin, "--list-file", list, "--mode", "hardlink")

	assert.NoFileExists(t, marker)
	assert.Contains(t, r.stdout, "skipped verification")
	pt.RequireSameContent(t, bin, filepath.Join(dir, "cni"))
	for _, name := range []string{"loopback", "bridge", "host-local"} {
		assertEntry(t, dir, "hardlink", name)
	}
	assert.ElementsMatch(t, []string{"cni", "loopback", "bridge", "host-local"}, entryNames(t, dir))
}

func TestListFileRejectsUnsafeNames(t *testing.T) {
	for _, bad := range []string{"../escape", ".hidden", "cni", "a/b"} {
		t.Run(bad, func(t *testing.T) {
			t.Parallel()
			root := t.TempDir()
			list := filepath.Join(root, "plugins.txt")
			require.NoError(t, os.WriteFile(list, []byte("loopback\n"+bad+"\n"), 0o644))
			dir := filepath.Join(root, "bin")

			r := run(t, "sh", nil, "--dir", dir, "--binary", cniBinary, "--list-file", list)

			assert.NotEqual(t, 0, r.code)
			assert.Contains(t, r.stderr, "invalid plugin name '"+bad+"'")
			assert.NoDirExists(t, dir)
		})
	}
}

func TestVerifyFailsForNameTheBinaryDoesNotServe(t *testing.T) {
	names := pluginNames(t, cniBinary)
	// A build whose --list names a plugin it cannot run: the list and the
	// registry drifted apart, which verification exists to catch.
	bin := filepath.Join(t.TempDir(), "cni")
	wrapper := fmt.Sprintf("#!/bin/bash\nif [ \"$1\" = --list ]; then %q --list; echo not-registered; exit; fi\nexec -a \"$0\" %q \"$@\"\n",
		cniBinary, cniBinary)
	require.NoError(t, os.WriteFile(bin, []byte(wrapper), 0o755))
	dir := t.TempDir()

	r := run(t, "sh", nil, "--dir", dir, "--binary", bin)

	assert.NotEqual(t, 0, r.code)
	assert.Contains(t, r.stderr, filepath.Join(dir, "not-registered")+" does not answer CNI_COMMAND=VERSION")
	for _, name := range names {
		assert.Contains(t, r.stdout, "verified "+filepath.Join(dir, name)+"\n")
	}

	r = install(t, "--dir", dir, "--binary", bin, "--no-verify")
	assert.Contains(t, r.stdout, "skipped verification")
}

func TestDestdirPrefixesDirOnce(t *testing.T) {
	names := pluginNames(t, cniBinary)
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

			r := run(t, "sh", []string{"DESTDIR=" + destdir}, "--dir", tc.dir(destdir), "--binary", cniBinary)

			require.Equal(t, 0, r.code, "stderr:\n%s", r.stderr)
			assertInstalled(t, filepath.Join(destdir, "opt", "cni", "bin"), "symlink", cniBinary, names)
			assert.ElementsMatch(t, []string{"opt"}, entryNames(t, destdir))
		})
	}
}

func TestUsageErrorsExitTwo(t *testing.T) {
	cases := [][]string{
		{"--bogus"},
		{"--mode", "reflink"},
		{"--dir"},
	}
	for _, args := range cases {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			t.Parallel()
			r := run(t, "sh", nil, args...)
			assert.Equal(t, 2, r.code)
			assert.Contains(t, r.stderr, "Usage:")
		})
	}
}

// node is a tree as a runtime sees it: for every entry its type, permissions, symlink
// target or content digest, and which entry it shares an inode with.
type node struct {
	Type, Perm, Link, Content, SameInodeAs string
}

// tree describes every entry under dir (those of the kept originals' directory too, by
// their path relative to dir), independent of inode numbers and times.
func tree(t *testing.T, dir string) map[string]node {
	t.Helper()
	var names []string
	for _, name := range entryNames(t, dir) {
		names = append(names, name)
		if name == cniinstall.KeptDir {
			for _, kept := range entryNames(t, filepath.Join(dir, name)) {
				names = append(names, filepath.Join(name, kept))
			}
		}
	}
	out := map[string]node{}
	inodes := map[uint64]string{}
	for _, name := range names {
		p := filepath.Join(dir, name)
		fi, err := os.Lstat(p)
		require.NoError(t, err)
		n := node{Perm: fi.Mode().Perm().String()}
		switch {
		case fi.Mode()&os.ModeSymlink != 0:
			n.Type = "symlink"
			n.Link, err = os.Readlink(p)
			require.NoError(t, err)
			n.Perm = ""
		case fi.Mode().IsRegular():
			n.Type = "file"
			data, err := os.ReadFile(p)
			require.NoError(t, err)
			n.Content = fmt.Sprintf("%d bytes, %x", len(data), sha256.Sum256(data))
			ino := fi.Sys().(*syscall.Stat_t).Ino
			if first, ok := inodes[ino]; ok {
				n.SameInodeAs = first
			} else {
				inodes[ino] = name
			}
		default:
			n.Type = fi.Mode().Type().String()
		}
		out[name] = n
	}
	return out
}

// goInstall runs `cni install` of the binary under test and requires success.
func goInstall(t *testing.T, args ...string) result {
	t.Helper()
	cmd := exec.Command(cniBinary, append([]string{"install"}, args...)...)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH")}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	require.NoError(t, cmd.Run(), "cni install %v\nstdout:\n%s\nstderr:\n%s", args, stdout.String(), stderr.String())
	return result{stdout: stdout.String(), stderr: stderr.String()}
}

// The script is for image builders with a shell, `cni install` for images without one;
// both must leave the same tree, accept each other's tree as up to date and uninstall
// each other's entries. Over a kubeadm node's reference plugins, both keep the same
// originals the same way, and each puts back those the other kept, as they were found.
func TestScriptAndInstallCommandAgree(t *testing.T) {
	names := pluginNames(t, cniBinary)
	cases := []struct {
		name  string
		args  []string
		plant bool
	}{
		{name: "symlink", args: []string{"--mode", "symlink"}},
		{name: "hardlink", args: []string{"--mode", "hardlink"}},
		{name: "copy", args: []string{"--mode", "copy"}},
		{name: "skip one", args: []string{"--skip", names[0]}},
		{name: "only two", args: []string{"--only", strings.Join(atLeastTwoNames(t)[:2], ","), "--mode", "hardlink"}},
		{name: "over the reference plugins", args: []string{"--mode", "symlink"}, plant: true},
		{name: "over the reference plugins, hardlink", args: []string{"--mode", "hardlink"}, plant: true},
		{name: "over the reference plugins, skip one", args: []string{"--mode", "copy", "--skip", "bridge"}, plant: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			byScript := filepath.Join(t.TempDir(), "opt", "cni", "bin")
			byCommand := filepath.Join(t.TempDir(), "opt", "cni", "bin")
			var foundByScript, foundByCommand map[string]it.Entry
			if tc.plant {
				it.PlantReferencePlugins(t, byScript)
				it.PlantReferencePlugins(t, byCommand)
				foundByScript, foundByCommand = it.Listing(t, byScript), it.Listing(t, byCommand)
			}

			install(t, append([]string{"--dir", byScript, "--binary", cniBinary}, tc.args...)...)
			goInstall(t, append([]string{"--dir", byCommand}, tc.args...)...)

			require.Equal(t, tree(t, byScript), tree(t, byCommand))
			if tc.plant {
				assert.Equal(t, keptOf(foundByScript, tc.args), it.Listing(t, filepath.Join(byScript, cniinstall.KeptDir)))
				assert.Equal(t, keptOf(foundByCommand, tc.args), it.Listing(t, filepath.Join(byCommand, cniinstall.KeptDir)))
			}

			before := pt.Snapshot(t, byScript)
			r := goInstall(t, append([]string{"--dir", byScript}, tc.args...)...)
			assert.Contains(t, r.stdout, "nothing to do:")
			assert.Equal(t, before, pt.Snapshot(t, byScript), "cni install takes the script's tree as up to date")

			before = pt.Snapshot(t, byCommand)
			r = install(t, append([]string{"--dir", byCommand, "--binary", cniBinary}, tc.args...)...)
			for _, line := range r.lines() {
				assert.Regexp(t, `^(unchanged|verified) `, line)
			}
			assert.Equal(t, before, pt.Snapshot(t, byCommand), "the script takes cni install's tree as up to date")

			for _, dir := range []string{byScript, byCommand} {
				require.NoError(t, os.WriteFile(filepath.Join(dir, "vendor-plugin"), []byte("vendor\n"), 0o755))
			}
			install(t, append([]string{"--dir", byCommand, "--binary", cniBinary, "--uninstall"}, tc.args...)...)
			goInstall(t, append([]string{"--dir", byScript, "--uninstall"}, tc.args...)...)
			assert.Equal(t, tree(t, byScript), tree(t, byCommand), "each uninstalls the other's entries alike")
			assert.Contains(t, entryNames(t, byScript), "vendor-plugin")
			if !tc.plant {
				return
			}
			for dir, found := range map[string]map[string]it.Entry{byScript: foundByScript, byCommand: foundByCommand} {
				left := it.Listing(t, dir)
				delete(left, "vendor-plugin")
				assert.Equal(t, found, left, "%s exactly as found", dir)
			}
		})
	}
}

// keptOf is what a listing of a node's plugin directory says its KeptDir must hold
// after an install with args: every entry but those --skip leaves alone.
func keptOf(found map[string]it.Entry, args []string) map[string]it.Entry {
	out := map[string]it.Entry{}
	for name, e := range found {
		out[name] = e
	}
	for i, a := range args {
		if a == "--skip" {
			delete(out, args[i+1])
		}
	}
	return out
}

// make demo must show the mapped port answering, on a machine without the nft tool too:
// PATH here holds every tool the demo uses except nft and iptables.
func TestDemoShowsTheMappedPortAnswering(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("the demo needs root (unshare --net --mount); make test runs as root")
	}
	bin := t.TempDir()
	for _, tool := range []string{"bash", "env", "unshare", "mount", "mktemp", "rm", "mkdir", "ln", "cat", "ip", "ss",
		"perl", "timeout", "seq", "sleep", "grep", "find", "wc", "readlink"} {
		p, err := exec.LookPath(tool)
		if err != nil && os.Getenv("CNI_TEST_BINARY") != "" {
			t.Skipf("make demo runs on a developer's machine; this one (the test-kernel VM) has no %s", tool)
		}
		require.NoError(t, err, "make demo needs %s", tool)
		require.NoError(t, os.Symlink(p, filepath.Join(bin, tool)))
	}
	demo, err := filepath.Abs("demo.sh")
	require.NoError(t, err)
	cmd := exec.Command(demo, cniBinary)
	cmd.Env = []string{"PATH=" + bin}
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", out)

	assert.Regexp(t, `hello from the container: 10\.88\.0\.\d+:80 answering 192\.0\.2\.2:\d+`, string(out))
	assert.Contains(t, string(out), "== after DEL: cache entries left: 0")
}

// The script's list of the reference plugins' names is the one cni install reads.
func TestScriptKnowsTheReferenceNames(t *testing.T) {
	data, err := os.ReadFile(script)
	require.NoError(t, err)
	_, rest, ok := strings.Cut(string(data), "\nreference_names='")
	require.True(t, ok, "%s sets reference_names='...'", script)
	list, _, ok := strings.Cut(rest, "'")
	require.True(t, ok)
	assert.ElementsMatch(t, cniinstall.ReferenceNames(), strings.Fields(list))
}

func TestScriptTakesOverTheReferencePluginsAndUninstallPutsThemBack(t *testing.T) {
	names := pluginNames(t, cniBinary)
	for _, shell := range []string{"sh", "bash"} {
		for _, mode := range modes {
			t.Run(shell+"/"+mode, func(t *testing.T) {
				t.Parallel()
				dir := filepath.Join(t.TempDir(), "opt", "cni", "bin")
				planted := it.PlantReferencePlugins(t, dir)
				found := it.Listing(t, dir)

				r := run(t, shell, nil, "--dir", dir, "--binary", cniBinary, "--mode", mode)

				require.Equal(t, 0, r.code, "stderr:\n%s", r.stderr)
				for _, name := range names {
					assertEntry(t, dir, mode, name)
					assertAnswersVersion(t, dir, name)
				}
				for _, n := range planted {
					kept := filepath.Join(dir, cniinstall.KeptDir, n)
					assert.Contains(t, r.stdout, "replace "+filepath.Join(dir, n)+" (kept as "+kept+" for --uninstall)\n")
				}
				assert.Equal(t, found, it.Listing(t, filepath.Join(dir, cniinstall.KeptDir)), "the originals kept, files as the same inode")
				again := run(t, shell, nil, "--dir", dir, "--binary", cniBinary, "--mode", mode)
				require.Equal(t, 0, again.code, "stderr:\n%s", again.stderr)
				for _, line := range again.lines() {
					assert.Regexp(t, `^(unchanged|verified) `, line, "a second run takes nothing over again")
				}

				r = run(t, shell, nil, "--dir", dir, "--binary", cniBinary, "--uninstall")

				require.Equal(t, 0, r.code, "stderr:\n%s", r.stderr)
				for _, n := range planted {
					kept := filepath.Join(dir, cniinstall.KeptDir, n)
					assert.Contains(t, r.stdout, "restore "+filepath.Join(dir, n)+" (from "+kept+")\n")
				}
				assert.Equal(t, found, it.Listing(t, dir), "the directory exactly as found")
			})
		}
	}
}

// A run killed after keeping an original and before renaming ours over it (here cni
// install's: its temporary name left in KeptDir too) is finished by the script, and the
// script's --uninstall then gives the node back as it was; or the script's --uninstall
// straight away drops the second names.
func TestScriptFinishesAnInterruptedTakeover(t *testing.T) {
	interrupted := func(t *testing.T) (dir string, found map[string]it.Entry) {
		dir = filepath.Join(t.TempDir(), "bin")
		it.PlantReferencePlugins(t, dir)
		found = it.Listing(t, dir)
		keptDir := filepath.Join(dir, cniinstall.KeptDir)
		require.NoError(t, os.Mkdir(keptDir, 0o755))
		require.NoError(t, os.Link(filepath.Join(dir, "bridge"), filepath.Join(keptDir, "bridge")))
		require.NoError(t, os.Symlink(it.FlannelTarget, filepath.Join(keptDir, "flannel")))
		require.NoError(t, os.Link(filepath.Join(dir, "ptp"), filepath.Join(keptDir, ".tp")))
		return dir, found
	}
	t.Run("install", func(t *testing.T) {
		t.Parallel()
		dir, found := interrupted(t)

		install(t, "--dir", dir, "--binary", cniBinary, "--mode", "hardlink")

		kept := it.Listing(t, filepath.Join(dir, cniinstall.KeptDir))
		assert.Equal(t, found["bridge"], kept["bridge"], "the original, not ours")
		assert.Equal(t, found["flannel"], kept["flannel"])
		assertEntry(t, dir, "hardlink", "bridge")
		install(t, "--dir", dir, "--binary", cniBinary, "--uninstall")
		assert.Equal(t, found, it.Listing(t, dir))
	})
	t.Run("uninstall", func(t *testing.T) {
		t.Parallel()
		dir, found := interrupted(t)

		r := install(t, "--dir", dir, "--binary", cniBinary, "--uninstall")

		assert.Contains(t, r.stdout, "remove "+filepath.Join(dir, cniinstall.KeptDir, "bridge")+" (the same file is at "+filepath.Join(dir, "bridge")+")\n")
		assert.Equal(t, found, it.Listing(t, dir))
	})
}

// The kubernetes-cni package reinstalled over ours: the script takes the newer file
// over in place of the kept one, and --uninstall puts the newer one back.
func TestScriptKeepsTheNewerReferencePlugin(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "bin")
	it.PlantReferencePlugins(t, dir)
	install(t, "--dir", dir, "--binary", cniBinary)
	bridge := filepath.Join(dir, "bridge")
	newer := filepath.Join(dir, ".bridge.dpkg-new")
	require.NoError(t, os.WriteFile(newer, []byte("#!/bin/sh\necho 'reference bridge v1.9.2'\n"), 0o755))
	require.NoError(t, os.Rename(newer, bridge))
	reinstalled := it.Listing(t, dir)["bridge"]

	r := install(t, "--dir", dir, "--binary", cniBinary)

	kept := filepath.Join(dir, cniinstall.KeptDir, "bridge")
	assert.Contains(t, r.stdout, "replace "+bridge+" (kept as "+kept+" for --uninstall, in place of the older file kept there)\n")
	assertEntry(t, dir, "symlink", "bridge")
	install(t, "--dir", dir, "--binary", cniBinary, "--uninstall")
	assert.Equal(t, reinstalled, it.Listing(t, dir)["bridge"])
}

// An upgrade killed after the new cni went in and before the hardlinks followed leaves
// links of the old cni at every name: the script's next run takes them as ours, never
// as files to keep in place of the reference plugins kept there.
func TestScriptNeverKeepsOurOldEntriesAsOriginals(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "bin")
	it.PlantReferencePlugins(t, dir)
	found := it.Listing(t, dir)
	install(t, "--dir", dir, "--binary", cniBinary, "--mode", "hardlink")
	next := upgradedBinary(t, cniBinary)
	data, err := os.ReadFile(next)
	require.NoError(t, err)
	tmp := filepath.Join(dir, ".cni-install.killed")
	require.NoError(t, os.WriteFile(tmp, data, 0o755))
	require.NoError(t, os.Rename(tmp, filepath.Join(dir, "cni")))

	r := install(t, "--dir", dir, "--binary", next, "--mode", "hardlink")

	assert.NotContains(t, r.stdout, "replace ")
	assert.Equal(t, found, it.Listing(t, filepath.Join(dir, cniinstall.KeptDir)))
	for _, name := range pluginNames(t, cniBinary) {
		assertEntry(t, dir, "hardlink", name)
	}
	install(t, "--dir", dir, "--binary", next, "--uninstall")
	assert.Equal(t, found, it.Listing(t, dir))
}
