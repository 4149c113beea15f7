package hostlocal

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cnikit/cni/internal/result"
	"github.com/cnikit/cni/internal/spec/skel"
	"github.com/cnikit/cni/internal/testbed/testns"
)

// These tests plant what an unlucky node or a hostile local user can leave in a network
// directory and run the binary on it the way a runtime does. Whatever is planted, ADD,
// DEL and GC finish, nothing is read, written or deleted through a symbolic link, and
// what a link points to is left exactly as it was.

// run is one exec'd command's outcome.
type run struct {
	code           int
	stdout, stderr string
}

// execTimeout bounds every exec'd command: a plugin that hangs (on a FIFO, a lock it
// should not take) is a failure, not a stuck test.
const execTimeout = 20 * time.Second

// exec runs the host-local binary for cmd with the network's config; wrap, when set,
// prefixes the command line (a shell that sets up a mount first).
func (n *network) exec(bin, cmd, id, ifname string, wrap ...string) run {
	n.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), execTimeout)
	defer cancel()
	argv := append(wrap, bin)
	c := exec.CommandContext(ctx, argv[0], argv[1:]...)
	c.Env = execEnv(cmd, id, ifname, filepath.Dir(bin))
	c.Stdin = bytes.NewReader(n.config())
	var stdout, stderr bytes.Buffer
	c.Stdout, c.Stderr = &stdout, &stderr
	if len(wrap) > 0 {
		c.SysProcAttr = &syscall.SysProcAttr{Unshareflags: syscall.CLONE_NEWNS}
	}
	err := c.Run()
	require.NoError(n.t, ctx.Err(), "%s %s/%s did not finish within %v: %s", cmd, id, ifname, execTimeout, stderr.String())
	r := run{stdout: stdout.String(), stderr: stderr.String()}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		r.code = ee.ExitCode()
	} else {
		require.NoError(n.t, err)
	}
	return r
}

// mustExec runs cmd and requires exit status 0.
func (n *network) mustExec(bin, cmd, id, ifname string) run {
	n.t.Helper()
	r := n.exec(bin, cmd, id, ifname)
	require.Equal(n.t, 0, r.code, "%s %s/%s: %s %s", cmd, id, ifname, r.stdout, r.stderr)
	return r
}

// execAdd runs ADD and returns the addresses it handed out.
func (n *network) execAdd(bin, id, ifname string) []string {
	n.t.Helper()
	r := n.mustExec(bin, skel.CmdAdd, id, ifname)
	res, err := result.Parse([]byte(r.stdout), n.version)
	require.NoError(n.t, err, r.stdout)
	return addrs(res)
}

// gcKeeping runs GC with the given container ids (on eth0) as the valid attachments.
func (n *network) gcKeeping(bin string, ids ...string) run {
	n.t.Helper()
	valid := []obj{}
	for _, id := range ids {
		valid = append(valid, obj{"containerID": id, "ifname": "eth0"})
	}
	n.extra["cni.dev/valid-attachments"] = valid
	defer delete(n.extra, "cni.dev/valid-attachments")
	return n.mustExec(bin, skel.CmdGC, "", "")
}

// gcLeavesNothing runs GC with no attachment valid: every reservation goes, and so does
// every attachment's entry in the index (whatever had been planted in its place).
func (n *network) gcLeavesNothing(bin string) {
	n.t.Helper()
	n.gcKeeping(bin)
	assert.Empty(n.t, n.reservations())
	entries, err := os.ReadDir(filepath.Join(n.dir(), indexDirName))
	require.NoError(n.t, err, "GC keeps an index directory of its own")
	assert.Empty(n.t, entries, "index entries left by GC")
}

// outside is a directory outside the data dir holding one file, to point links at.
type outside struct {
	t    *testing.T
	dir  string
	file string
}

const outsideContent = "victim\r\neth0"

func newOutside(t *testing.T) outside {
	dir := t.TempDir()
	o := outside{t: t, dir: dir, file: filepath.Join(dir, "keep")}
	require.NoError(t, os.WriteFile(o.file, []byte(outsideContent), 0o600))
	return o
}

// untouched requires the outside directory to hold exactly its one file, unchanged.
func (o outside) untouched() {
	o.t.Helper()
	entries, err := os.ReadDir(o.dir)
	require.NoError(o.t, err)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	assert.Equal(o.t, []string{"keep"}, names, "nothing created or deleted in %s", o.dir)
	data, err := os.ReadFile(o.file)
	require.NoError(o.t, err)
	assert.Equal(o.t, outsideContent, string(data), "content of %s", o.file)
}

