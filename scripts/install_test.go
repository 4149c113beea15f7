// Package scripts holds the tests of the shell scripts that ship next to the
// cni binary. The tests run install-symlinks.sh, a wrapper of `cni install`, against
// the real cni binary in temporary directories: that it maps its flags and $DESTDIR to
// cni install's and runs it (what cni install does is tested in internal/runtime/cli
// and internal/runtime/install). They need no root and touch no network state.
package scripts

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

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

// run executes the script with shell ("sh" or "bash") and a clean environment: no
// DESTDIR or CNI_* from the caller leaks into it, and PATH holds no cni.
func run(t *testing.T, shell string, extraEnv []string, args ...string) result {
	t.Helper()
	path, err := filepath.Abs(script)
	require.NoError(t, err)
	cmd := exec.Command(shell, append([]string{path}, args...)...)
	cmd.Dir = t.TempDir()
	cmd.Env = append([]string{"PATH=/usr/bin:/bin"}, extraEnv...)
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
func install(t *testing.T, env []string, args ...string) result {
	t.Helper()
	r := run(t, "sh", env, args...)
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
		link, err := os.Readlink(p)
		require.NoError(t, err)
		assert.Equal(t, "cni", link, "%s must be a relative link to cni", p)
	case "hardlink":
		assert.True(t, os.SameFile(fi, cniInfo), "%s is not a hardlink of cni", p)
	case "copy":
		assert.False(t, os.SameFile(fi, cniInfo), "%s is a hardlink, not a copy", p)
		pt.RequireSameContent(t, filepath.Join(dir, "cni"), p)
	}
}

// The wrapper runs BINARY install, under sh and bash, in every mode: cni install's
// summary line says it did the work, and every name is there and verified.
func TestScriptInstallsThroughCniInstall(t *testing.T) {
	names := pluginNames(t, cniBinary)
	for _, shell := range []string{"sh", "bash"} {
		for _, mode := range []string{"symlink", "hardlink", "copy"} {
			t.Run(shell+"/"+mode, func(t *testing.T) {
				t.Parallel()
				dir := filepath.Join(t.TempDir(), "opt", "cni", "bin")
				r := run(t, shell, nil, "--dir", dir, "--binary", cniBinary, "--mode", mode)
				require.Equal(t, 0, r.code, "stderr:\n%s", r.stderr)
				assert.Regexp(t, `\ndone: \d+ change\(s\)\n$`, r.stdout)
				pt.RequireSameContent(t, cniBinary, filepath.Join(dir, "cni"))
				for _, name := range names {
					assertEntry(t, dir, mode, name)
					assert.Contains(t, r.stdout, "verified "+filepath.Join(dir, name)+"\n")
				}
				assert.ElementsMatch(t, append([]string{"cni"}, names...), pt.Entries(t, dir))
			})
		}
	}
}

// argsRecorder writes an executable that prints its arguments one a line, and where
// it ran, in place of cni: what the wrapper execs.
func argsRecorder(t *testing.T, path string) {
	t.Helper()
	require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
	require.NoError(t, os.WriteFile(path, []byte("#!/bin/sh\necho \"ran $0\"\nprintf '%s\\n' \"$@\"\n"), 0o755))
}

// Every flag of the script reaches cni install as its own, and $DESTDIR as --destdir;
// configs are left alone (--conf-dir empty), as the script never wrote any.
func TestScriptMapsItsFlagsToCniInstalls(t *testing.T) {
	root := t.TempDir()
	bin := filepath.Join(root, "cni-build")
	argsRecorder(t, bin)
	cases := []struct {
		name string
		env  []string
		args []string
		want []string
	}{
		{
			name: "defaults",
			args: []string{"--binary", bin},
			want: []string{"--destdir", "", "--dir", "/opt/cni/bin", "--binary", bin, "--mode", "symlink", "--only", "", "--skip", "",
				"--list-file", "", "--dry-run=0", "--force=0", "--uninstall=0", "--no-verify=0"},
		},
		{
			name: "every flag",
			env:  []string{"DESTDIR=/stage"},
			args: []string{"--dir=/x/bin", "--binary", bin, "--mode", "copy", "--only", "a,b", "--skip=c",
				"--dry-run", "--force", "--uninstall", "--no-verify"},
			want: []string{"--destdir", "/stage", "--dir", "/x/bin", "--binary", bin, "--mode", "copy", "--only", "a,b", "--skip", "c",
				"--list-file", "", "--dry-run=1", "--force=1", "--uninstall=1", "--no-verify=1"},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := install(t, tc.env, tc.args...)
			want := append([]string{"ran " + bin, "install", "--conf-dir="}, tc.want...)
			assert.Equal(t, want, strings.Split(strings.TrimSuffix(r.stdout, "\n"), "\n"))
		})
	}
}

