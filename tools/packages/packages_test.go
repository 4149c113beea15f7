package packages_test

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cnikit/cni/tools/internal/cnibuild"
	"github.com/cnikit/cni/tools/packages"
)

func TestMain(m *testing.M) { cnibuild.Main(m) }

// options describes a package of the amd64 build, with two systemd units standing in
// for the dhcp daemon's.
func options(t *testing.T) packages.Options {
	t.Helper()
	bin, err := cnibuild.Binary("amd64")
	require.NoError(t, err)
	names, err := packages.PluginNames(bin)
	require.NoError(t, err)
	gcCaller, err := cnibuild.GCCaller("amd64")
	require.NoError(t, err)
	units := t.TempDir()
	for _, u := range []string{"cni-dhcp.service", "cni-dhcp.socket", "README"} {
		require.NoError(t, os.WriteFile(filepath.Join(units, u), []byte("[Unit]\nDescription=test "+u+"\n"), 0o644))
	}
	unitFiles, err := packages.Units(units)
	require.NoError(t, err)
	root := cnibuild.Root()
	return packages.Options{
		Binary: bin, GCCaller: gcCaller, Names: names, Arch: "amd64", Version: "v1.2.3-4-gabcdef0",
		Homepage: "https://example.com/cni", Units: unitFiles,
		License: filepath.Join(root, "LICENSE"), Changelog: filepath.Join(root, "packaging", "changelog.yml"),
		MTime: time.Unix(1767225600, 0).UTC(),
	}
}

func tool(t *testing.T, name string, args ...string) string {
	t.Helper()
	out, err := exec.Command(name, args...).CombinedOutput()
	require.NoError(t, err, "%s %v: %s", name, args, out)
	return string(out)
}

func TestDebListsTheLinksAndItsBridgeAnswers(t *testing.T) {
	o := options(t)
	deb, err := packages.Write(o, "deb", t.TempDir())
	require.NoError(t, err)
	assert.Equal(t, "cni_1.2.3+4.gabcdef0-1_amd64.deb", filepath.Base(deb))

	contents := tool(t, "dpkg-deb", "-c", deb)
	assert.Regexp(t, `(?m)^-rwxr-xr-x root/root +\d+ .* \./opt/cni/bin/cni$`, contents)
	for _, n := range o.Names {
		assert.Regexp(t, `(?m)^lrwxrwxrwx root/root +0 .* \./opt/cni/bin/`+n+` -> cni$`, contents)
	}
	for _, f := range []string{"usr/lib/systemd/system/cni-dhcp.service", "usr/lib/systemd/system/cni-dhcp.socket",
		"usr/share/doc/cni/copyright", "usr/share/doc/cni/changelog.Debian.gz"} {
		assert.Contains(t, contents, " ./"+f+"\n")
	}
	assert.NotContains(t, contents, "README", "only systemd units are picked up")
	info := tool(t, "dpkg-deb", "-I", deb)
	assert.Contains(t, info, "Version: 1.2.3+4.gabcdef0-1")
	assert.Contains(t, info, "Architecture: amd64")
	assert.Contains(t, info, "Conflicts: kubernetes-cni\n")
	assert.Contains(t, info, "Replaces: kubernetes-cni\n")
	assert.Contains(t, info, "Provides: kubernetes-cni (= "+packages.ReferenceVersion+")\n")

	root := t.TempDir()
	tool(t, "dpkg-deb", "-x", deb, root)
	cnibuild.AssertAnswersVersion(t, filepath.Join(root, "opt/cni/bin/bridge"))
	license, err := os.ReadFile(filepath.Join(root, "usr/share/doc/cni/copyright"))
	require.NoError(t, err)
	assert.Contains(t, string(license), "Apache License")
}