func (n *network) plant(fn func(path string) error, name string) {
	n.t.Helper()
	require.NoError(n.t, os.MkdirAll(n.dir(), 0o755))
	require.NoError(n.t, fn(filepath.Join(n.dir(), name)))
}

func symlinkTo(target string) func(string) error {
	return func(path string) error { return os.Symlink(target, path) }
}

func fifo(path string) error { return syscall.Mkfifo(path, 0o600) }

// planting is one kind of thing a node or a user can leave under a name the plugin
// uses in its network directory.
type planting struct {
	name  string
	plant func(path string) error
}

// eachPlanted runs body as a subtest per kind, each on a network of its own (10.1.0.0/24)
// with the kind planted as name.
func eachPlanted(t *testing.T, name string, kinds []planting, body func(t *testing.T, n *network, kind planting)) {
	t.Helper()
	for _, kind := range kinds {
		t.Run(kind.name, func(t *testing.T) {
			n := newNetwork(t, obj{"subnet": "10.1.0.0/24"})
			n.plant(kind.plant, name)
			body(t, n, kind)
		})
	}
}

func TestPlantedIndexSymlinkIsNeverFollowed(t *testing.T) {
	bin := hostLocalBinary(t)
	n := newNetwork(t, obj{"subnet": "10.1.0.0/24"})
	o := newOutside(t)
	n.plant(symlinkTo(o.dir), indexDirName)

	assert.Equal(t, []string{"10.1.0.2/24"}, n.execAdd(bin, "a", "eth0"))
	o.untouched()
	n.mustExec(bin, skel.CmdCheck, "a", "eth0")
	n.gcKeeping(bin, "a")
	o.untouched()
	n.mustExec(bin, skel.CmdDel, "a", "eth0")
	o.untouched()
	assert.Empty(t, n.reservations())
	fi, err := os.Lstat(filepath.Join(n.dir(), indexDirName))
	require.NoError(t, err)
	assert.True(t, fi.IsDir(), "the planted link was replaced by our own index directory")
}

func TestStrayIndexFileDoesNotBreakAddDelOrGC(t *testing.T) {
	bin := hostLocalBinary(t)
	eachPlanted(t, indexDirName, []planting{
		{"regular file", func(p string) error { return os.WriteFile(p, []byte("junk"), 0o600) }},
		{"fifo", fifo},
		{"dangling symlink", symlinkTo("/nonexistent/cni-index")},
	}, func(t *testing.T, n *network, kind planting) {
		assert.Equal(t, []string{"10.1.0.2/24"}, n.execAdd(bin, "a", "eth0"))
		r := n.exec(bin, skel.CmdAdd, "a", "eth0")
		assert.Contains(t, r.stdout, "duplicate allocation", "the attachment's address is still known")
		n.mustExec(bin, skel.CmdDel, "a", "eth0")
		assert.Empty(t, n.reservations())

		n.plant(os.RemoveAll, indexDirName)
		n.plant(kind.plant, indexDirName)
		assert.Equal(t, []string{"10.1.0.3/24"}, n.execAdd(bin, "b", "eth0"))
		n.plant(os.RemoveAll, indexDirName)
		n.plant(kind.plant, indexDirName)
		n.gcLeavesNothing(bin)
	})
}

func TestSymlinkNamedLikeAnAddressIsNotAReservation(t *testing.T) {
	bin := hostLocalBinary(t)
	n := newNetwork(t, obj{"subnet": "10.1.0.0/24"})
	o := newOutside(t)
	n.plant(symlinkTo(o.file), "10.1.0.2")

	assert.Equal(t, []string{"10.1.0.3/24"}, n.execAdd(bin, "a", "eth0"), "the name is taken, the link not followed")
	n.mustExec(bin, skel.CmdDel, "victim", "eth0")
	o.untouched()
	_, err := os.Lstat(filepath.Join(n.dir(), "10.1.0.2"))
	require.NoError(t, err, "DEL of the owner the target names does not touch the link")
	n.gcKeeping(bin, "a")
	o.untouched()
	_, err = os.Lstat(filepath.Join(n.dir(), "10.1.0.2"))
	assert.True(t, os.IsNotExist(err), "GC removed the link itself")
	assert.Equal(t, map[string]string{"10.1.0.3": "a\r\neth0"}, n.reservations())
}

