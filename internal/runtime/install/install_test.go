package install_test

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cnikit/cni/internal/runtime/install"
	pt "github.com/cnikit/cni/internal/testbed/plugintest"
	"github.com/cnikit/cni/internal/testbed/testns"
)

// fixture is a temporary node: a plugin dir and a config dir, and the real cni binary
// as the source (verification execs every name, so a stand-in would not answer).
type fixture struct {
	src, dir, confDir string
	names             []string
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	bin := testns.Binary(t)
	out, err := exec.Command(bin, "--list").Output()
	require.NoError(t, err)
	root := t.TempDir()
	return &fixture{
		src:     bin,
		dir:     filepath.Join(root, "opt", "cni", "bin"),
		confDir: filepath.Join(root, "etc", "cni", "net.d"),
		names:   strings.Fields(string(out)),
	}
}

func (f *fixture) options(mode install.Mode, confs ...string) (install.Options, *bytes.Buffer) {
	var out bytes.Buffer
	return install.Options{
		Dir: f.dir, Source: f.src, Names: f.names, AllNames: f.names, Mode: mode,
		Confs: confs, ConfDir: f.confDir, Out: &out,
	}, &out
}

func (f *fixture) install(t *testing.T, mode install.Mode, confs ...string) string {
	t.Helper()
	o, out := f.options(mode, confs...)
	require.NoError(t, install.Install(o), out.String())
	return out.String()
}

// writeConf writes a config file to install, outside the config dir.
func writeConf(t *testing.T, name, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	require.NoError(t, os.WriteFile(p, []byte(content), 0o644))
	return p
}

const chainConf = `{"cniVersion":"1.1.0","name":"k8s","plugins":[
  {"type":"bridge","bridge":"cni0","isGateway":true,"ipMasq":true,
   "ipam":{"type":"host-local","ranges":[[{"subnet":"10.244.0.0/24"}]]}},
  {"type":"portmap","capabilities":{"portMappings":true}}]}`

func entryNames(t *testing.T, dir string) []string {
	t.Helper()
	require.DirExists(t, dir)
	return pt.Entries(t, dir)
}

var modes = []install.Mode{install.Symlink, install.Hardlink, install.Copy}

// forEachMode runs body as a parallel subtest per mode with a fixture of its own.
func forEachMode(t *testing.T, body func(t *testing.T, mode install.Mode, f *fixture)) {
	for _, mode := range modes {
		t.Run(string(mode), func(t *testing.T) {
			t.Parallel()
			body(t, mode, newFixture(t))
		})
	}
}

func TestInstallGivesEveryPluginItsName(t *testing.T) {
	forEachMode(t, func(t *testing.T, mode install.Mode, f *fixture) {

		out := f.install(t, mode)

		cni, err := os.Lstat(filepath.Join(f.dir, "cni"))
		require.NoError(t, err)
		assert.True(t, cni.Mode().IsRegular())
		assert.Equal(t, os.FileMode(0o755), cni.Mode().Perm())
		for _, n := range f.names {
			p := filepath.Join(f.dir, n)
			fi, err := os.Lstat(p)
			require.NoError(t, err)
			switch mode {
			case install.Symlink:
				link, err := os.Readlink(p)
				require.NoError(t, err)
				assert.Equal(t, "cni", link)
			case install.Hardlink:
				assert.True(t, os.SameFile(fi, cni))
			case install.Copy:
				assert.True(t, fi.Mode().IsRegular())
				assert.False(t, os.SameFile(fi, cni))
			}
			pt.AssertAnswersVersion(t, p)
			assert.Contains(t, out, "verified "+p+"\n")
		}
		assert.ElementsMatch(t, append([]string{"cni"}, f.names...), entryNames(t, f.dir), "no temporary entry left")
	})
}

func TestSecondRunChangesNothingAndSaysSo(t *testing.T) {
	forEachMode(t, func(t *testing.T, mode install.Mode, f *fixture) {
		conf := writeConf(t, "10-k8s.conflist", chainConf)
		f.install(t, mode, conf)
		before := pt.Snapshot(t, f.dir, f.confDir)

		out := f.install(t, mode, conf)

		assert.Equal(t, before, pt.Snapshot(t, f.dir, f.confDir))
		assert.Contains(t, out, "nothing to do:")
		for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
			assert.Regexp(t, `^(unchanged|verified|nothing to do:) `, line)
		}
	})
}

