package tuning

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	pt "github.com/cnikit/cni/internal/testbed/plugintest"
	"github.com/cnikit/cni/internal/testbed/testns"
)

// These tests run the binary as "tuning" inside the fixture's host namespace, the way
// a runtime does, with a backup directory someone tampered with.

// exec runs cmd for container id on the fixture's interface with config on stdin.
func (f *fixture) exec(t *testing.T, cmd, id string, config []byte, env ...string) pt.Outcome {
	t.Helper()
	return pt.Exec(t, f.host, pt.Call{Bin: testns.LinkPlugin(t, "tuning"), Command: cmd,
		ContainerID: id, Netns: f.cont.Path, IfName: f.ifName, Config: config, Env: env})
}

func (f *fixture) mustExec(t *testing.T, cmd, id string, config []byte) pt.Outcome {
	t.Helper()
	r := f.exec(t, cmd, id, config)
	require.Equal(t, 0, r.Exit, "%s: %s", cmd, r)
	return r
}

// mtu reads the container interface's MTU.
func (f *fixture) mtu(t *testing.T) int {
	t.Helper()
	l, err := f.cont.Handle(t).LinkByName(f.ifName)
	require.NoError(t, err)
	return l.Attrs().MTU
}

func (f *fixture) backup() string { return filepath.Join(f.dataDir, "ctr1_"+f.ifName+".json") }

func TestExecdDelDropsBackupEntriesOutsideNet(t *testing.T) {
	f := setup(t)
	before := f.read(t)
	c := f.conf(`"mtu":1400,"sysctl":{"net.ipv4.conf.IFNAME.arp_ignore":"1","net.core.somaxconn":"1234"}`)
	f.mustExec(t, "ADD", "ctr1", c)
	require.Equal(t, 1400, f.mtu(t))

	// A backup naming sysctls DEL must never write: outside net/, or escaping it.
	f.editBackup(t, func(b map[string]any) {
		sysctls := b["sysctls"].(map[string]any)
		sysctls["kernel/hostname"] = "pwned"
		sysctls["net/../kernel/domainname"] = "pwned"
	})

	r := f.mustExec(t, "DEL", "ctr1", f.conf(""))
	assert.Contains(t, r.Stderr, "kernel/hostname", "the dropped entry is reported")
	assert.Equal(t, before, f.read(t), "everything else restored")
	assert.NoFileExists(t, f.backup())
	host, err := os.Hostname()
	require.NoError(t, err)
	assert.NotEqual(t, "pwned", host)
}

// editBackup rewrites the attachment's backup through fn.
func (f *fixture) editBackup(t *testing.T, fn func(b map[string]any)) {
	t.Helper()
	var b map[string]any
	data, err := os.ReadFile(f.backup())
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(data, &b))
	fn(b)
	data, err = json.Marshal(b)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(f.backup(), data, 0o600))
}

func TestExecdDelDropsValuesTheKernelRefuses(t *testing.T) {
	f := setup(t)
	before := f.read(t)
	f.mustExec(t, "ADD", "ctr1", f.conf(`"mtu":1400,"txQLen":77,"sysctl":{"net.ipv4.conf.IFNAME.arp_ignore":"1","net.core.somaxconn":"1234"}`))
	f.editBackup(t, func(b map[string]any) {
		b["mtu"] = 1_000_000
		b["sysctls"].(map[string]any)["net/core/somaxconn"] = "not a number"
	})
	r := f.mustExec(t, "DEL", "ctr1", f.conf(""))
	assert.Contains(t, r.Stderr, "somaxconn")
	assert.Contains(t, r.Stderr, "mtu")
	after := f.read(t)
	assert.Equal(t, before.arpIgnore, after.arpIgnore, "the other values are restored")
	assert.Equal(t, before.txqlen, after.txqlen)
	assert.Equal(t, 1400, after.mtu, "the refused one stays as ADD left it")
	assert.NoFileExists(t, f.backup())
}

func TestExecdDelWithACorruptBackupSucceeds(t *testing.T) {
	outside := filepath.Join(t.TempDir(), "keep")
	require.NoError(t, os.WriteFile(outside, []byte(`{"mtu":1280}`), 0o600))
	cases := []struct {
		name  string
		plant func(string) error
	}{
		{"not json", func(p string) error { return os.WriteFile(p, []byte("{not json"), 0o600) }},
		{"wrong types", func(p string) error { return os.WriteFile(p, []byte(`{"mtu":"big","sysctls":[1]}`), 0o600) }},
		{"bad mac", func(p string) error { return os.WriteFile(p, []byte(`{"mac":"zz"}`), 0o600) }},
		{"huge", func(p string) error { return os.WriteFile(p, bytes.Repeat([]byte(" "), 4<<20), 0o600) }},
		{"fifo", func(p string) error { return syscall.Mkfifo(p, 0o600) }},
		{"symlink to a backup outside", func(p string) error { return os.Symlink(outside, p) }},
		{"symlink to /dev/zero", func(p string) error { return os.Symlink("/dev/zero", p) }},
		{"empty directory", func(p string) error { return os.Mkdir(p, 0o700) }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := setup(t)
			mtu := f.mtu(t)
			require.NoError(t, tc.plant(f.backup()))
			f.mustExec(t, "DEL", "ctr1", f.conf(""))
			_, err := os.Lstat(f.backup())
			assert.True(t, os.IsNotExist(err), "the entry itself is removed: %v", err)
			assert.Equal(t, mtu, f.mtu(t), "nothing restored from what is not our backup")
			data, err := os.ReadFile(outside)
			require.NoError(t, err)
			assert.Equal(t, `{"mtu":1280}`, string(data))
		})
	}
}

