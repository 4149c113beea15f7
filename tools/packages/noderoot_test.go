package packages_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// requireRootAnd skips a test that installs packages unless it runs as root with the
// given tools: dpkg and rpm want root for --root, and a machine without apt or rpm
// cannot say what they would do.
func requireRootAnd(t *testing.T, tools ...string) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("installing packages into a private root needs root (make test runs as root)")
	}
	for _, name := range tools {
		if _, err := exec.LookPath(name); err != nil {
			t.Skipf("%s is not installed; this test runs the package manager itself", name)
		}
	}
}

// dpkgRoot is a node of its own for dpkg and apt: an install root with its dpkg database
// (dir/var/lib/dpkg) in the test's temp dir, and an apt configuration that reads that
// database and nothing of the machine's: no sources, no apt.conf.d with its hooks, its
// own cache, lists, logs and locks.
type dpkgRoot struct {
	dir, aptConfig, tmp string
}

func newDpkgRoot(t *testing.T) *dpkgRoot {
	t.Helper()
	requireRootAnd(t, "dpkg", "dpkg-query", "apt-get")
	r := &dpkgRoot{dir: t.TempDir(), tmp: t.TempDir()}
	for _, d := range []string{"var/lib/dpkg/info", "var/lib/dpkg/updates", "var/log"} {
		require.NoError(t, os.MkdirAll(filepath.Join(r.dir, d), 0o755))
	}
	require.NoError(t, os.WriteFile(filepath.Join(r.dir, "var/lib/dpkg/status"), nil, 0o644))

	apt := t.TempDir()
	for _, d := range []string{"etc/apt/apt.conf.d", "etc/apt/preferences.d", "etc/apt/sources.list.d",
		"var/lib/apt/lists/partial", "var/cache/apt/archives/partial", "var/log/apt"} {
		require.NoError(t, os.MkdirAll(filepath.Join(apt, d), 0o755))
	}
	require.NoError(t, os.WriteFile(filepath.Join(apt, "etc/apt/sources.list"), nil, 0o644))
	// Dir moves apt's state, cache, configuration and logs under apt/, so the machine's
	// apt.conf.d is never read. The sandbox user _apt could not read the test's temp dir.
	r.aptConfig = filepath.Join(apt, "apt.conf")
	conf := fmt.Sprintf(`Dir %q;
Dir::State::status %q;
APT::Sandbox::User "root";
Dpkg::Use-Pty "false";
DPkg::Options { %s; };
`, apt+"/", filepath.Join(r.dir, "var/lib/dpkg/status"), quoteAll(r.dpkgOptions()))
	require.NoError(t, os.WriteFile(r.aptConfig, []byte(conf), 0o644))
	return r
}

// dpkgOptions keep dpkg inside the root. --log: dpkg reads the machine's
// /etc/dpkg/dpkg.cfg even with --root, and its "log /var/log/dpkg.log" would record the
// test's installs in the machine's log. There is no --force-script-chrootless: a
// maintainer script would then run chrooted into the empty root and fail, where
// chrootless it would act on the machine.
func (r *dpkgRoot) dpkgOptions() []string {
	return []string{"--root=" + r.dir, "--log=" + filepath.Join(r.dir, "var/log/dpkg.log")}
}

func quoteAll(s []string) string {
	q := make([]string, len(s))
	for i, v := range s {
		q[i] = fmt.Sprintf("%q", v)
	}
	return strings.Join(q, "; ")
}

// run runs a dpkg or apt command on the root from dir (apt-get install ./x.deb takes
// paths relative to it).
func (r *dpkgRoot) run(dir, name string, args ...string) (string, error) {
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "APT_CONFIG="+r.aptConfig, "TMPDIR="+r.tmp, "DEBIAN_FRONTEND=noninteractive")
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// dpkg runs dpkg on the root.
func (r *dpkgRoot) dpkg(args ...string) (string, error) {
	return r.run("", "dpkg", append(r.dpkgOptions(), args...)...)
}

// apt runs apt-get on the root from dir.
func (r *dpkgRoot) apt(dir string, args ...string) (string, error) {
	return r.run(dir, "apt-get", args...)
}

// status is dpkg's status of pkg in the root ("install ok installed"), "" when the
// database has no record of it (never installed, or removed with nothing left).
func (r *dpkgRoot) status(t *testing.T, pkg string) string {
	t.Helper()
	out, err := r.run("", "dpkg-query", "--admindir="+filepath.Join(r.dir, "var/lib/dpkg"), "-W", "-f=${Status}", pkg)
	if err != nil {
		require.Contains(t, out, "no packages found matching "+pkg)
		return ""
	}
	return out
}

// rpmRoot is a node of its own for rpm: an install root with its rpm database in the
// test's temp dir, at /var/lib/rpm inside it as on an RPM distribution (Debian's rpm
// would otherwise use ~/.rpmdb, under the root too).
type rpmRoot struct{ dir string }

func newRPMRoot(t *testing.T) *rpmRoot {
	t.Helper()
	requireRootAnd(t, "rpm")
	r := &rpmRoot{dir: t.TempDir()}
	out, err := r.rpm("--initdb")
	require.NoError(t, err, "rpm --initdb: %s", out)
	return r
}

// install runs rpm with an install mode (-i, -U) on the root. --nosignature: the packages
// are unsigned, and an rpm whose %_pkgverify_level is "signature" would refuse them; their
// digests are still checked. Debian's rpm needs nothing more: no --nodigest, no
// --ignorearch or --ignoreos for packages of the machine's own architecture.
func (r *rpmRoot) install(mode string, pkgs ...string) (string, error) {
	return r.rpm(append([]string{mode, "--nosignature"}, pkgs...)...)
}

// rpm runs rpm on the root.
func (r *rpmRoot) rpm(args ...string) (string, error) {
	cmd := exec.Command("rpm", append([]string{"--root", r.dir, "--dbpath", "/var/lib/rpm"}, args...)...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}