func TestUpgradeKeepsTheRunningInode(t *testing.T) {
	f := newFixture(t)
	f.install(t, install.Hardlink)
	running := filepath.Join(t.TempDir(), "running")
	require.NoError(t, os.Link(filepath.Join(f.dir, "cni"), running))
	old, err := os.ReadFile(running)
	require.NoError(t, err)
	next := filepath.Join(t.TempDir(), "cni")
	require.NoError(t, os.WriteFile(next, append(bytes.Clone(old), "\x00next\x00"...), 0o755))
	f.src = next

	out := f.install(t, install.Hardlink)

	assert.Contains(t, out, "install "+filepath.Join(f.dir, "cni")+" (from "+next+")")
	still, err := os.ReadFile(running)
	require.NoError(t, err)
	assert.Equal(t, old, still, "a running plugin's inode must not be rewritten")
	cni, err := os.Stat(filepath.Join(f.dir, "cni"))
	require.NoError(t, err)
	for _, n := range f.names {
		fi, err := os.Stat(filepath.Join(f.dir, n))
		require.NoError(t, err)
		assert.True(t, os.SameFile(cni, fi), "%s follows the new binary", n)
	}
}

func TestForeignEntryIsRefusedUnlessForced(t *testing.T) {
	f := newFixture(t)
	require.NoError(t, os.MkdirAll(f.dir, 0o755))
	// Not a reference plugin's name: those are taken over without --force.
	victim := filepath.Join(f.dir, "chain")
	require.NoError(t, os.WriteFile(victim, []byte("#!/bin/sh\necho other vendor\n"), 0o755))
	conf := writeConf(t, "10-k8s.conflist", chainConf)
	before := pt.Snapshot(t, f.dir, f.confDir)

	o, _ := f.options(install.Symlink, conf)
	err := install.Install(o)

	require.ErrorContains(t, err, "refusing to replace "+victim+": file not installed by cni (use --force)")
	assert.Equal(t, before, pt.Snapshot(t, f.dir, f.confDir), "a refused run changes nothing")

	o.Force = true
	require.NoError(t, install.Install(o))
	link, err := os.Readlink(victim)
	require.NoError(t, err)
	assert.Equal(t, "cni", link)
}

func TestUninstallRemovesOnlyOurs(t *testing.T) {
	forEachMode(t, func(t *testing.T, mode install.Mode, f *fixture) {
		conf := writeConf(t, "10-k8s.conflist", chainConf)
		f.install(t, mode, conf)
		// Another vendor took one of our names and put its own files beside ours.
		taken := filepath.Join(f.dir, f.names[0])
		require.NoError(t, os.Remove(taken))
		require.NoError(t, os.WriteFile(taken, []byte("other vendor\n"), 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(f.dir, "vendor-plugin"), []byte("vendor\n"), 0o755))
		require.NoError(t, os.Symlink("vendor-plugin", filepath.Join(f.dir, "vendor-link")))
		require.NoError(t, os.WriteFile(filepath.Join(f.confDir, "20-other.conflist"), []byte("{}"), 0o644))

		o, out := f.options(mode)
		o.Confs = nil
		require.NoError(t, install.Uninstall(o))

		assert.Contains(t, out.String(), "keep "+taken+" (not installed by cni)")
		assert.ElementsMatch(t, []string{f.names[0], "vendor-plugin", "vendor-link"}, entryNames(t, f.dir))
		assert.ElementsMatch(t, []string{"20-other.conflist"}, entryNames(t, f.confDir))
		data, err := os.ReadFile(taken)
		require.NoError(t, err)
		assert.Equal(t, "other vendor\n", string(data))
	})
}

func TestUninstallKeepsBinaryWhileSkippedNamesUseIt(t *testing.T) {
	f := newFixture(t)
	f.install(t, install.Copy)
	o, out := f.options(install.Copy)
	o.Names = f.names[1:]

	require.NoError(t, install.Uninstall(o))

	assert.Contains(t, out.String(), "keep "+filepath.Join(f.dir, "cni")+" (still used by: ["+f.names[0]+"])")
	assert.ElementsMatch(t, []string{"cni", f.names[0]}, entryNames(t, f.dir))
}

func TestDryRunChangesNothing(t *testing.T) {
	f := newFixture(t)
	conf := writeConf(t, "10-k8s.conflist", chainConf)
	o, out := f.options(install.Symlink, conf)
	o.DryRun = true

	require.NoError(t, install.Install(o))

	assert.NoDirExists(t, f.dir)
	assert.NoDirExists(t, f.confDir)
	assert.Contains(t, out.String(), "would write "+filepath.Join(f.confDir, "10-k8s.conflist"))
	for _, n := range f.names {
		assert.Contains(t, out.String(), "would link "+filepath.Join(f.dir, n)+" -> cni\n")
	}

	f.install(t, install.Symlink, conf)
	before := pt.Snapshot(t, f.dir, f.confDir)
	o.Confs = nil
	require.NoError(t, install.Uninstall(o))
	assert.Equal(t, before, pt.Snapshot(t, f.dir, f.confDir))
}

