package scripts

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cnikit/cni/internal/testbed/testns"
)

// skipInVM skips where deps.sh has no business: make test-kernel's VM runs prebuilt test
// binaries on a root made for them, without apt, make or bash; deps.sh's "kernel" group
// has already run on the host that built it.
func skipInVM(t *testing.T) {
	t.Helper()
	if testns.Prebuilt() {
		t.Skip("deps.sh sets up the machine that builds and runs the tests; the test-kernel VM is made by it, not for it")
	}
}

// The packages of deps.sh's test group, in its order.
var testGroup = []string{"iproute2", "iptables", "nftables", "iputils-ping", "dbus-daemon", "dnsmasq-base",
	"dpkg", "rpm", "rpm2cpio", "cpio"}

// fakeHost is a machine as deps.sh sees it: a PATH holding only fake commands, so that
// whether it is Debian, who runs it and what is installed are the test's to say.
type fakeHost struct {
	dir       string
	bin       string
	installed string // dpkg's list, one package a line; apt-get install appends
	aptLog    string // one line per apt-get call
}

func newFakeHost(t *testing.T, uid int) *fakeHost {
	t.Helper()
	skipInVM(t)
	dir := t.TempDir()
	h := &fakeHost{dir: dir, bin: filepath.Join(dir, "bin"), installed: filepath.Join(dir, "installed"),
		aptLog: filepath.Join(dir, "apt.log")}
	require.NoError(t, os.Mkdir(h.bin, 0o755))
	require.NoError(t, os.WriteFile(h.installed, nil, 0o644))
	h.command(t, "id", "[ \"$1\" = -u ] && echo "+strconv.Itoa(uid))
	return h
}

// command puts an executable shell script called name on the fake PATH. Its body may
// use only shell builtins: nothing else is on that PATH.
func (h *fakeHost) command(t *testing.T, name, body string) {
	t.Helper()
	require.NoError(t, os.WriteFile(filepath.Join(h.bin, name), []byte("#!/bin/sh\n"+body+"\n"), 0o755))
}

// debian makes the host Debian: dpkg-query answers from the installed list, and
// apt-get logs its calls and, for install, adds the packages to the list unless
// failInstalls says how many install calls fail first (as with empty package lists).
func (h *fakeHost) debian(t *testing.T, installed []string, failInstalls int) {
	t.Helper()
	h.install(t, installed...)
	h.command(t, "dpkg-query", `[ "$1" = -W ] || exit 2
pkg=$3
while read -r p; do
	if [ "$p" = "$pkg" ]; then printf installed; exit 0; fi
done < `+h.installed+`
exit 1`)
	require.NoError(t, os.WriteFile(filepath.Join(h.dir, "fails"), []byte(strconv.Itoa(failInstalls)), 0o644))
	h.command(t, "apt-get", `echo "$*" >> `+h.aptLog+`
[ "$1" = install ] || exit 0
read -r fails < `+filepath.Join(h.dir, "fails")+`
if [ "$fails" -gt 0 ]; then echo $((fails - 1)) > `+filepath.Join(h.dir, "fails")+`; exit 100; fi
for a in "$@"; do
	case $a in install|-*) ;; *) echo "$a" >> `+h.installed+`;; esac
done`)
}

func (h *fakeHost) install(t *testing.T, pkgs ...string) {
	t.Helper()
	f, err := os.OpenFile(h.installed, os.O_APPEND|os.O_WRONLY, 0)
	require.NoError(t, err)
	defer f.Close()
	for _, p := range pkgs {
		_, err := f.WriteString(p + "\n")
		require.NoError(t, err)
	}
}

func (h *fakeHost) aptCalls(t *testing.T) []string {
	t.Helper()
	data, err := os.ReadFile(h.aptLog)
	if os.IsNotExist(err) {
		return nil
	}
	require.NoError(t, err)
	return strings.Split(strings.TrimSpace(string(data)), "\n")
}

// run runs deps.sh with the fake PATH and no sbin directories beyond it.
func (h *fakeHost) run(t *testing.T, args ...string) (code int, stderr string) {
	t.Helper()
	bash, err := exec.LookPath("bash")
	require.NoError(t, err)
	cmd := exec.Command(bash, append([]string{"deps.sh"}, args...)...)
	cmd.Env = []string{"PATH=" + h.bin, "DEPS_SBIN="}
	var errb bytes.Buffer
	cmd.Stderr = &errb
	err = cmd.Run()
	if ee, ok := err.(*exec.ExitError); ok {
		return ee.ExitCode(), errb.String()
	}
	require.NoError(t, err, "stderr: %s", errb.String())
	return 0, errb.String()
}

func TestDepsNotAsRootNamesEveryMissingPackageAtOnce(t *testing.T) {
	h := newFakeHost(t, 1000)
	h.debian(t, []string{"iproute2", "nftables", "dpkg"}, 0)
	code, stderr := h.run(t, "test")
	assert.Equal(t, 1, code)
	for _, p := range []string{"iptables", "iputils-ping", "dbus-daemon", "dnsmasq-base", "rpm", "rpm2cpio", "cpio"} {
		assert.Contains(t, stderr, p+" (", "missing %s is named", p)
	}
	for _, p := range []string{"iproute2", "nftables", "dpkg"} {
		assert.NotContains(t, stderr, p+" (", "installed %s is not named", p)
	}
	assert.Contains(t, stderr, "run as root to install them")
	assert.Empty(t, h.aptCalls(t), "nothing is installed")
}