func TestFIFONamedLikeAnAddressDoesNotHang(t *testing.T) {
	bin := hostLocalBinary(t)
	n := newNetwork(t, obj{"subnet": "10.1.0.0/24"})
	n.plant(fifo, "10.1.0.2")
	assert.Equal(t, []string{"10.1.0.3/24"}, n.execAdd(bin, "a", "eth0"))
	n.mustExec(bin, skel.CmdDel, "b", "eth0")
	n.gcKeeping(bin, "a")
	_, err := os.Lstat(filepath.Join(n.dir(), "10.1.0.2"))
	assert.True(t, os.IsNotExist(err), "GC removed the FIFO")
}

func TestDirectoryNamedLikeAnAddressDoesNotBreakAnything(t *testing.T) {
	bin := hostLocalBinary(t)
	n := newNetwork(t, obj{"subnet": "10.1.0.0/24"})
	n.plant(func(p string) error { return os.Mkdir(p, 0o755) }, "10.1.0.2")
	n.plant(func(p string) error { return os.Mkdir(p, 0o755) }, "10.1.0.3")
	n.plant(func(p string) error { return os.WriteFile(p, []byte(outsideContent), 0o600) }, "10.1.0.3/keep")

	assert.Equal(t, []string{"10.1.0.4/24"}, n.execAdd(bin, "a", "eth0"))
	n.mustExec(bin, skel.CmdDel, "victim", "eth0")
	r := n.gcKeeping(bin, "a")
	assert.Contains(t, r.stderr, "10.1.0.3", "the directory GC cannot remove is reported")
	_, err := os.Lstat(filepath.Join(n.dir(), "10.1.0.2"))
	assert.True(t, os.IsNotExist(err), "GC removed the empty directory")
	data, err := os.ReadFile(filepath.Join(n.dir(), "10.1.0.3", "keep"))
	require.NoError(t, err, "a directory with content is left alone")
	assert.Equal(t, outsideContent, string(data))
	n.mustExec(bin, skel.CmdDel, "a", "eth0")
}

func TestPlantedLockSymlinkIsNeitherCreatedNorLocked(t *testing.T) {
	bin := hostLocalBinary(t)
	t.Run("missing target", func(t *testing.T) {
		n := newNetwork(t, obj{"subnet": "10.1.0.0/24"})
		target := filepath.Join(t.TempDir(), "created-through-link")
		n.plant(symlinkTo(target), lockName)
		assert.Equal(t, []string{"10.1.0.2/24"}, n.execAdd(bin, "a", "eth0"))
		n.mustExec(bin, skel.CmdDel, "a", "eth0")
		n.gcLeavesNothing(bin)
		_, err := os.Lstat(target)
		assert.True(t, os.IsNotExist(err), "the link's target was not created")
	})
	t.Run("target held locked", func(t *testing.T) {
		// Were the link followed, the plugin would wait for this flock until killed.
		n := newNetwork(t, obj{"subnet": "10.1.0.0/24"})
		o := newOutside(t)
		f, err := os.Open(o.file)
		require.NoError(t, err)
		defer f.Close()
		require.NoError(t, syscall.Flock(int(f.Fd()), syscall.LOCK_EX))
		n.plant(symlinkTo(o.file), lockName)
		assert.Equal(t, []string{"10.1.0.2/24"}, n.execAdd(bin, "a", "eth0"))
		n.mustExec(bin, skel.CmdDel, "a", "eth0")
		n.gcLeavesNothing(bin)
		o.untouched()
	})
	eachPlanted(t, lockName, []planting{
		{"fifo", fifo},
		{"directory with content", func(p string) error {
			if err := os.Mkdir(p, 0o755); err != nil {
				return err
			}
			return os.WriteFile(filepath.Join(p, "keep"), nil, 0o600)
		}},
	}, func(t *testing.T, n *network, _ planting) {
		assert.Equal(t, []string{"10.1.0.2/24"}, n.execAdd(bin, "a", "eth0"))
		n.mustExec(bin, skel.CmdDel, "a", "eth0")
		n.gcLeavesNothing(bin)
	})
}