// Under --list-file BINARY may be another architecture's: the wrapper never runs it but
// the cni on PATH, which installs BINARY with the listed names and skips verification.
func TestScriptListFileRunsTheCniOnPathNotTheBinary(t *testing.T) {
	root := t.TempDir()
	marker := filepath.Join(root, "was-executed")
	bin := filepath.Join(root, "cni-other-arch")
	require.NoError(t, os.WriteFile(bin, []byte("#!/bin/sh\ntouch "+marker+"\nexit 1\n"), 0o755))
	list := filepath.Join(root, "plugins.txt")
	require.NoError(t, os.WriteFile(list, []byte("# generated by cni --list\nloopback\n\nbridge\nhost-local # ipam\n"), 0o644))
	dir := filepath.Join(root, "bin")
	r := run(t, "sh", nil, "--dir", dir, "--binary", bin, "--list-file", list)
	assert.Equal(t, 1, r.code)
	assert.Contains(t, r.stderr, "--list-file: no cni that runs here to install "+bin)

	path := filepath.Join(root, "path")
	require.NoError(t, os.Mkdir(path, 0o755))
	require.NoError(t, os.Symlink(cniBinary, filepath.Join(path, "cni")))
	r = install(t, []string{"PATH=" + path + ":/usr/bin:/bin"}, "--dir", dir, "--binary", bin, "--list-file", list, "--mode", "hardlink")

	assert.NoFileExists(t, marker)
	assert.Contains(t, r.stdout, "skipped verification")
	pt.RequireSameContent(t, bin, filepath.Join(dir, "cni"))
	for _, name := range []string{"loopback", "bridge", "host-local"} {
		assertEntry(t, dir, "hardlink", name)
	}
	assert.ElementsMatch(t, []string{"cni", "loopback", "bridge", "host-local"}, pt.Entries(t, dir))
}

func TestScriptUninstallWithoutBinaryUsesTheInstalledOne(t *testing.T) {
	for _, destdir := range []string{"", t.TempDir()} {
		dir := filepath.Join(t.TempDir(), "bin")
		env := []string{"DESTDIR=" + destdir}
		install(t, env, "--dir", dir, "--binary", cniBinary, "--mode", "copy")

		install(t, env, "--dir", dir, "--binary", filepath.Join(t.TempDir(), "gone"), "--uninstall")

		assert.Empty(t, pt.Entries(t, filepath.Join(destdir, dir)))
	}
	r := run(t, "sh", nil, "--dir", t.TempDir(), "--binary", filepath.Join(t.TempDir(), "gone"))
	assert.Equal(t, 1, r.code)
	assert.Contains(t, r.stderr, "not found or not executable")
}

// make install DESTDIR=x exports DESTDIR and passes --dir x/opt/cni/bin: the wrapper
// hands both to cni install, which prefixes DESTDIR once.
func TestScriptDestdirPrefixesDirOnce(t *testing.T) {
	for name, dir := range map[string]func(destdir string) string{
		"plain dir":                 func(string) string { return "/opt/cni/bin" },
		"dir already under destdir": func(d string) string { return filepath.Join(d, "opt", "cni", "bin") },
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			destdir := t.TempDir()

			install(t, []string{"DESTDIR=" + destdir}, "--dir", dir(destdir), "--binary", cniBinary)

			assertEntry(t, filepath.Join(destdir, "opt", "cni", "bin"), "symlink", "bridge")
			assert.ElementsMatch(t, []string{"opt"}, pt.Entries(t, destdir))
		})
	}
}

func TestUsageErrorsExitTwo(t *testing.T) {
	cases := [][]string{
		{"--bogus"},
		{"--mode", "reflink"},
		{"--dir"},
		{"--dir", ""},
	}
	for _, args := range cases {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			t.Parallel()
			r := run(t, "sh", nil, args...)
			assert.Equal(t, 2, r.code)
			assert.Contains(t, r.stderr, "Usage:")
		})
	}
	r := run(t, "sh", nil, "--help")
	assert.Equal(t, 0, r.code)
	assert.Contains(t, r.stdout, "Usage: install-symlinks")
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
