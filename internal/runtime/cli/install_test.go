package cli_test

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/cnikit/cni/internal/runtime/install"
	it "github.com/cnikit/cni/internal/runtime/install/installtest"
	pt "github.com/cnikit/cni/internal/testbed/plugintest"
	"github.com/cnikit/cni/internal/testbed/testns"
)

// cniCmd runs the binary with a clean environment.
func cniCmd(t *testing.T, args ...string) run {
	t.Helper()
	o := pt.RunCommand(t, nil, []string{"PATH=/usr/bin:/bin"}, nil, testns.Binary(t), args...)
	return run{code: o.Exit, stdout: o.Stdout, stderr: o.Stderr}
}

func pluginNames(t *testing.T) []string {
	t.Helper()
	r := cniCmd(t, "--list")
	require.Equal(t, 0, r.code)
	return strings.Fields(r.stdout)
}

// event is one inotify event: the watched directory, the entry name and what happened.
type event struct {
	dir, name string
	mask      uint32
}

// watch records, in the kernel's order, every event of mask (unix.IN_MOVED_TO: an
// entry renamed into a dir) on the entries of dirs.
func watch(t *testing.T, mask uint32, dirs ...string) func() []event {
	t.Helper()
	fd, err := unix.InotifyInit1(unix.IN_NONBLOCK | unix.IN_CLOEXEC)
	require.NoError(t, err)
	t.Cleanup(func() { unix.Close(fd) })
	wds := map[int32]string{}
	for _, d := range dirs {
		wd, err := unix.InotifyAddWatch(fd, d, mask)
		require.NoError(t, err)
		wds[int32(wd)] = d
	}
	return func() []event {
		var out []event
		buf := make([]byte, 1<<16)
		for {
			n, err := unix.Read(fd, buf)
			if errors.Is(err, unix.EAGAIN) {
				return out
			}
			require.NoError(t, err)
			for off := 0; off < n; {
				ev := (*unix.InotifyEvent)(unsafe.Pointer(&buf[off]))
				name := string(bytes.TrimRight(buf[off+unix.SizeofInotifyEvent:off+unix.SizeofInotifyEvent+int(ev.Len)], "\x00"))
				require.Zero(t, ev.Mask&unix.IN_Q_OVERFLOW, "inotify queue overflowed")
				if ev.Mask&mask != 0 {
					out = append(out, event{dir: wds[ev.Wd], name: name, mask: ev.Mask})
				}
				off += unix.SizeofInotifyEvent + int(ev.Len)
			}
		}
	}
}

func TestInstallCommandPutsBinariesBeforeConfigs(t *testing.T) {
	root := t.TempDir()
	dir, confDir := filepath.Join(root, "opt/cni/bin"), filepath.Join(root, "etc/cni/net.d")
	require.NoError(t, os.MkdirAll(dir, 0o755))
	require.NoError(t, os.MkdirAll(confDir, 0o755))
	src := filepath.Join(t.TempDir(), "10-k8s.conflist")
	conf := `{"cniVersion":"1.1.0","name":"k8s","plugins":[{"type":"bridge","ipam":{"type":"host-local","subnet":"10.244.0.0/24"}},{"type":"portmap","capabilities":{"portMappings":true}}]}`
	require.NoError(t, os.WriteFile(src, []byte(conf), 0o644))
	events := watch(t, unix.IN_MOVED_TO, dir, confDir)

	r := cniCmd(t, "install", "--dir", dir, "--conf", src, "--conf-dir", confDir)

	require.Equal(t, 0, r.code, r.stderr)
	names := pluginNames(t)
	seen := events()
	var order []string
	lastBin, firstConf := -1, len(seen)
	for i, ev := range seen {
		order = append(order, filepath.Base(ev.dir)+"/"+ev.name)
		if ev.dir == dir {
			lastBin = i
		} else if i < firstConf {
			firstConf = i
		}
	}
	assert.Less(t, lastBin, firstConf, "every binary is renamed into place before the first config: %v", order)
	assert.Contains(t, order, "net.d/10-k8s.conflist")
	assert.Contains(t, order, "bin/cni", "renamed into place, not written in place")
	for _, n := range names {
		assert.Contains(t, order, "bin/"+n, "renamed into place, not written in place")
		pt.AssertAnswersVersion(t, filepath.Join(dir, n))
	}
	data, err := os.ReadFile(filepath.Join(confDir, "10-k8s.conflist"))
	require.NoError(t, err)
	assert.Equal(t, conf, string(data))
	assert.Equal(t, 0o644, int(mustStat(t, filepath.Join(confDir, "10-k8s.conflist")).Mode().Perm()))

	r = cniCmd(t, "install", "--dir", dir, "--conf", src, "--conf-dir", confDir)
	require.Equal(t, 0, r.code, r.stderr)
	assert.Contains(t, r.stdout, "nothing to do:")
	assert.Empty(t, events(), "a second run renames nothing")
}