func TestGarbageLastReservedDoesNotBreakAdd(t *testing.T) {
	bin := hostLocalBinary(t)
	big := strings.Repeat("1", 1<<20)
	eachPlanted(t, lastReservedName+"0", []planting{
		{"text", func(p string) error { return os.WriteFile(p, []byte("not an address\x00"), 0o600) }},
		{"other family", func(p string) error { return os.WriteFile(p, []byte("fd00::7"), 0o600) }},
		{"outside the range", func(p string) error { return os.WriteFile(p, []byte("192.168.0.9"), 0o600) }},
		{"huge", func(p string) error { return os.WriteFile(p, []byte(big), 0o600) }},
		{"fifo", fifo},
		{"symlink to /dev/zero", symlinkTo("/dev/zero")},
		{"directory", func(p string) error { return os.Mkdir(p, 0o755) }},
	}, func(t *testing.T, n *network, _ planting) {
		assert.Equal(t, []string{"10.1.0.2/24"}, n.execAdd(bin, "a", "eth0"))
		assert.Equal(t, []string{"10.1.0.3/24"}, n.execAdd(bin, "b", "eth0"))
		n.mustExec(bin, skel.CmdDel, "a", "eth0")
		n.gcLeavesNothing(bin)
	})
}

func TestForeignEntriesInTheIndexAreCleanedWithoutFollowing(t *testing.T) {
	bin := hostLocalBinary(t)
	n := newNetwork(t, obj{"subnet": "10.1.0.0/24"})
	o := newOutside(t)
	assert.Equal(t, []string{"10.1.0.2/24"}, n.execAdd(bin, "a", "eth0"))
	idx := filepath.Join(n.dir(), indexDirName)
	// The entry of a, replaced by a directory holding a link out; b's by a file; and
	// some junk whose tree holds a link out too.
	require.NoError(t, os.Remove(filepath.Join(idx, "a:eth0")))
	require.NoError(t, os.MkdirAll(filepath.Join(idx, "a:eth0", "deeper"), 0o755))
	require.NoError(t, os.Symlink(o.dir, filepath.Join(idx, "a:eth0", "deeper", "out")))
	require.NoError(t, os.WriteFile(filepath.Join(idx, "b:eth0"), []byte("junk"), 0o600))
	require.NoError(t, os.MkdirAll(filepath.Join(idx, "junk", "x"), 0o755))
	require.NoError(t, os.Symlink(o.file, filepath.Join(idx, "junk", "x", "out")))
	require.NoError(t, syscall.Mkfifo(filepath.Join(idx, "fifo"), 0o600))

	r := n.exec(bin, skel.CmdAdd, "a", "eth0")
	assert.Contains(t, r.stdout, "duplicate allocation", "a's address is found by the walk")
	assert.Equal(t, []string{"10.1.0.3/24"}, n.execAdd(bin, "b", "eth0"))
	n.mustExec(bin, skel.CmdDel, "a", "eth0")
	assert.Equal(t, map[string]string{"10.1.0.3": "b\r\neth0"}, n.reservations())
	n.gcKeeping(bin, "b")
	o.untouched()
	entries, err := os.ReadDir(idx)
	require.NoError(t, err)
	for _, e := range entries {
		assert.Equal(t, os.ModeSymlink, e.Type(), "only our records are left in the index: %s", e.Name())
	}
	n.mustExec(bin, skel.CmdDel, "b", "eth0")
	assert.Empty(t, n.reservations())
}

func TestTempLeftoversAreRemovedByTheNextDel(t *testing.T) {
	bin := hostLocalBinary(t)
	n := newNetwork(t, obj{"subnet": "10.1.0.0/24"})
	assert.Equal(t, []string{"10.1.0.2/24"}, n.execAdd(bin, "a", "eth0"))
	// What an ADD killed at the wrong moment leaves: its staged reservation, a
	// last_reserved_ip swap and an index record that was not renamed yet.
	n.writeReference(tempPrefix+"reserve-0123456789abcdef", "b\r\neth0")
	n.writeReference(tempPrefix+"last_reserved_ip.0-0123456789abcdef", "10.1.0.2")
	require.NoError(t, os.Symlink("cni-index-v1|10.1.0.3|b|eth0", filepath.Join(n.dir(), indexDirName, tempPrefix+"0123456789abcdef")))

	n.mustExec(bin, skel.CmdDel, "b", "eth0")
	for _, pattern := range []string{filepath.Join(n.dir(), ".tmp-*"), filepath.Join(n.dir(), indexDirName, ".tmp-*")} {
		left, err := filepath.Glob(pattern)
		require.NoError(t, err)
		assert.Empty(t, left, "DEL removed the leftovers")
	}
	assert.Equal(t, map[string]string{"10.1.0.2": "a\r\neth0"}, n.reservations())
}