func TestExecdAddReplacesAPlantedLinkWithoutWritingThroughIt(t *testing.T) {
	f := setup(t)
	outside := filepath.Join(t.TempDir(), "keep")
	require.NoError(t, os.WriteFile(outside, []byte(`{"mtu":1280}`), 0o600))
	require.NoError(t, os.Symlink(outside, f.backup()))
	mtu := f.mtu(t)
	f.mustExec(t, "ADD", "ctr1", f.conf(`"mtu":1400`))
	fi, err := os.Lstat(f.backup())
	require.NoError(t, err)
	assert.True(t, fi.Mode().IsRegular(), "our backup replaced the link")
	data, err := os.ReadFile(outside)
	require.NoError(t, err)
	assert.Equal(t, `{"mtu":1280}`, string(data), "the link's target is untouched")
	f.mustExec(t, "DEL", "ctr1", f.conf(""))
	assert.Equal(t, mtu, f.mtu(t), "restored from our backup, not the planted one")
}

func TestExecdLongContainerIDAndInterfaceName(t *testing.T) {
	f := setupIf(t, "very-long-name0")
	id := strings.Repeat("c", 240)
	require.Greater(t, len(id+"_very-long-name0.json"), 255, "premise: the reference's name does not fit")
	mtu := f.mtu(t)
	f.mustExec(t, "ADD", id, f.conf(`"mtu":1400`))
	assert.Equal(t, 1400, f.mtu(t))
	entries, err := os.ReadDir(f.dataDir)
	require.NoError(t, err)
	require.Len(t, entries, 1, "one backup, no temp file left")
	assert.LessOrEqual(t, len(entries[0].Name()), 255)
	f.mustExec(t, "DEL", id, f.conf(""))
	assert.Equal(t, mtu, f.mtu(t))
	entries, err = os.ReadDir(f.dataDir)
	require.NoError(t, err)
	assert.Empty(t, entries)

	// A name that fits keeps the reference's layout.
	g := setup(t)
	id = strings.Repeat("c", 200)
	g.mustExec(t, "ADD", id, g.conf(`"mtu":1400`))
	assert.FileExists(t, filepath.Join(g.dataDir, id+"_eth0.json"))
	g.mustExec(t, "DEL", id, g.conf(""))
	assert.NoFileExists(t, filepath.Join(g.dataDir, id+"_eth0.json"))
}

func TestExecdDelRemovesStaleTempFilesOnly(t *testing.T) {
	f := setup(t)
	old := time.Now().Add(-10 * time.Minute)
	stale := []string{".tmp-ctr9_eth0.json-12345", ".tmp-0123456789abcdef"}
	for _, name := range stale {
		p := filepath.Join(f.dataDir, name)
		require.NoError(t, os.WriteFile(p, []byte("{"), 0o600))
		require.NoError(t, os.Chtimes(p, old, old))
	}
	fresh := filepath.Join(f.dataDir, ".tmp-fedcba9876543210") // a concurrent ADD's
	require.NoError(t, os.WriteFile(fresh, []byte("{"), 0o600))
	other := filepath.Join(f.dataDir, "ctr9_eth0.json") // another attachment's backup
	require.NoError(t, os.WriteFile(other, []byte(`{"mtu":1400}`), 0o600))
	require.NoError(t, os.Chtimes(other, old, old))

	f.mustExec(t, "DEL", "ctr1", f.conf(""))
	for _, name := range stale {
		assert.NoFileExists(t, filepath.Join(f.dataDir, name))
	}
	assert.FileExists(t, fresh)
	assert.FileExists(t, other)
}

func TestExecdDelIgnoresSettingsItDoesNotNeed(t *testing.T) {
	f := setup(t)
	mtu := f.mtu(t)
	f.mustExec(t, "ADD", "ctr1", f.conf(`"mtu":1400`))
	bad := f.conf(`"mtu":5,"mac":"zz","txQLen":-1,"sysctl":{"../../kernel/hostname":"x"},"args":{"cni":{"mtu":"big"}}`)
	r := f.exec(t, "ADD", "ctr2", bad)
	assert.Equal(t, 1, r.Exit, "ADD refuses this config: %s", r.Stdout)
	r = f.exec(t, "DEL", "ctr1", bad, "CNI_ARGS=MAC=notamac;Unknown=1")
	assert.Equal(t, 0, r.Exit, "%s %s", r.Stdout, r.Stderr)
	assert.Equal(t, mtu, f.mtu(t), "restored from the backup")
	assert.NoFileExists(t, f.backup())
}

func TestExecdDelWithoutADataDirSucceeds(t *testing.T) {
	f := setup(t)
	file := filepath.Join(t.TempDir(), "file")
	require.NoError(t, os.WriteFile(file, nil, 0o600))
	for _, dir := range []string{filepath.Join(t.TempDir(), "missing"), file} {
		c := []byte(`{"cniVersion":"1.0.0","name":"tune","type":"tuning","dataDir":"` + dir + `"}`)
		f.mustExec(t, "DEL", "ctr1", c)
	}
	f.mustExec(t, "DEL", "ctr1", []byte(`{"cniVersion":"1.0.0","name":"tune","type":"tuning","dataDir":7}`))
}