func mustStat(t *testing.T, p string) os.FileInfo {
	t.Helper()
	fi, err := os.Stat(p)
	require.NoError(t, err)
	return fi
}

func TestInstallCommandInstallsTheRunningExecutable(t *testing.T) {
	// Run a copy under another name: /proc/self/exe is what gets installed.
	self := filepath.Join(t.TempDir(), "cni-v9")
	data, err := os.ReadFile(testns.Binary(t))
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(self, append(data, "\x00v9"...), 0o755))
	dir := filepath.Join(t.TempDir(), "bin")
	cmd := exec.Command(self, "install", "--dir", dir, "--only", "bridge")
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", out)
	want, err := os.ReadFile(self)
	require.NoError(t, err)
	got, err := os.ReadFile(filepath.Join(dir, "cni"))
	require.NoError(t, err)
	assert.True(t, bytes.Equal(want, got))
	assert.False(t, os.SameFile(mustStat(t, self), mustStat(t, filepath.Join(dir, "cni"))), "a copy, not a link to the source")
	pt.AssertAnswersVersion(t, filepath.Join(dir, "bridge"))
}

func TestInstallCommandUsageErrors(t *testing.T) {
	cases := []struct {
		args   []string
		stderr string
	}{
		{[]string{"install", "--mode", "reflink"}, `--mode must be symlink, hardlink or copy, not "reflink"`},
		{[]string{"install", "--only", "bridge,nosuch"}, "unknown plugin name in --only: nosuch"},
		{[]string{"install", "extra"}, `unexpected argument "extra"`},
		{[]string{"install", "--conf", ""}, "empty file name"},
	}
	for _, tc := range cases {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			r := cniCmd(t, tc.args...)
			assert.Equal(t, 2, r.code)
			assert.Contains(t, r.stderr, tc.stderr)
		})
	}
}

// chain is a name of ours that the reference plugins never had: a file another vendor
// put there is not taken over unasked, on a kubeadm node neither.
func TestInstallCommandFailureNamesTheFile(t *testing.T) {
	dir := t.TempDir()
	it.PlantReferencePlugins(t, dir)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "chain"), []byte("vendor"), 0o755))
	found := it.Listing(t, dir)

	r := cniCmd(t, "install", "--dir", dir)

	assert.Equal(t, 1, r.code)
	assert.Equal(t, "cni install: refusing to replace "+filepath.Join(dir, "chain")+": file not installed by cni (use --force)\n", r.stderr)
	assert.Equal(t, found, it.Listing(t, dir), "a refused run changes nothing")
}

// On a kubeadm node /opt/cni/bin holds the kubernetes-cni package's plugins, and the
// DaemonSet's init container runs this very command there. No reference plugin's name
// is missing at any moment, on the way in or out: a name goes away only by an unlink or
// a rename away from it, and the kernel reports neither for one.
func TestInstallCommandTakesOverAKubeadmNodeAndUninstallGivesItBack(t *testing.T) {
	root := t.TempDir()
	dir, confDir := filepath.Join(root, "opt/cni/bin"), filepath.Join(root, "etc/cni/net.d")
	planted := it.PlantReferencePlugins(t, dir)
	found := it.Listing(t, dir)
	src := filepath.Join(t.TempDir(), "10-cni.conflist")
	require.NoError(t, os.WriteFile(src, []byte(`{"cniVersion":"1.1.0","name":"k8s","plugins":[{"type":"bridge",`+
		`"ipam":{"type":"host-local","subnet":"10.244.0.0/24"}},{"type":"portmap","capabilities":{"portMappings":true}}]}`), 0o644))
	gone := watch(t, unix.IN_DELETE|unix.IN_MOVED_FROM, dir)

	r := cniCmd(t, "install", "--dir", dir, "--conf", src, "--conf-dir", confDir)

	require.Equal(t, 0, r.code, r.stderr)
	for _, n := range pluginNames(t) {
		link, err := os.Readlink(filepath.Join(dir, n))
		require.NoError(t, err)
		assert.Equal(t, "cni", link)
		pt.AssertAnswersVersion(t, filepath.Join(dir, n))
	}
	keptDir := filepath.Join(dir, install.KeptDir)
	for _, n := range planted {
		assert.Contains(t, r.stdout, "replace "+filepath.Join(dir, n)+" (kept as "+filepath.Join(keptDir, n)+" for --uninstall)\n")
	}
	assert.Equal(t, found, it.Listing(t, keptDir), "the originals kept, regular files as the same inode")
	assert.FileExists(t, filepath.Join(confDir, "10-cni.conflist"))

	r = cniCmd(t, "install", "--uninstall", "--dir", dir, "--conf-dir", confDir)

	require.Equal(t, 0, r.code, r.stderr)
	assert.Equal(t, found, it.Listing(t, dir), "the plugin directory exactly as found")
	assert.Empty(t, pt.Entries(t, confDir))
	for _, ev := range gone() {
		assert.NotContains(t, planted, ev.name, "%s went missing (inotify mask %#x)", ev.name, ev.mask)
	}
}