func TestRpmListsTheLinksAndItsBridgeAnswers(t *testing.T) {
	for _, name := range []string{"rpm", "rpm2cpio", "cpio"} {
		if _, err := exec.LookPath(name); err != nil {
			t.Skipf("%s is not installed (apt-get install rpm rpm2cpio cpio); the .deb test covers the shared contents", name)
		}
	}
	o := options(t)
	rpm, err := packages.Write(o, "rpm", t.TempDir())
	require.NoError(t, err)
	assert.Equal(t, "cni-1.2.3+4.gabcdef0-1.x86_64.rpm", filepath.Base(rpm))

	// Debian's rpm opens its database even to read a package file, and creates an empty
	// one at %_dbpath (root's ~/.rpmdb) when there is none: a private one keeps the
	// machine's home as it was.
	db := t.TempDir()
	query := func(args ...string) string {
		return tool(t, "rpm", append([]string{"--dbpath", db, "-qp"}, args...)...)
	}
	dump := query("--dump", rpm)
	assert.Regexp(t, `(?m)^/opt/cni/bin/cni \d+ \d+ [0-9a-f]{64} 0100755 root root `, dump)
	for _, n := range o.Names {
		assert.Regexp(t, `(?m)^/opt/cni/bin/`+n+` 3 \d+ 0+ 0120\d{3} root root .* cni$`, dump)
	}
	for _, f := range []string{"/usr/lib/systemd/system/cni-dhcp.service", "/usr/lib/systemd/system/cni-dhcp.socket", "/usr/share/licenses/cni/LICENSE"} {
		assert.Contains(t, dump, f+" ")
	}
	info := query("-i", rpm)
	assert.Regexp(t, `Version\s+: 1\.2\.3\+4\.gabcdef0`, info)
	assert.Regexp(t, `License\s+: Apache-2.0`, info)
	assert.Contains(t, query("--changelog", rpm), "First packages")
	assert.Contains(t, query("--provides", rpm), "kubernetes-cni = "+packages.ReferenceVersion+"\n")
	assert.Equal(t, "kubernetes-cni\n", query("--obsoletes", rpm))
	assert.Empty(t, query("--conflicts", rpm), "the Obsoletes refuses kubernetes-cni already")

	root := t.TempDir()
	// The payload's names are absolute: without --no-absolute-filenames cpio would
	// write into the machine's own /opt/cni/bin.
	cmd := exec.Command("sh", "-c", `rpm2cpio "$1" | cpio -idm --quiet --no-absolute-filenames`, "sh", rpm)
	cmd.Dir = root
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", out)
	cnibuild.AssertAnswersVersion(t, filepath.Join(root, "opt/cni/bin/bridge"))
}

func TestSameInputsGiveTheSamePackages(t *testing.T) {
	o := options(t)
	for _, format := range []string{"deb", "rpm"} {
		a, err := packages.Write(o, format, t.TempDir())
		require.NoError(t, err)
		b, err := packages.Write(o, format, t.TempDir())
		require.NoError(t, err)
		da, err := os.ReadFile(a)
		require.NoError(t, err)
		db, err := os.ReadFile(b)
		require.NoError(t, err)
		assert.True(t, bytes.Equal(da, db), "%s: two builds differ", format)
	}
}

func TestUnitsOfAMissingDirAreNone(t *testing.T) {
	units, err := packages.Units(filepath.Join(t.TempDir(), "no-systemd-yet"))
	require.NoError(t, err)
	assert.Empty(t, units)
}

func TestPackageVersionOrdersLikeGitDescribe(t *testing.T) {
	cases := map[string]string{
		"v1.2.3":            "1.2.3",
		"1.2.3":             "1.2.3",
		"v1.2.3-4-gabcdef0": "1.2.3+4.gabcdef0",
		"v1.2.3-rc1":        "1.2.3+rc1",
		"abcdef0-dirty":     "0.0.0+abcdef0.dirty",
		"dev":               "0.0.0+dev",
		"v1.2.3-4-gabc_x y": "1.2.3+4.gabc.x.y",
	}
	for in, want := range cases {
		assert.Equal(t, want, packages.PackageVersion(in), in)
	}
}

func TestInvalidPluginNamesAreRefused(t *testing.T) {
	o := options(t)
	for _, bad := range []string{"", "cni", "../x", ".hidden", "a b"} {
		o.Names = []string{"bridge", bad}
		_, err := packages.Info(o, "deb")
		assert.ErrorContains(t, err, "invalid plugin name", bad)
	}
	assert.True(t, strings.HasPrefix(packages.PluginDir, "/opt/cni/bin"))
}