func TestKilledAddsLeaveNoTempFilesAfterTheirDel(t *testing.T) {
	bin := hostLocalBinary(t)
	n := newNetwork(t, obj{"subnet": "10.4.0.0/24"})
	for i := 0; i < 30; i++ {
		id := "k" + strings.Repeat("x", i)
		c := exec.Command(bin)
		c.Env = execEnv(skel.CmdAdd, id, "eth0", filepath.Dir(bin))
		c.Stdin = bytes.NewReader(n.config())
		require.NoError(t, c.Start())
		time.Sleep(time.Duration(i%10) * 400 * time.Microsecond)
		c.Process.Signal(syscall.SIGKILL)
		c.Wait()
		n.mustExec(bin, skel.CmdDel, id, "eth0")
	}
	assert.Empty(t, n.reservations())
	left, err := filepath.Glob(filepath.Join(n.dir(), ".tmp-*"))
	require.NoError(t, err)
	assert.Empty(t, left)
}

func TestDelNeedsNoValidRanges(t *testing.T) {
	bin := hostLocalBinary(t)
	n := newNetwork(t, obj{"subnet": "10.1.0.0/24"})
	assert.Equal(t, []string{"10.1.0.2/24"}, n.execAdd(bin, "a", "eth0"))
	// The config changed so that ADD would refuse it: DEL still releases.
	n.ipam["ranges"] = []any{set(obj{"subnet": "10.9.0.0/16"}), set(obj{"subnet": "10.9.1.0/24"})}
	r := n.exec(bin, skel.CmdAdd, "b", "eth0")
	assert.Equal(t, 1, r.code, "ADD refuses overlapping ranges: %s", r.stdout)
	assert.Contains(t, r.stdout, `"code": 7`)
	n.mustExec(bin, skel.CmdDel, "b", "eth0")
	n.mustExec(bin, skel.CmdDel, "a", "eth0")
	assert.Empty(t, n.reservations())
	n.gcKeeping(bin)
}

// TestDelOnAReadOnlyDataDir runs the binary in a mount namespace of its own in which the
// data dir is a read-only bind mount of itself.
func TestDelOnAReadOnlyDataDir(t *testing.T) {
	testns.RequireRoot(t)
	bin := hostLocalBinary(t)
	// Bind, then remount read-only: busybox's mount (the test-kernel VM's) ignores ro on
	// the bind itself.
	readOnly := []string{"/bin/sh", "-c", `PATH=/usr/sbin:/usr/bin:/sbin:/bin; mount --bind "$0" "$0" && mount -o remount,bind,ro "$0" && exec "$1"`}
	t.Run("with state", func(t *testing.T) {
		n := newNetwork(t, obj{"subnet": "10.1.0.0/24"})
		assert.Equal(t, []string{"10.1.0.2/24"}, n.execAdd(bin, "a", "eth0"))
		ro := append(readOnly, n.dataDir)
		r := n.exec(bin, skel.CmdDel, "other", "eth0", ro...)
		assert.Equal(t, 0, r.code, "an attachment holding nothing: %s %s", r.stdout, r.stderr)
		r = n.exec(bin, skel.CmdDel, "a", "eth0", ro...)
		assert.NotEqual(t, 0, r.code, "an address that cannot be released is an error")
		assert.Contains(t, r.stdout, "read-only file system")
		assert.Equal(t, map[string]string{"10.1.0.2": "a\r\neth0"}, n.reservations())
		// Without its index (as after a crash), which cannot be rebuilt here.
		require.NoError(t, os.RemoveAll(filepath.Join(n.dir(), indexDirName)))
		r = n.exec(bin, skel.CmdDel, "other", "eth0", ro...)
		assert.Equal(t, 0, r.code, "%s %s", r.stdout, r.stderr)
		r = n.exec(bin, skel.CmdDel, "a", "eth0", ro...)
		assert.Contains(t, r.stdout, "read-only file system", "the walk still finds a's address")
		n.extra["cni.dev/valid-attachments"] = []obj{{"containerID": "a", "ifname": "eth0"}}
		r = n.exec(bin, skel.CmdGC, "", "", ro...)
		assert.Equal(t, 0, r.code, "GC with nothing to release: %s %s", r.stdout, r.stderr)
	})
	t.Run("without a lock file", func(t *testing.T) {
		n := newNetwork(t, obj{"subnet": "10.1.0.0/24"})
		require.NoError(t, os.MkdirAll(n.dir(), 0o755))
		r := n.exec(bin, skel.CmdDel, "a", "eth0", append(readOnly, n.dataDir)...)
		assert.Equal(t, 0, r.code, "%s %s", r.stdout, r.stderr)
	})
}