func TestInstallOneExecWritesTheListAsOneChainPlugin(t *testing.T) {
	src := filepath.Join(t.TempDir(), "10-k8s.conflist")
	list := `{"cniVersion":"1.0.0","name":"k8s","plugins":[
		{"type":"bridge","bridge":"cni0","ipam":{"type":"host-local","subnet":"10.88.0.0/16"}},
		{"type":"portmap","capabilities":{"portMappings":true}},
		{"type":"bandwidth","capabilities":{"bandwidth":true}}]}`
	require.NoError(t, os.WriteFile(src, []byte(list), 0o644))
	dir, confDir := filepath.Join(t.TempDir(), "bin"), filepath.Join(t.TempDir(), "net.d")

	r := cniCmd(t, "install", "--dir", dir, "--only", "bridge,chain", "--one-exec", src, "--conf-dir", confDir)
	require.Equal(t, 0, r.code, r.stderr)
	assert.Contains(t, r.stdout, "write "+filepath.Join(confDir, "10-k8s.conflist"))

	// The runtime's view of the written list: one plugin, the chain, with the capabilities.
	ls := cniCmd(t, "ls", "--conf-dir", confDir)
	require.Equal(t, 0, ls.code, ls.stderr)
	assert.Regexp(t, `(?m)^k8s\s+1\.0\.0\s+chain\(bridge,portmap,bandwidth\)\s`, ls.stdout)
	data, err := os.ReadFile(filepath.Join(confDir, "10-k8s.conflist"))
	require.NoError(t, err)
	assert.Contains(t, string(data), `"capabilities": {
        "bandwidth": true,
        "portMappings": true
      },`)

	again := cniCmd(t, "install", "--dir", dir, "--only", "bridge,chain", "--one-exec", src, "--conf-dir", confDir)
	require.Equal(t, 0, again.code, again.stderr)
	assert.Contains(t, again.stdout, "nothing to do:", "the wrapped list is the same bytes every run")

	gone := cniCmd(t, "install", "--uninstall", "--dir", dir, "--only", "bridge,chain", "--one-exec", src, "--conf-dir", confDir)
	require.Equal(t, 0, gone.code, gone.stderr)
	assert.NoFileExists(t, filepath.Join(confDir, "10-k8s.conflist"), "uninstall removes what --one-exec wrote")
}

func TestInstallOneExecRefusesAThirdPartyPluginAndChangesNothing(t *testing.T) {
	src := filepath.Join(t.TempDir(), "10-k8s.conflist")
	require.NoError(t, os.WriteFile(src, []byte(`{"cniVersion":"1.0.0","name":"k8s","plugins":[`+
		`{"type":"bridge"},{"type":"cilium-cni"}]}`), 0o644))
	dir, confDir := filepath.Join(t.TempDir(), "bin"), filepath.Join(t.TempDir(), "net.d")
	r := cniCmd(t, "install", "--dir", dir, "--one-exec", src, "--conf-dir", confDir)
	assert.Equal(t, 1, r.code)
	assert.Contains(t, r.stderr, "--one-exec "+src+`: plugins[1].type: "cilium-cni" is not built into cni`)
	assert.Contains(t, r.stderr, "install this list as it is (with --conf)")
	assert.NoDirExists(t, dir, "a refused run changes nothing")
	assert.NoDirExists(t, confDir)

	single := filepath.Join(t.TempDir(), "10-br.conf")
	require.NoError(t, os.WriteFile(single, []byte(`{"cniVersion":"1.0.0","name":"br","type":"bridge"}`), 0o644))
	r = cniCmd(t, "install", "--dir", dir, "--one-exec", single, "--conf-dir", confDir)
	assert.Equal(t, 1, r.code)
	assert.Contains(t, r.stderr, "not a .conflist")
}