func TestChangedConfigReplacesOursButNotAnEditedOne(t *testing.T) {
	f := newFixture(t)
	v1 := writeConf(t, "10-k8s.conflist", chainConf)
	f.install(t, install.Symlink, v1)
	target := filepath.Join(f.confDir, "10-k8s.conflist")

	// The ConfigMap changed: the old content was ours, so it is replaced.
	v2 := writeConf(t, "10-k8s.conflist", strings.Replace(chainConf, "10.244.0.0/24", "10.245.0.0/24", 1))
	out := f.install(t, install.Symlink, v2)
	assert.Contains(t, out, "write "+target)
	pt.RequireSameContent(t, v2, target)

	// An admin edited the file: it is no longer ours.
	require.NoError(t, os.WriteFile(target, []byte(`{"cniVersion":"1.1.0","name":"k8s","plugins":[{"type":"ptp"}]}`), 0o644))
	o, _ := f.options(install.Symlink, v1)
	require.ErrorContains(t, install.Install(o), "refusing to replace "+target+": not written by cni install (use --force)")
	o.Confs = nil
	require.NoError(t, install.Uninstall(o))
	assert.FileExists(t, target, "uninstall keeps an edited config")
	assert.Equal(t, []string{"10-k8s.conflist"}, entryNames(t, f.confDir), "the record goes with the last config of ours")
}

func TestBadConfigsFailBeforeAnythingChanges(t *testing.T) {
	cases := []struct {
		name, file, content, err string
	}{
		{"not json", "10-a.conflist", "{", "unexpected end of JSON input"},
		{"no plugins", "10-a.conflist", `{"cniVersion":"1.1.0","name":"a"}`, "no plugin configs found"},
		{"legacy without type", "10-a.conf", `{"cniVersion":"1.1.0","name":"a"}`, "missing 'type'"},
		{"extension runtimes skip", "10-a.yaml", chainConf, "runtimes load only .conflist, .conf and .json files"},
		{"hidden", ".10-a.conflist", chainConf, "runtimes skip hidden files"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t)
			o, _ := f.options(install.Symlink, writeConf(t, tc.file, tc.content))

			require.ErrorContains(t, install.Install(o), tc.err)

			assert.NoDirExists(t, f.dir)
			assert.NoDirExists(t, f.confDir)
		})
	}
}

func TestTwoConfigsWithOneNameAreRefused(t *testing.T) {
	f := newFixture(t)
	o, _ := f.options(install.Symlink, writeConf(t, "10-k8s.conflist", chainConf), writeConf(t, "10-k8s.conflist", chainConf))
	require.ErrorContains(t, install.Install(o), "would both be written as 10-k8s.conflist")
	assert.NoDirExists(t, f.dir)
}

func TestInvalidNamesAreRefused(t *testing.T) {
	for _, bad := range []string{"", "cni", ".hidden", "../escape", "a/b", "sp ace"} {
		assert.Error(t, install.ValidName(bad), bad)
	}
	for _, good := range []string{"bridge", "host-local", "a.b_c"} {
		assert.NoError(t, install.ValidName(good), good)
	}
}

func TestOneExecIsRefusedWhenTheChainPluginWouldBeMissing(t *testing.T) {
	f := newFixture(t)
	list := writeConf(t, "10-k8s.conflist", chainConf)
	o, out := f.options(install.Symlink)
	o.OneExec, o.Names = []string{list}, []string{"bridge", "portmap"}

	err := install.Install(o)
	require.Error(t, err, "a config naming chain with no chain in the dir fails every pod")
	assert.Contains(t, err.Error(), `"chain"`)
	assert.NoDirExists(t, f.dir, "a refused run changes nothing")
	assert.NoDirExists(t, f.confDir)

	o.Names = []string{"bridge", "chain"}
	require.NoError(t, install.Install(o), out.String())
	pt.AssertAnswersVersion(t, filepath.Join(f.dir, "chain"))
	o.Names = []string{"bridge"}
	require.NoError(t, install.Install(o), "chain is in the dir from the earlier run: %s", out.String())
}