func TestDepsElsewhereNamesMissingPackagesByTheirCommands(t *testing.T) {
	h := newFakeHost(t, 0)
	// No apt-get, no dpkg-query: not Debian, so the commands decide, root or not.
	h.command(t, "ip", "exit 0")
	h.command(t, "nft", "exit 0")
	code, stderr := h.run(t)
	assert.Equal(t, 1, code)
	assert.Contains(t, stderr, "missing for test: iptables (iptables-save), iputils-ping (ping), dbus-daemon (dbus-daemon), "+
		"dnsmasq-base (dnsmasq), dpkg (dpkg-deb), rpm (rpm), rpm2cpio (rpm2cpio), cpio (cpio)\n")
	assert.NotContains(t, stderr, "iproute2")
	assert.Contains(t, stderr, "install the equivalents")
}

func TestDepsAsRootOnDebianInstallsWhatIsMissing(t *testing.T) {
	h := newFakeHost(t, 0)
	h.debian(t, []string{"iproute2", "iptables", "nftables", "dpkg", "rpm", "cpio"}, 0)
	code, stderr := h.run(t, "test")
	require.Equal(t, 0, code, stderr)
	assert.Contains(t, stderr, "installing for test: iputils-ping dbus-daemon dnsmasq-base rpm2cpio")
	assert.Equal(t, []string{"install -y -q --no-install-recommends iputils-ping dbus-daemon dnsmasq-base rpm2cpio"}, h.aptCalls(t))

	code, stderr = h.run(t, "test")
	assert.Equal(t, 0, code)
	assert.Empty(t, stderr, "once installed, nothing to say")
	assert.Len(t, h.aptCalls(t), 1, "and nothing more to install")
}

func TestDepsUpdatesThePackageListsOnlyWhenAnInstallFails(t *testing.T) {
	h := newFakeHost(t, 0)
	h.debian(t, nil, 1)
	code, stderr := h.run(t, "demo")
	require.Equal(t, 0, code, stderr)
	assert.Equal(t, []string{"install -y -q --no-install-recommends iproute2", "update -q",
		"install -y -q --no-install-recommends iproute2"}, h.aptCalls(t))
}

func TestDepsFailsWhenTheInstallFailsOrLeavesAPackageMissing(t *testing.T) {
	h := newFakeHost(t, 0)
	h.debian(t, nil, 2)
	code, stderr := h.run(t, "demo")
	assert.Equal(t, 1, code)
	assert.Contains(t, stderr, "apt-get install iproute2 failed")

	h = newFakeHost(t, 0)
	h.debian(t, nil, 0)
	h.command(t, "apt-get", "exit 0") // says yes, installs nothing
	code, stderr = h.run(t, "demo")
	assert.Equal(t, 1, code)
	assert.Contains(t, stderr, "still missing after apt-get install: iproute2")
}

func TestDepsCIGroupIsEveryGroupEachPackageOnce(t *testing.T) {
	h := newFakeHost(t, 1000)
	h.debian(t, nil, 0)
	_, stderr := h.run(t, "ci")
	for _, p := range append(testGroup, "qemu-system-x86", "busybox-static", "kmod", "containerd", "runc") {
		assert.Equal(t, 1, strings.Count(stderr, " "+p+" ("), "%s named once", p)
	}
}

func TestDepsRefusesAnUnknownGroup(t *testing.T) {
	h := newFakeHost(t, 0)
	h.debian(t, nil, 0)
	code, stderr := h.run(t, "tset")
	assert.Equal(t, 2, code)
	assert.Contains(t, stderr, `unknown group "tset"`)
	assert.Empty(t, h.aptCalls(t))
}

// TestDepsComesFirstInMakeDemoTestAndCI: the one list is used by make demo, make test,
// make test-e2e, make test-crio, make test-cluster, make test-kernel and .ci/run, before anything else
// they do.
func TestDepsComesFirstInMakeDemoTestAndCI(t *testing.T) {
	skipInVM(t)
	for target, want := range map[string]string{"demo": "scripts/deps.sh demo", "test": "scripts/deps.sh test",
		"test-e2e": "scripts/deps.sh e2e", "test-crio": "scripts/deps.sh crio", "test-cluster": "scripts/deps.sh cluster"} {
		cmd := exec.Command("make", "-n", "--no-print-directory", target)
		cmd.Dir = ".."
		out, _ := cmd.Output() // -n still runs $(MAKE) lines; their failures do not matter here
		first, _, _ := strings.Cut(string(out), "\n")
		assert.Equal(t, want, first, "make %s", target)
	}
	ci, err := os.ReadFile("../.ci/run")
	require.NoError(t, err)
	deps, test := strings.Index(string(ci), "\nstage deps scripts/deps.sh ci\n"), strings.Index(string(ci), "\nstage test make test\n")
	assert.True(t, deps >= 0 && deps < test, ".ci/run: scripts/deps.sh ci comes before make test")
	kernel, err := os.ReadFile("test-kernel.sh")
	require.NoError(t, err)
	assert.Contains(t, string(kernel), `"$repo/scripts/deps.sh" kernel`)
}