func TestSleepExitsZeroOnSIGTERM(t *testing.T) {
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGINT} {
		t.Run(sig.String(), func(t *testing.T) {
			cmd := exec.Command(testns.Binary(t), "sleep")
			require.NoError(t, cmd.Start())
			done := make(chan error, 1)
			go func() { done <- cmd.Wait() }()
			// Signalled before Go installs its handler, any process dies of the signal:
			// wait until the kernel says the signal is caught, however slow the start.
			waitCaught(t, cmd.Process.Pid, sig)
			// It must still be sleeping: nothing but a signal ends it.
			select {
			case err := <-done:
				t.Fatalf("cni sleep returned by itself: %v", err)
			case <-time.After(300 * time.Millisecond):
			}
			require.NoError(t, cmd.Process.Signal(sig))
			select {
			case err := <-done:
				assert.NoError(t, err, "exit status 0")
			case <-time.After(10 * time.Second):
				cmd.Process.Kill()
				t.Fatal("cni sleep ignored " + sig.String())
			}
		})
	}
}

// waitCaught waits until process pid catches sig, as its /proc status reports.
func waitCaught(t *testing.T, pid int, sig syscall.Signal) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		status, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
		require.NoError(t, err)
		for _, l := range strings.Split(string(status), "\n") {
			if mask, ok := strings.CutPrefix(l, "SigCgt:"); ok {
				bits, err := strconv.ParseUint(strings.TrimSpace(mask), 16, 64)
				require.NoError(t, err)
				if bits&(1<<(uint(sig)-1)) != 0 {
					return
				}
			}
		}
	}
	t.Fatalf("process %d never caught %v", pid, sig)
}

// killAtTempCreate runs `cni install --mode copy` into dir and kills it (SIGKILL, as an
// OOM kill or a node reboot stops it) as soon as it has created its nth temporary
// entry there (any hidden name). It returns how many temporary entries the killed run
// left.
func killAtTempCreate(t *testing.T, dir string, nth int) int {
	t.Helper()
	fd, err := unix.InotifyInit1(unix.IN_NONBLOCK | unix.IN_CLOEXEC)
	require.NoError(t, err)
	defer unix.Close(fd)
	_, err = unix.InotifyAddWatch(fd, dir, unix.IN_CREATE)
	require.NoError(t, err)
	cmd := exec.Command(testns.Binary(t), "install", "--mode", "copy", "--dir", dir)
	require.NoError(t, cmd.Start())
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	seen, buf := 0, make([]byte, 1<<16)
	for seen < nth {
		select {
		case <-exited:
			return countTemps(t, dir)
		default:
		}
		fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
		if _, err := unix.Poll(fds, 100); err != nil && !errors.Is(err, unix.EINTR) {
			require.NoError(t, err)
		}
		n, err := unix.Read(fd, buf)
		if errors.Is(err, unix.EAGAIN) {
			continue
		}
		require.NoError(t, err)
		for off := 0; off < n; {
			ev := (*unix.InotifyEvent)(unsafe.Pointer(&buf[off]))
			name := string(bytes.TrimRight(buf[off+unix.SizeofInotifyEvent:off+unix.SizeofInotifyEvent+int(ev.Len)], "\x00"))
			if strings.HasPrefix(name, ".") {
				seen++
			}
			off += unix.SizeofInotifyEvent + int(ev.Len)
		}
	}
	require.NoError(t, cmd.Process.Kill())
	<-exited
	return countTemps(t, dir)
}

// countTemps counts the hidden entries of dir: in a plugin dir that only cni install
// writes and that has no foreign file to keep, each is a temporary entry.
func countTemps(t *testing.T, dir string) int {
	t.Helper()
	n := 0
	for _, e := range pt.Entries(t, dir) {
		if strings.HasPrefix(e, ".") {
			n++
		}
	}
	return n
}

// Installs killed at various points (the 6-12 MB copies of the binary each leaves
// under a hidden name) never pile up: at most one entry of a killed run is left, and
// the next run removes it before writing its own.
func TestKilledInstallsLeaveNothingOnceTheNextRunIsDone(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "bin")
	require.NoError(t, os.MkdirAll(dir, 0o755))
	killed, left := 0, 0
	for round := 0; round < 20 && left < 3; round++ {
		n := killAtTempCreate(t, dir, 1+round*3%len(pluginNames(t)))
		assert.LessOrEqual(t, n, 1, "a run has one temporary entry at a time, and removed those of the runs before it")
		left += n
		killed++
	}
	require.NotZero(t, left, "premise: %d killed installs left a temporary entry", killed)

	r := cniCmd(t, "install", "--mode", "copy", "--dir", dir)

	require.Equal(t, 0, r.code, r.stderr)
	assert.Zero(t, countTemps(t, dir), "the run after the killed ones removes what they left")
	assert.Contains(t, r.stdout, "(left by an interrupted cni install)")
}