func TestDelWithoutADataDirSucceeds(t *testing.T) {
	bin := hostLocalBinary(t)
	for _, tc := range []struct {
		name    string
		dataDir func(t *testing.T) any
	}{
		{"missing", func(t *testing.T) any { return filepath.Join(t.TempDir(), "no", "such") }},
		{"not a string", func(t *testing.T) any { return 5 }},
		{"a file", func(t *testing.T) any {
			p := filepath.Join(t.TempDir(), "file")
			require.NoError(t, os.WriteFile(p, nil, 0o600))
			return p
		}},
		{"network dir is a file", func(t *testing.T) any {
			d := t.TempDir()
			require.NoError(t, os.WriteFile(filepath.Join(d, "testnet"), nil, 0o600))
			return d
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := newNetwork(t, obj{"subnet": "10.1.0.0/24"})
			n.ipam["dataDir"] = tc.dataDir(t)
			n.mustExec(bin, skel.CmdDel, "a", "eth0")
			n.mustExec(bin, skel.CmdGC, "", "")
		})
	}
}

func TestLongContainerIDThroughTheBinary(t *testing.T) {
	bin := hostLocalBinary(t)
	n := newNetwork(t, obj{"ranges": []any{set(obj{"subnet": "10.1.0.0/24"}), set(obj{"subnet": "fd00::/64"})}})
	id := strings.Repeat("c", 240)
	assert.Equal(t, []string{"10.1.0.2/24", "fd00::2/64"}, n.execAdd(bin, id, "very-long-name0"))
	n.mustExec(bin, skel.CmdCheck, id, "very-long-name0")
	n.mustExec(bin, skel.CmdDel, id, "very-long-name0")
	assert.Empty(t, n.reservations())
}

func TestResolvConfThatIsNoRegularFileFailsFast(t *testing.T) {
	bin := hostLocalBinary(t)
	dir := t.TempDir()
	require.NoError(t, syscall.Mkfifo(filepath.Join(dir, "fifo"), 0o600))
	for _, path := range []string{filepath.Join(dir, "fifo"), "/dev/zero", dir} {
		n := newNetwork(t, obj{"subnet": "10.1.0.0/24", "resolvConf": path})
		r := n.exec(bin, skel.CmdAdd, "a", "eth0")
		assert.Equal(t, 1, r.code, path)
		assert.Contains(t, r.stdout, "ipam.resolvConf", path)
		assert.Contains(t, r.stdout, `"code": 7`, path)
		assert.Empty(t, n.reservations(), path)
	}
	// A link to a regular file, as /etc/resolv.conf often is, is followed.
	real := filepath.Join(dir, "resolv.conf")
	require.NoError(t, os.WriteFile(real, []byte("nameserver 10.1.0.53\r\nsearch a b\n"), 0o644))
	require.NoError(t, os.Symlink(real, filepath.Join(dir, "link")))
	n := newNetwork(t, obj{"subnet": "10.1.0.0/24", "resolvConf": filepath.Join(dir, "link")})
	r := n.mustExec(bin, skel.CmdAdd, "a", "eth0")
	res, err := result.Parse([]byte(r.stdout), n.version)
	require.NoError(t, err)
	assert.Equal(t, []string{"10.1.0.53"}, res.DNS.Nameservers)
	assert.Equal(t, []string{"a", "b"}, res.DNS.Search)
}

// TestConcurrentAddsRepairingAPlantedLockStayExclusive starts many ADDs at once on a
// directory whose lock is a planted link: they all repair it under the directory's
// flock, and still hand out every address once.
func TestConcurrentAddsRepairingAPlantedLockStayExclusive(t *testing.T) {
	bin := hostLocalBinary(t)
	n := newNetwork(t, obj{"subnet": "10.5.0.0/24"})
	o := newOutside(t)
	n.plant(symlinkTo(o.file), lockName)
	const procs = 12
	got := make([][]string, procs)
	errs := make(chan error, procs)
	var wg sync.WaitGroup
	for i := range procs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := runBinary(bin, n, skel.CmdAdd, fmt.Sprintf("c%d", i))
			if err != nil {
				errs <- err
				return
			}
			got[i] = addrs(res)
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	seen := map[string]bool{}
	for _, a := range got {
		require.Len(t, a, 1)
		assert.False(t, seen[a[0]], "%s handed out twice", a[0])
		seen[a[0]] = true
	}
	o.untouched()
	fi, err := os.Lstat(filepath.Join(n.dir(), lockName))
	require.NoError(t, err)
	assert.True(t, fi.Mode().IsRegular())
}
